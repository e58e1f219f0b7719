package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// Effect kinds of the fenced design's two operations.
const (
	kindPromote = "db.promote"
	kindTraffic = "dns.upsert"
)

// epochBase is simulated time zero on the ledger's clock: journal entries
// and dispatch times are stamped in simulated time.
var epochBase = time.Date(2026, 11, 28, 2, 12, 0, 0, time.UTC)

// simTime is the ledger's clock reading at simulated time d.
func simTime(d time.Duration) time.Time { return epochBase.Add(d) }

// topologyDigest is the promotion's precondition digest: the writer, and
// the target of a promotion in progress. It is readable on purpose: a
// journal reason that quotes it says what the world was.
func topologyDigest(writer, promoting string) string {
	return "writer=" + writer + ";promoting=" + orDash(promoting)
}

// trafficDigest is the digest of a traffic change's world as the --worker
// world's gateway observes it (worker_world.go): the topology and the
// record's value at the DNS provider, so that an operator's edit of the
// record after the approval is a changed world.
func trafficDigest(writer, promoting, record string) string {
	return topologyDigest(writer, promoting) + ";record=" + record
}

// recordDigest is the fenced design's traffic precondition digest: the
// record's value at the DNS provider, all a DNS provider can show. That
// traffic follows the writer is the change's requirement on the
// topology's world (proposeTraffic), not the DNS provider's.
func recordDigest(record string) string { return "record=" + record }

// topologyAdapter is the gateway's adapter for the database provider. Its
// contract is Aurora's: no idempotency key, no lookup by id, no
// provider-side precondition (the zero Contract). Observe decides from the
// authoritative topology and the audit trail's events under the
// operation's session, never from a request history.
type topologyAdapter struct{ wk *worker }

func (a topologyAdapter) Kind() string { return kindPromote }

func (a topologyAdapter) Contract() ledger.Contract { return ledger.Contract{} }

// Precondition is the topology now, from its authority.
func (a topologyAdapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	return a.wk.topologyNow(), nil
}

func (a topologyAdapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	wk, e, operation, epoch := a.wk, call.Effect, call.Operation, call.Epoch
	wk.w.syncJournal()
	wk.stopAt(winPromoteClaim, "after its dispatch was claimed, before the call left")
	wk.until("call")
	if ev, err := wk.sendable(operation); err != nil {
		return ev, err
	}
	wk.stopAt(winPromoteResidual, "after the gateway's last fence read, before the call")
	target := targetOf(e)
	id, err := wk.w.topo.Promote(wk.callerAt(epoch, operation), target)
	switch {
	case errors.Is(err, errResponseLost):
		return ledger.Evidence{}, ledger.Ambiguous(err)
	case errors.Is(err, errProviderRefused):
		return ledger.Evidence{}, ledger.Refused(err.Error(), wk.evidence(nil, err.Error()))
	case err != nil:
		return ledger.Evidence{}, ledger.Ambiguous(err)
	}
	wk.stopAt(winPromoteApply, "after the provider accepted the promotion, before anything is recorded")
	return wk.evidence([]string{id}, "promotion accepted"), nil
}

func (a topologyAdapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	wk, operation := a.wk, rec.Operation
	wk.w.syncJournal()
	out, ev, err := wk.observePromotion(operation, targetOf(rec.Effect))
	wk.stopAt(winReconcile, "inside Reconcile: the provider answered, nothing recorded yet")
	return out, ev, err
}

// observePromotion is what the database provider's authority shows about a
// promotion: the audit trail's accepted PromoteTarget calls under the
// operation's session, joined with the topology now.
//
//   - an accepted call under this id and the target the writer: applied;
//   - an accepted call and the target being promoted: pending;
//   - no call under this id, and the topology shows neither the target as
//     writer nor a promotion of it: not applied (so far: the ledger keeps
//     observing, and without a lookup by id never retries on it);
//   - anything else (the target the writer with no call under this id — an
//     out-of-band promotion, or an event not delivered yet — or the audit
//     trail not answering): inconclusive.
func (wk *worker) observePromotion(operation, target string) (ledger.Outcome, ledger.Evidence, error) {
	w := wk.w
	ids, err := w.topo.LookupEvents(wk.caller(""), "PromoteTarget", operation)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	writer, promoting := w.topo.Describe(wk.caller(""))
	seen := fmt.Sprintf("audit: %d PromoteTarget event(s) under this id; topology: writer %s, promoting %s", len(ids), writer, orDash(promoting))
	switch {
	case len(ids) > 0 && writer == target:
		return ledger.Applied, wk.evidence(ids, seen), nil
	case len(ids) > 0 && promoting == target:
		return ledger.Pending, wk.evidence(ids, seen), nil
	case len(ids) == 0 && writer != target && promoting != target:
		return ledger.NotApplied, wk.evidence(nil, seen), nil
	}
	return ledger.Inconclusive, wk.evidence(nil, seen), nil
}

// dnsAdapter is the gateway's adapter for the DNS provider. Its declared
// contract is the simulated provider's, more than real Route 53 offers: a
// change is idempotent on the operation id for dnsRetention and can be
// looked up by it (Lookup), and it carries a prerequisite — the record's
// approved value — that the provider checks with the write (Conditional,
// as an RFC 2136 server's prerequisites do). A change is confirmed only
// once the provider reports it INSYNC.
type dnsAdapter struct{ wk *worker }

// dnsApplyWait is how long Apply polls a PENDING change before it leaves
// the outcome to reconciliation.
const dnsApplyWait = 30 * time.Second

func (a dnsAdapter) Kind() string { return kindTraffic }

func (a dnsAdapter) Contract() ledger.Contract {
	return ledger.Contract{Lookup: true, RetrySafe: true, Retention: dnsRetention, Conditional: true}
}

// Precondition is the record's value now, from the DNS provider: the
// record is what the workflow last left it. The writer is not the DNS
// provider's to show: a change that must follow it requires the
// topology's world (ledger.Requirement), which the gateway observes
// through the database adapter.
func (a dnsAdapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	return a.wk.recordObservation(a.wk.w.dns.Record(a.wk.caller(""))), nil
}

func (a dnsAdapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	wk, e, operation, epoch := a.wk, call.Effect, call.Operation, call.Epoch
	wk.w.syncJournal()
	var p trafficParams
	if err := json.Unmarshal(e.Params, &p); err != nil {
		return ledger.Evidence{}, ledger.Refused("bad parameters: "+err.Error(), wk.evidence(nil, "not sent"))
	}
	wk.stopAt(winTrafficClaim, "after the traffic change's dispatch was claimed, before the call left")
	if ev, err := wk.sendable(operation); err != nil {
		return ev, err
	}
	wk.stopAt(winTrafficResidual, "after the gateway's last fence read, before the traffic call")
	id, _, err := wk.w.dns.Change(wk.callerAt(epoch, operation), p.Value, approvedRecord(call.Approved))
	switch {
	case errors.Is(err, errProviderRefused):
		return ledger.Evidence{}, ledger.Refused(err.Error(), wk.evidence(nil, err.Error()))
	case err != nil:
		return ledger.Evidence{}, ledger.Ambiguous(err)
	}
	wk.stopAt(winTrafficApply, "after the provider accepted the traffic change, before anything is recorded")
	for waited := time.Duration(0); ; waited += 2 * time.Second {
		if wk.w.dns.GetChange(wk.callerAt(epoch, operation), id) == statusInsync {
			return wk.evidence([]string{id}, "INSYNC"), nil
		}
		if waited >= dnsApplyWait {
			return wk.evidence([]string{id}, "PENDING"), ledger.Ambiguous(fmt.Errorf("change %s still PENDING after %v", id, dnsApplyWait))
		}
		if err := wk.w.sleep(2 * time.Second); err != nil {
			return wk.evidence([]string{id}, "PENDING"), ledger.Ambiguous(err)
		}
	}
}

func (a dnsAdapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	wk, operation := a.wk, rec.Operation
	wk.w.syncJournal()
	ch, ok := wk.w.dns.lookup(operation)
	var (
		out ledger.Outcome
		ev  ledger.Evidence
	)
	switch {
	case !ok:
		out, ev = ledger.NotApplied, wk.evidence(nil, "the provider has no change under this id")
	case wk.w.dns.GetChange(wk.callerAt(wk.grant.Epoch, operation), ch.id) != statusInsync:
		out, ev = ledger.Pending, wk.evidence([]string{ch.id}, "PENDING")
	default:
		out, ev = ledger.Applied, wk.evidence([]string{ch.id}, "INSYNC")
	}
	wk.stopAt(winReconcile, "inside Reconcile: the provider answered, nothing recorded yet")
	return out, ev, nil
}

// approvedRecord is the record's value in the approved precondition (""
// if it names none: no prerequisite).
func approvedRecord(o ledger.Observation) string {
	var d struct {
		Record string `json:"record"`
	}
	_ = json.Unmarshal(o.Detail, &d)
	return d.Record
}

// trafficParams are a traffic operation's parameters.
type trafficParams struct {
	Record string `json:"record"`
	Value  string `json:"value"`
}

// promoteParams are a promotion's parameters as build v1 encodes them: the
// target and the loss bound the commander approved.
type promoteParams struct {
	Target  string `json:"target"`
	MaxLoss string `json:"max_loss"`
}

// promoteParamsV2 are the same parameters as build v2 encodes them.
type promoteParamsV2 struct {
	TargetCluster   string `json:"target_cluster"`
	LossBoundMillis int64  `json:"loss_bound_ms"`
}

// targetOf is the cluster a promotion's stored intent targets, whichever
// build encoded it: its parameters, else the effect's target.
func targetOf(e ledger.Effect) string {
	var v1 promoteParams
	if json.Unmarshal(e.Params, &v1) == nil && v1.Target != "" {
		return v1.Target
	}
	var v2 promoteParamsV2
	if json.Unmarshal(e.Params, &v2) == nil && v2.TargetCluster != "" {
		return v2.TargetCluster
	}
	return e.Target
}

// simDuration is the simulated time of a ledger clock reading.
func simDuration(t time.Time) time.Duration { return t.Sub(epochBase) }

// sendable is the gateway's last check as a call leaves for the provider:
// the worker's grant is read again under its fence, in etcd. A worker that
// stopped between its dispatch claim and the call (paused past its lease)
// finds its grant gone and sends nothing: a definite "not sent", which the
// gateway cannot record either, the fence refusing its next step. An etcd
// that does not answer leaves the call unsent too, but as an ambiguous
// outcome for reconciliation (the provider says "not applied").
//
// What this does not close: a pause between this check and the call
// itself. Only a provider that checks the fence token closes that.
func (wk *worker) sendable(operation string) (ledger.Evidence, error) {
	err := wk.w.run.coord.Current(wk.w.ctx, wk.grant)
	if err == nil {
		wk.record(Event{Kind: KindFenceRead, Operation: operation, Effect: "send",
			Detail: "grant current as the call leaves"})
		return ledger.Evidence{}, nil
	}
	d := coordinator.DispositionOf(err)
	if d.Class() != coordinator.ClassRefused {
		return ledger.Evidence{}, ledger.Ambiguous(fmt.Errorf("fence check before the call, not sent: %w", err))
	}
	wk.record(Event{Kind: KindRefused, Operation: operation, Effect: "send",
		Detail: string(d) + ": the grant is no longer current as the call leaves; nothing sent to the provider"})
	return ledger.Evidence{}, ledger.Refused("not sent: "+string(d), wk.evidence(nil, "not sent: "+string(d)))
}

func (wk *worker) callerAt(epoch int64, key string) caller {
	return caller{actor: wk.name, epoch: epoch, key: key}
}

// topologyNow is the gateway's revalidation read: the provider's
// authority, never the worker's cache.
func (wk *worker) topologyNow() ledger.Observation {
	return wk.observation(wk.w.topo.Describe(wk.caller("")))
}

func (wk *worker) observation(writer, promoting string) ledger.Observation {
	d, _ := json.Marshal(map[string]string{"writer": writer, "promoting": promoting})
	return ledger.Observation{Digest: topologyDigest(writer, promoting), At: simTime(wk.w.s.now), Detail: d}
}

// recordObservation is the DNS adapter's observation of the record's
// value (the detail's record is the prerequisite Apply sends).
func (wk *worker) recordObservation(record string) ledger.Observation {
	d, _ := json.Marshal(map[string]string{"record": record})
	return ledger.Observation{Digest: recordDigest(record), At: simTime(wk.w.s.now), Detail: d}
}

func (wk *worker) evidence(ids []string, what string) ledger.Evidence {
	d, _ := json.Marshal(map[string]string{"provider": what})
	return ledger.Evidence{ProviderIDs: ids, Detail: d, At: simTime(wk.w.s.now)}
}
