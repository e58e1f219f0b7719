package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// The fenced design: the incident task is claimed in etcd; the promotion
// is one ledger operation with a stable id, approved by the commander on
// its exact digests and dispatched only through the ledger's gateway (the
// fence); a takeover reconciles what the previous owner left against the
// provider; the traffic change is its own operation, proposed after the
// topology settled and revalidated again at dispatch.

// Policy versions the fenced operations are decided under.
const (
	policyPromote = "regional-promotion-runbook-v3"
	policyTraffic = "traffic-follows-writer-v1"
	// maxLoss is the loss bound the commander approves.
	maxLoss = "5s"
	// trafficAttempts bounds the traffic operations one worker proposes
	// (a superseded or overwritten change is followed by a new intent).
	trafficAttempts = 4
	// reconcileRounds bounds how often a worker reconciles a change that
	// stays PENDING.
	reconcileRounds = 10
	// commander is who resolves an operation in MANUAL_REVIEW; it looks
	// for evidence every commanderLook, at most commanderLooks times.
	commander      = "incident-commander"
	commanderLook  = time.Minute
	commanderLooks = 10
)

// runFenced is one fenced worker.
func (wk *worker) runFenced() {
	if !wk.acquire() {
		return
	}
	l, err := wk.newLedger()
	if err != nil {
		wk.w.fail(err)
		return
	}
	if wk.reconcile(l) && wk.promote(l) && wk.traffic(l) {
		wk.release()
	}
}

func (wk *worker) newLedger() (*ledger.Ledger, error) {
	return ledger.New(wk.w.run.coord,
		ledger.WithAdapters(topologyAdapter{wk}, dnsAdapter{wk}),
		ledger.WithClock(func() time.Time { return simTime(wk.w.s.now) }),
		ledger.WithSleep(func(ctx context.Context, d time.Duration) error { wk.a.sleep(d); return nil }),
		ledger.WithPolling(2*time.Second, 30*time.Second, 12),
		ledger.WithLogger(wk.w.run.cfg.Logger))
}

// check copies the journal's new transitions into the trajectory and
// reports whether the worker may go on after a ledger call: a refusal by
// the fence is recorded as such (a stale worker stopped at the gateway);
// any other error is an error of the drill's etcd. Either stops it.
func (wk *worker) check(op string, err error) bool {
	wk.w.syncJournal()
	if err == nil {
		return true
	}
	switch d := coordinator.DispositionOf(err); d.Class() {
	case coordinator.ClassRefused:
		if d == coordinator.StaleOwner || d == coordinator.ExpiredOwner || d == coordinator.GenerationMismatch {
			wk.record(Event{Kind: KindRefused, Effect: op, Detail: string(d) + ": refused at the gateway; the worker stops"})
			return false
		}
	}
	wk.w.fail(fmt.Errorf("%s by %s: %w", op, wk.name, err))
	return false
}

// syncJournal appends the ledger journal's new transitions of the incident
// task to the trajectory: the graders read the real journal.
func (w *world) syncJournal() {
	ts, err := w.journal.Journal(w.ctx, w.run.tenant(w.design), w.task)
	if err != nil {
		w.fail(fmt.Errorf("journal: %w", err))
		return
	}
	for _, t := range ts {
		if t.Revision <= w.journalRev {
			continue
		}
		w.journalRev = t.Revision
		e := Event{At: w.s.now, Kind: KindTransition, Actor: t.Owner, Epoch: t.Epoch, Operation: t.Operation,
			Effect: w.effects[t.Operation], From: string(t.From), To: string(t.To), Detail: string(t.By) + ": " + t.Reason}
		if t.Evidence != nil {
			e.Evidence = t.Evidence.ProviderIDs
		}
		w.traj.add(e)
	}
}

// reconcile settles what an earlier owner left: its DISPATCHING records
// become UNKNOWN, and every UNKNOWN is asked of the provider's authority.
// It reports whether the worker may go on.
func (wk *worker) reconcile(l *ledger.Ledger) bool {
	for round := 0; round < reconcileRounds; round++ {
		recs, err := l.Reconcile(wk.w.ctx, wk.grant)
		if !wk.check("reconcile", err) {
			return false
		}
		pending := false
		for _, r := range recs {
			if r.State == ledger.Unknown {
				pending = true
			}
		}
		if !pending {
			return true
		}
		wk.a.sleep(10 * time.Second)
	}
	return true
}

// existing returns the task's records of kind, in the ledger's order, and
// whether the worker may go on.
func (wk *worker) existing(l *ledger.Ledger, kind string) ([]ledger.Record, bool) {
	recs, err := l.List(wk.w.ctx, wk.w.run.tenant(wk.w.design), wk.w.task, "")
	if !wk.check("list", err) {
		return nil, false
	}
	var out []ledger.Record
	for _, r := range recs {
		if r.Effect.Kind == kind {
			wk.w.effects[r.Operation] = effectName(kind)
			out = append(out, r)
		}
	}
	return out, true
}

func effectName(kind string) string {
	if kind == kindPromote {
		return "promote"
	}
	return "traffic"
}

// promotionID is the stable id of the incident's promotion. The two worker
// builds spell it differently — which is why a worker adopts the record it
// finds rather than trusting its own code to name the intent.
func (wk *worker) promotionID() string {
	if wk.build == "v2" {
		return "promotion:" + wk.w.task
	}
	return "promote/" + wk.w.task
}

// promote drives the promotion operation to an end: CONFIRMED, or
// SUPERSEDED / FAILED / REJECTED when the world moved on, or MANUAL_REVIEW.
// It reports whether the worker may go on.
func (wk *worker) promote(l *ledger.Ledger) bool {
	ctx, w := wk.w.ctx, wk.w
	var rec ledger.Record
	found, ok := wk.existing(l, kindPromote)
	if !ok {
		return false
	}
	if len(found) > 0 {
		rec = found[0]
		wk.note("adopts promotion %s (%s) from the ledger", rec.Operation, rec.State)
	} else {
		writer, promoting := wk.observe()
		params, _ := json.Marshal(promoteParams{Target: clusterSecondary, MaxLoss: maxLoss})
		id := wk.promotionID()
		w.effects[id] = "promote"
		var err error
		rec, err = l.Propose(ctx, wk.grant, id, ledger.Effect{Kind: kindPromote, Target: clusterSecondary,
			Params: params, Policy: policyPromote}, wk.observation(writer, promoting))
		if !wk.check("propose", err) {
			return false
		}
	}
	rec, ok = wk.drive(l, rec, approver{name: "incident-commander", wait: wk.awaitApproval,
		note: "approve promotion of " + clusterSecondary + " within loss bound " + maxLoss})
	if ok && rec.State == ledger.ManualReview {
		rec, ok = wk.review(l, rec)
	}
	if ok {
		wk.note("promotion %s ends %s", rec.Operation, rec.State)
	}
	return ok
}

// review is the incident commander's decision on a promotion the ledger
// left in MANUAL_REVIEW (the provider's authority stayed inconclusive). The
// commander looks for evidence outside the adapter's lookup: the audit
// trail's PromoteTarget events under the operation's id, and the topology
// as the provider describes it now. Both must agree that this request was
// accepted — an audit event of this id, and the target the writer or being
// promoted — before the commander resolves it CONFIRMED with those provider
// ids (Ledger.Resolve, journaled with approver and why). Without that
// evidence it decides nothing: the record stays in MANUAL_REVIEW and the
// worker stops. It reports whether the worker may go on.
func (wk *worker) review(l *ledger.Ledger, rec ledger.Record) (ledger.Record, bool) {
	w := wk.w
	var p promoteParams
	if err := json.Unmarshal(rec.Effect.Params, &p); err != nil || p.Target == "" {
		wk.note("promotion %s in MANUAL_REVIEW has unreadable parameters; it stays there", rec.Operation)
		return rec, false
	}
	wk.record(Event{Kind: KindNote, Actor: "commander", Operation: rec.Operation,
		Detail: "reviews " + rec.Operation + " in MANUAL_REVIEW: the provider's lookup gave no answer"})
	for look := 0; look < commanderLooks; look++ {
		wk.a.sleep(commanderLook)
		ids := w.audit.find("PromoteTarget", rec.Operation)
		writer, promoting := w.topo.Describe(caller{actor: commander})
		if !acceptedOn(ids, writer, promoting, p.Target) {
			wk.record(Event{Kind: KindNote, Actor: "commander", Operation: rec.Operation,
				Detail: fmt.Sprintf("no evidence yet: %d audit event(s) under this id, writer %s, promoting %s", len(ids), writer, orDash(promoting))})
			continue
		}
		d, _ := json.Marshal(map[string]string{"audit": "PromoteTarget " + strings.Join(ids, ",") + " under " + rec.Operation,
			"writer": writer, "promoting": promoting})
		why := fmt.Sprintf("CloudTrail shows PromoteTarget %s under this operation id, and the topology shows %s as %s",
			strings.Join(ids, ","), p.Target, map[bool]string{true: "the writer", false: "being promoted"}[writer == p.Target])
		r, err := l.Resolve(w.ctx, wk.grant, rec.Operation, ledger.Confirmed,
			ledger.Evidence{ProviderIDs: ids, Detail: d, At: simTime(w.s.now)}, commander, why)
		if !wk.check("resolve", err) {
			return r, false
		}
		return r, true
	}
	wk.note("the commander found no evidence for %s; it stays in MANUAL_REVIEW and the worker stops", rec.Operation)
	return rec, false
}

// acceptedOn is the commander's test of the evidence: the audit trail
// names a request under the operation's id, and the provider's topology
// shows its target as the writer or being promoted. Either alone is not
// enough: an audit event corroborates, and a target that is the writer may
// be an out-of-band promotion's doing.
func acceptedOn(auditIDs []string, writer, promoting, target string) bool {
	return len(auditIDs) > 0 && (writer == target || promoting == target)
}

// approver is who approves an operation's exact digests, and the time it
// takes them.
type approver struct {
	name, note string
	wait       func()
}

// observe is the worker's view of the topology: a stale cache on its first
// read when the stale-cache fault is on, the provider's authority otherwise.
func (wk *worker) observe() (writer, promoting string) {
	if wk.staleCache && !wk.cacheUsed {
		return wk.topology(), ""
	}
	return wk.w.topo.Describe(wk.caller(""))
}

// traffic points the record at the writer as its own operation, after the
// topology settled (as the worker sees it), and verifies from both
// authorities that the record follows the writer. A superseded change (the
// worker's view was stale: the gateway revalidated it) or an overwritten
// one (an operator's edit) is followed by a new intent with a new id. It
// reports whether the worker may go on.
func (wk *worker) traffic(l *ledger.Ledger) bool {
	ctx, w := wk.w.ctx, wk.w
	for n := 0; n < trafficAttempts; n++ {
		found, ok := wk.existing(l, kindTraffic)
		if !ok {
			return false
		}
		var rec ledger.Record
		if len(found) > 0 {
			rec = found[len(found)-1]
		}
		switch {
		case rec.State != "" && !rec.State.Terminal():
			wk.note("adopts traffic operation %s (%s)", rec.Operation, rec.State)
		case rec.State == ledger.Confirmed && wk.verify():
			return true
		default:
			writer := wk.settledView()
			id := fmt.Sprintf("traffic/%s/%d", w.task, len(found)+1)
			w.effects[id] = "traffic"
			params, _ := json.Marshal(trafficParams{Record: recordName, Value: writer})
			var err error
			rec, err = l.Propose(ctx, wk.grant, id, ledger.Effect{Kind: kindTraffic, Target: recordName, Params: params,
				Policy: policyTraffic}, wk.observation(writer, ""))
			if !wk.check("propose", err) {
				return false
			}
		}
		if _, ok := wk.drive(l, rec, approver{name: "traffic-policy", wait: wk.a.step, note: "traffic follows the confirmed writer"}); !ok {
			return false
		}
	}
	if !wk.verify() {
		wk.note("traffic does not follow the writer after %d operations; stops for review", trafficAttempts)
	}
	return true
}

// drive takes one operation as far as it goes: approval, dispatch through
// the gateway, reconciliation of an unknown outcome. It returns the record
// as it ends (UNKNOWN if a change is still PENDING after reconciling), and
// whether the worker may go on.
func (wk *worker) drive(l *ledger.Ledger, rec ledger.Record, by approver) (ledger.Record, bool) {
	ctx, w := wk.w.ctx, wk.w
	for step := 0; step < 20; step++ {
		var err error
		op := ""
		switch rec.State {
		case ledger.Proposed:
			by.wait()
			op = "authorize"
			rec, err = l.Authorize(ctx, wk.grant, rec.Operation, ledger.Approval{Approver: by.name,
				ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, At: simTime(w.s.now), Note: by.note})
		case ledger.Authorized:
			wk.a.step()
			op = "dispatch"
			rec, err = l.Dispatch(ctx, wk.grant, rec.Operation)
		case ledger.Dispatching, ledger.Unknown:
			if !wk.reconcile(l) {
				return rec, false
			}
			op = "read"
			rec, _, err = l.Record(ctx, rec.Tenant, rec.Task, rec.Operation)
			if err == nil && (rec.State == ledger.Unknown || rec.State == ledger.Dispatching) {
				return rec, wk.check(op, nil)
			}
		default:
			return rec, true
		}
		if !wk.check(op, err) {
			return rec, false
		}
	}
	return rec, true
}

// settledView waits until no promotion is in progress, as the worker sees
// it (its stale cache says none is), and returns the writer it sees.
func (wk *worker) settledView() string {
	for i := 0; i < 60; i++ {
		writer, promoting := wk.observe()
		if promoting == "" {
			return writer
		}
		wk.a.sleep(2 * time.Second)
	}
	writer, _ := wk.observe()
	return writer
}

// verify reads the record and the writer from their authorities; when they
// agree the incident is closed.
func (wk *worker) verify() bool {
	wk.a.step()
	record := wk.w.dns.Record(wk.caller(""))
	writer, promoting := wk.w.topo.Describe(wk.caller(""))
	if promoting == "" && record == writer {
		wk.w.closed = true
		wk.note("verified: %s points at the writer %s; incident closed", recordName, writer)
		return true
	}
	wk.note("verify: %s points at %s, the writer is %s", recordName, record, writer)
	return false
}
