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
	maxLoss = 5 * time.Second
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
	// promotionIntents bounds the promotion intents of one incident: a
	// new one only after the commander established the earlier one never
	// applied (FAILED on evidence).
	promotionIntents = 2
)

// runFenced is one fenced worker. A step's error stops it: errStop (the
// fence refused it, or it holds for the commander) is the design at work;
// any other error is the drill's own (etcd did not answer) and fails the
// trial's run.
func (wk *worker) runFenced() {
	if err := wk.fenced(); err != nil && !errors.Is(err, errStop) {
		wk.w.fail(err)
	}
}

func (wk *worker) fenced() error {
	if err := wk.acquire(); err != nil {
		return err
	}
	l, err := wk.newLedger()
	if err != nil {
		return err
	}
	if wk.build == "v2" { // build v2 orders its steps differently: it reads the world first
		wk.observe()
	}
	if err := wk.reconcile(l); err != nil {
		return err
	}
	if err := wk.promote(l); err != nil {
		return err
	}
	if err := wk.traffic(l); err != nil {
		return err
	}
	wk.release()
	return nil
}

// errStop is a worker stopping as the design says: refused by the fence,
// or holding for the incident commander.
var errStop = errors.New("drill: the worker stops")

// Hold reasons: why a fenced worker stopped for the incident commander
// with traffic held. Each is a legitimate end of a trial (the liveness
// grader checks the reason against the trajectory).
const (
	holdManualReview     = "manual_review"     // an operation stays in MANUAL_REVIEW
	holdOperatorEdit     = "operator_edit"     // the record was changed out of band
	holdCommanderRefused = "commander_refused" // the commander refused the promotion
)

// hold stops the worker for the incident commander: traffic stays where it
// is. It records why and returns errStop; the worker then releases
// nothing and does nothing more (unless the commander resumes it).
func (wk *worker) hold(reason, format string, args ...any) error {
	wk.w.held = true
	why := fmt.Sprintf(format, args...)
	wk.record(Event{Kind: KindHold, Effect: reason, Value: wk.w.dns.value, Detail: why})
	return fmt.Errorf("%w: holds for the commander (%s): %s", errStop, reason, why)
}

// gateway is everything a fenced worker asks of the effect ledger and its
// gateway: the trial's gateway server over loopback TLS (hopLedger,
// gateway_worker.go), or the ledger in the worker's own process
// (inProcess). Authorize and Reject are the approver's (a.Approver,
// approver), Resolve the commander's.
type gateway interface {
	Propose(ctx context.Context, g coordinator.Grant, operation string, e ledger.Effect, pre ledger.Observation) (ledger.Record, error)
	Authorize(ctx context.Context, g coordinator.Grant, operation string, a ledger.Approval) (ledger.Record, error)
	Reject(ctx context.Context, g coordinator.Grant, operation, approver, reason string) (ledger.Record, error)
	Dispatch(ctx context.Context, g coordinator.Grant, operation string) (ledger.Record, error)
	Reconcile(ctx context.Context, g coordinator.Grant) ([]ledger.Record, error)
	Resolve(ctx context.Context, g coordinator.Grant, operation string, to ledger.State, ev ledger.Evidence, approver, why string) (ledger.Record, error)
	List(ctx context.Context, tenant, task string, state ledger.State) ([]ledger.Record, error)
	Record(ctx context.Context, tenant, task, operation string) (ledger.Record, []ledger.Transition, error)
}

// inProcess is the ledger in the worker's process: its adapters are the
// worker's own, so a paused worker pauses its gateway.
type inProcess struct{ *ledger.Ledger }

var _ gateway = inProcess{}

func (l inProcess) Reject(ctx context.Context, g coordinator.Grant, operation, approver, reason string) (ledger.Record, error) {
	return l.Ledger.Reject(ctx, g, operation, approver+": "+reason)
}

// newLedger is the worker's gateway: its trial's over the network, or a
// ledger of its own.
func (wk *worker) newLedger() (gateway, error) {
	if wk.w.gw != nil {
		return hopLedger{wk}, nil
	}
	l, err := ledger.New(wk.w.run.coord,
		ledger.WithAdapters(topologyAdapter{wk}, dnsAdapter{wk}),
		ledger.WithClock(func() time.Time { return simTime(wk.w.s.now) }),
		ledger.WithSleep(func(ctx context.Context, d time.Duration) error { wk.a.sleep(d); return nil }),
		ledger.WithPolling(2*time.Second, 30*time.Second, 12),
		ledger.WithLogger(wk.w.run.cfg.Logger))
	return inProcess{l}, err
}

// check copies the journal's new transitions into the trajectory and
// says whether the worker may go on after a ledger call (nil): a refusal
// by the fence is recorded as such (a stale worker stopped at the
// gateway: errStop); any other error is the drill's etcd's, wrapped.
func (wk *worker) check(op string, err error) error {
	wk.applyStop() // a stop that struck beside the worker (the commander's Resolve, in-process)
	wk.w.syncJournal()
	if err == nil {
		return nil
	}
	switch d := coordinator.DispositionOf(err); d {
	case coordinator.StaleOwner, coordinator.ExpiredOwner, coordinator.GenerationMismatch:
		wk.record(Event{Kind: KindRefused, Effect: op, Detail: string(d) + ": refused at the gateway; the worker stops"})
		return fmt.Errorf("%w: %s refused: %w", errStop, op, err)
	}
	return fmt.Errorf("%s by %s: %w", op, wk.name, err)
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
		e := Event{At: w.s.now, Kind: KindTransition, Actor: w.ownerName(t.Owner), Epoch: t.Epoch, Operation: t.Operation,
			Effect: w.effects[t.Operation], From: string(t.From), To: string(t.To), Detail: string(t.By) + ": " + t.Reason}
		if t.Evidence != nil {
			e.Evidence = t.Evidence.ProviderIDs
		}
		w.traj.add(e)
		if t.To == ledger.Proposed || t.To == ledger.ManualReview {
			w.wakeCommander()
		}
	}
}

// reconcile settles what an earlier owner left: its DISPATCHING records
// become UNKNOWN, and every UNKNOWN is asked of the provider's authority.
func (wk *worker) reconcile(l gateway) error {
	for round := 0; round < reconcileRounds; round++ {
		recs, err := l.Reconcile(wk.w.ctx, wk.grant)
		if err := wk.check("reconcile", err); err != nil {
			return err
		}
		pending := false
		for _, r := range recs {
			if r.State == ledger.Unknown {
				pending = true
			}
		}
		if !pending {
			return nil
		}
		wk.a.sleep(10 * time.Second)
	}
	return nil
}

// existing returns the task's records of kind, in the ledger's order.
func (wk *worker) existing(l gateway, kind string) ([]ledger.Record, error) {
	recs, err := l.List(wk.w.ctx, wk.w.run.tenant(wk.w.design), wk.w.task, "")
	if err := wk.check("list", err); err != nil {
		return nil, err
	}
	var out []ledger.Record
	for _, r := range recs {
		if r.Effect.Kind == kind {
			wk.w.effects[r.Operation] = effectName(kind)
			out = append(out, r)
		}
	}
	return out, nil
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
func (wk *worker) promotionID(n int) string {
	id := "promote/" + wk.w.task
	if wk.build == "v2" {
		id = "promotion:" + wk.w.task
	}
	if n > 1 {
		id += fmt.Sprintf("/%d", n)
	}
	return id
}

// promotionParams is the promotion's parameters as this worker's build
// encodes them: v1 and v2 name and encode the fields differently, so that
// the two builds' digests of one intent differ. A worker adopts a record by
// the intent it stores (targetOf decodes either encoding), never by
// re-encoding its own and looking for that.
func (wk *worker) promotionParams() json.RawMessage {
	var b []byte
	if wk.build == "v2" {
		b, _ = json.Marshal(promoteParamsV2{TargetCluster: clusterSecondary, LossBoundMillis: maxLoss.Milliseconds()})
	} else {
		b, _ = json.Marshal(promoteParams{Target: clusterSecondary, MaxLoss: maxLoss.String()})
	}
	return b
}

// promote drives the promotion to an end: CONFIRMED, or the world moved
// on without it (the target is the writer anyway) — nil: go on to
// traffic — or a hold for the commander (errStop).
func (wk *worker) promote(l gateway) error {
	ctx, w := wk.w.ctx, wk.w
	for n := 1; n <= promotionIntents; n++ {
		found, err := wk.existing(l, kindPromote)
		if err != nil {
			return err
		}
		rec, adopted := adoptable(found)
		switch {
		case adopted:
			wk.note("adopts promotion %s (%s) from the ledger by its stored intent: promote %s", rec.Operation, rec.State, targetOf(rec.Effect))
		case len(found) > 0 && found[len(found)-1].State != ledger.Failed:
			rec = found[len(found)-1] // SUPERSEDED or REJECTED: no new intent
		default:
			writer, promoting := wk.observe()
			id := wk.promotionID(len(found) + 1)
			w.effects[id] = "promote"
			rec, err = l.Propose(ctx, wk.grant, id, ledger.Effect{Kind: kindPromote, Target: clusterSecondary,
				Params: wk.promotionParams(), Policy: policyPromote}, wk.observation(writer, promoting))
			if err := wk.check("propose", err); err != nil {
				return err
			}
		}
		rec, err = wk.drive(l, rec)
		if err == nil && rec.State == ledger.ManualReview {
			// The commander's to resolve: the worker waits for its decision.
			rec, err = wk.await(l, rec, ledger.ManualReview, commanderLook, commanderLook, commanderLooks+2)
		}
		if err != nil {
			return err
		}
		wk.note("promotion %s ends %s", rec.Operation, rec.State)
		switch rec.State {
		case ledger.Confirmed:
			return nil
		case ledger.ManualReview:
			return wk.hold(holdManualReview, "promotion %s stays in MANUAL_REVIEW: traffic held for the commander", rec.Operation)
		case ledger.Proposed:
			return wk.hold(holdCommanderRefused, "no decision on promotion %s: traffic held", rec.Operation)
		case ledger.Rejected, ledger.Failed:
			// Refused, or established never applied: if the target is the
			// writer anyway (promoted out of band), traffic follows it.
			if writer := wk.settledView(); writer == targetOf(rec.Effect) {
				return nil
			}
			if rec.State == ledger.Rejected {
				return wk.hold(holdCommanderRefused, "the commander refused promotion %s: traffic held", rec.Operation)
			}
			continue // the commander established it never applied: a new intent
		}
		// SUPERSEDED: the world moved before dispatch; traffic follows
		// whatever the writer now is.
		return nil
	}
	return wk.hold(holdManualReview, "no promotion applied after %d intents", promotionIntents)
}

// adoptable is the promotion record a worker adopts: the newest one not
// settled as never applied (FAILED) or refused (REJECTED, SUPERSEDED).
func adoptable(found []ledger.Record) (ledger.Record, bool) {
	for i := len(found) - 1; i >= 0; i-- {
		switch found[i].State {
		case ledger.Failed, ledger.Rejected, ledger.Superseded:
			continue
		}
		return found[i], true
	}
	return ledger.Record{}, false
}

// How long the commander waits for the lag to come back within the bound.
const (
	commanderRecheck  = 15 * time.Second
	commanderPatience = 3 * time.Minute
)

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
// authorities that the record follows the writer. The worker proposes; the
// world's traffic policy (or, over an operator's edit, the commander)
// decides. A superseded change (the worker's view was stale: the gateway
// revalidated it), or one refused as not toward the writer, is followed by
// a new intent with a new id. A refusal while the record is not what the
// workflow last left it (an operator's edit the commander let stand) is a
// hold. The record is never changed around the gateway: an operator's edit
// reaches the commander as the next proposal's precondition.
func (wk *worker) traffic(l gateway) error {
	ctx, w := wk.w.ctx, wk.w
	for n := 0; n < trafficAttempts; n++ {
		found, err := wk.existing(l, kindTraffic)
		if err != nil {
			return err
		}
		var rec ledger.Record
		if len(found) > 0 {
			rec = found[len(found)-1]
		}
		switch {
		case rec.State == ledger.Rejected && trafficValue(rec) == wk.writerNow() && wk.editedOutOfBand(found):
			// Toward the writer, and refused: over the operator's edit.
			return wk.hold(holdOperatorEdit, "the commander refused traffic operation %s over an out-of-band edit of %s: traffic held", rec.Operation, recordName)
		case rec.State != "" && !rec.State.Terminal():
			wk.note("adopts traffic operation %s (%s)", rec.Operation, rec.State)
		case rec.State == ledger.Confirmed:
			if done, err := wk.verify(); done || err != nil {
				return err
			}
			fallthrough
		default:
			writer := wk.settledView()
			wk.editedOutOfBand(found)
			id := fmt.Sprintf("traffic/%s/%d", w.task, len(found)+1)
			w.effects[id] = "traffic"
			params, _ := json.Marshal(trafficParams{Record: recordName, Value: writer})
			_, promoting := w.topo.Describe(wk.caller(""))
			rec, err = l.Propose(ctx, wk.grant, id, ledger.Effect{Kind: kindTraffic, Target: recordName, Params: params,
				Policy: policyTraffic}, wk.trafficObservation(writer, promoting, w.dns.Record(wk.caller(""))))
			if err := wk.check("propose", err); err != nil {
				return err
			}
		}
		if _, err := wk.drive(l, rec); err != nil {
			return err
		}
	}
	found, err := wk.existing(l, kindTraffic)
	if err != nil {
		return err
	}
	if len(found) > 0 && found[len(found)-1].State == ledger.Confirmed {
		if done, err := wk.verify(); err != nil || done {
			return err
		}
	}
	return wk.hold(holdManualReview, "traffic does not follow the writer after %d operations: traffic held for review", trafficAttempts)
}

// trafficValue is where a traffic operation points the record.
func trafficValue(rec ledger.Record) string {
	var p trafficParams
	_ = json.Unmarshal(rec.Effect.Params, &p)
	return p.Value
}

// writerNow is the writer as the topology's authority shows it now.
func (wk *worker) writerNow() string {
	writer, _ := wk.w.topo.Describe(wk.caller(""))
	return writer
}

// lastLeft is the value the workflow last left the record at: the newest
// traffic operation that may have reached the provider (CONFIRMED, or
// still in flight), else the value before the incident.
func lastLeft(found []ledger.Record) string {
	for i := len(found) - 1; i >= 0; i-- {
		switch found[i].State {
		case ledger.Confirmed, ledger.Dispatching, ledger.Unknown, ledger.ManualReview:
			var p trafficParams
			if json.Unmarshal(found[i].Effect.Params, &p) == nil {
				return p.Value
			}
		}
	}
	return clusterPrimary
}

// editedOutOfBand reads the record at its authority and reports whether it
// is not what the workflow last left it: an operator changed the recovery
// resource. The worker does not decide what that means; the next traffic
// intent is proposed against the record as it now is, and the commander
// decides on it (a holding action goes on, a routing decision stands).
func (wk *worker) editedOutOfBand(found []ledger.Record) bool {
	now, want := wk.w.dns.Record(wk.caller("")), lastLeft(found)
	if now == want {
		return false
	}
	wk.note("%s was edited out of band to %s (the workflow left %s): the next intent is proposed against it, for the commander to decide", recordName, now, want)
	return true
}

// drive takes one operation as far as it goes: the world's decision on a
// proposal (the worker only waits for it), dispatch through the gateway,
// reconciliation of an unknown outcome. It returns the record as it ends
// (UNKNOWN if a change is still PENDING after reconciling, PROPOSED if no
// decision came), and an error when the worker must stop.
func (wk *worker) drive(l gateway, rec ledger.Record) (ledger.Record, error) {
	ctx := wk.w.ctx
	for step := 0; step < 20; step++ {
		var err error
		op := ""
		switch rec.State {
		case ledger.Proposed:
			if rec, err = wk.await(l, rec, ledger.Proposed, 2*time.Second, 15*time.Second, decisionPolls); err != nil || rec.State == ledger.Proposed {
				return rec, err
			}
			continue
		case ledger.Authorized:
			if rec.Effect.Kind != kindPromote || !wk.until("dispatch") {
				wk.a.step()
			}
			op = "dispatch"
			rec, err = l.Dispatch(ctx, wk.grant, rec.Operation)
		case ledger.Dispatching, ledger.Unknown:
			if err := wk.reconcile(l); err != nil {
				return rec, err
			}
			op = "read"
			rec, _, err = l.Record(ctx, rec.Tenant, rec.Task, rec.Operation)
			if err == nil && (rec.State == ledger.Unknown || rec.State == ledger.Dispatching) {
				return rec, wk.check(op, nil)
			}
		default:
			return rec, nil
		}
		if err := wk.check(op, err); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// decisionPolls bounds how often a worker re-reads a proposal waiting for
// the world's decision (every 2 s for 20 s, then doubling up to 15 s:
// about 17 minutes).
const decisionPolls = 76

// await re-reads rec while it is in state, every first for 20 s, then
// doubling up to most, at most polls times: the worker waiting for a
// decision that is not its own.
func (wk *worker) await(l gateway, rec ledger.Record, state ledger.State, first, most time.Duration, polls int) (ledger.Record, error) {
	start, wait := wk.w.s.now, first
	for i := 0; i < polls && rec.State == state; i++ {
		if wk.w.s.now-start >= 20*time.Second {
			wait = min(2*wait, most)
		}
		wk.a.sleep(wait)
		r, _, err := l.Record(wk.w.ctx, rec.Tenant, rec.Task, rec.Operation)
		if err := wk.check("read", err); err != nil {
			return rec, err
		}
		rec = r
	}
	return rec, nil
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
// agree the incident is closed (done).
func (wk *worker) verify() (bool, error) {
	wk.a.step()
	record := wk.w.dns.Record(wk.caller(""))
	writer, promoting := wk.w.topo.Describe(wk.caller(""))
	if promoting == "" && record == writer {
		wk.w.closed = true
		wk.note("verified: %s points at the writer %s; incident closed", recordName, writer)
		return true, nil
	}
	wk.note("verify: %s points at %s, the writer is %s", recordName, record, writer)
	return false, nil
}
