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

// topologyDigest is the precondition digest both adapters observe: the
// writer, and the target of a promotion in progress.
func topologyDigest(writer, promoting string) string {
	return "writer=" + writer + ";promoting=" + orDash(promoting)
}

// topologyAdapter is the gateway's adapter for the database provider. Its
// contract is the simulated provider's: a promotion is idempotent on the
// operation id for topologyRetention, and the provider answers by id
// whether it ever accepted one.
type topologyAdapter struct{ wk *worker }

func (a topologyAdapter) Kind() string { return kindPromote }

func (a topologyAdapter) Contract() ledger.Contract {
	return ledger.Contract{Lookup: true, RetrySafe: true, Retention: topologyRetention}
}

// Precondition is the topology now, from its authority.
func (a topologyAdapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	return a.wk.topologyNow(), nil
}

func (a topologyAdapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	wk, e, operation, epoch := a.wk, call.Effect, call.Operation, call.Epoch
	wk.w.syncJournal()
	wk.beforeCall() // the worker may stop or pause here, its dispatch claimed and nothing sent
	if ev, err := wk.sendable(operation); err != nil {
		return ev, err
	}
	id, err := wk.w.topo.Promote(wk.callerAt(epoch, operation), e.Target)
	switch {
	case errors.Is(err, errResponseLost):
		return ledger.Evidence{}, ledger.Ambiguous(err)
	case errors.Is(err, errProviderRefused):
		return ledger.Evidence{}, ledger.Refused(err.Error(), wk.evidence(nil, err.Error()))
	case err != nil:
		return ledger.Evidence{}, ledger.Ambiguous(err)
	}
	wk.afterApply() // the worker may stop or pause here, before anything is recorded
	return wk.evidence([]string{id}, "promotion accepted"), nil
}

func (a topologyAdapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	wk, operation := a.wk, rec.Operation
	wk.w.syncJournal()
	p, ok, err := wk.w.topo.LookupRequest(wk.caller(""), operation)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	if !ok {
		return ledger.NotApplied, wk.evidence(nil, "the provider has no request under this id"), nil
	}
	ids := append([]string{p.id}, wk.w.audit.find("PromoteTarget", operation)...)
	return ledger.Applied, wk.evidence(dedupe(ids), "the provider accepted this id"), nil
}

// dnsAdapter is the gateway's adapter for the DNS provider: a change is
// idempotent on the operation id for dnsRetention, confirmed only once the
// provider reports it INSYNC.
type dnsAdapter struct{ wk *worker }

// dnsApplyWait is how long Apply polls a PENDING change before it leaves
// the outcome to reconciliation.
const dnsApplyWait = 30 * time.Second

func (a dnsAdapter) Kind() string { return kindTraffic }

func (a dnsAdapter) Contract() ledger.Contract {
	return ledger.Contract{Lookup: true, RetrySafe: true, Retention: dnsRetention}
}

// Precondition is the topology now: traffic follows the writer.
func (a dnsAdapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	return a.wk.topologyNow(), nil
}

func (a dnsAdapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	wk, e, operation, epoch := a.wk, call.Effect, call.Operation, call.Epoch
	wk.w.syncJournal()
	var p trafficParams
	if err := json.Unmarshal(e.Params, &p); err != nil {
		return ledger.Evidence{}, ledger.Refused("bad parameters: "+err.Error(), wk.evidence(nil, "not sent"))
	}
	if ev, err := wk.sendable(operation); err != nil {
		return ev, err
	}
	id, _, err := wk.w.dns.Change(wk.callerAt(epoch, operation), p.Value)
	if err != nil {
		return ledger.Evidence{}, ledger.Ambiguous(err)
	}
	for waited := time.Duration(0); ; waited += 2 * time.Second {
		if wk.w.dns.GetChange(wk.callerAt(epoch, operation), id) == statusInsync {
			return wk.evidence([]string{id}, "INSYNC"), nil
		}
		if waited >= dnsApplyWait {
			return wk.evidence([]string{id}, "PENDING"), ledger.Ambiguous(fmt.Errorf("change %s still PENDING after %v", id, dnsApplyWait))
		}
		wk.a.sleep(2 * time.Second)
	}
}

func (a dnsAdapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	wk, operation := a.wk, rec.Operation
	wk.w.syncJournal()
	ch, ok := wk.w.dns.lookup(operation)
	if !ok {
		return ledger.NotApplied, wk.evidence(nil, "the provider has no change under this id"), nil
	}
	if wk.w.dns.GetChange(wk.callerAt(wk.grant.Epoch, operation), ch.id) != statusInsync {
		return ledger.Pending, wk.evidence([]string{ch.id}, "PENDING"), nil
	}
	return ledger.Applied, wk.evidence([]string{ch.id}, "INSYNC"), nil
}

// trafficParams are a traffic operation's parameters.
type trafficParams struct {
	Record string `json:"record"`
	Value  string `json:"value"`
}

// promoteParams are a promotion's parameters: the target and the loss
// bound the commander approved.
type promoteParams struct {
	Target  string `json:"target"`
	MaxLoss string `json:"max_loss"`
}

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
	c, g := wk.w.run.coord, wk.grant
	const op = "dispatch-send"
	resp, err := c.Txn(wk.w.ctx, coordinator.TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		If: c.Guard(g), Else: c.GuardReads(g)})
	if err == nil && !resp.Succeeded {
		err = c.CheckGuard(op, g, resp.Responses)
	}
	if err == nil {
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

func (wk *worker) evidence(ids []string, what string) ledger.Evidence {
	d, _ := json.Marshal(map[string]string{"provider": what})
	return ledger.Evidence{ProviderIDs: ids, Detail: d, At: simTime(wk.w.s.now)}
}

func dedupe(ids []string) []string {
	seen := map[string]bool{}
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
