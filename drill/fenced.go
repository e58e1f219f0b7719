package drill

import (
	"context"
	"errors"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// The fenced design: the incident task is claimed; the promotion is one
// ledger operation with a stable id, approved by the world's commander on
// its exact digests and dispatched only through the gateway (the fence); a
// takeover reconciles what the previous owner left against the provider;
// the traffic change is its own operation, proposed after the topology
// settled, requiring the topology (the database adapter's world) to still
// show the writer it points traffic at: the gateway revalidates that
// requirement at dispatch and sends nothing once the writer moved.
//
// This file is the design's only implementation. It runs on a fencedPort:
// the world as one worker meets it — its gateway, its clock, and what it
// may read of the providers. The simulated world's port (fenced_sim.go) is
// a worker of the trial's simulation, reaching its trial's gateway server
// over loopback TLS; the real-provider world's (fenced_real.go) is a
// worker process holding a certificate and nothing else, reaching
// `leasegate serve --config` and reading the servers only through it
// (ObservePrecondition). The world's commander decides every proposal
// (commander.go, realcommander.go): the worker proposes and waits.

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

// How long the commander waits for the lag to come back within the bound.
const (
	commanderRecheck  = 15 * time.Second
	commanderPatience = 3 * time.Minute
)

// errStop is a worker stopping as the design says: refused by the fence,
// or holding for the incident commander.
var errStop = errors.New("drill: the worker stops")

// Hold reasons: why a fenced worker stopped for the incident commander
// with traffic held. A hold is the design's word: the graders excuse a
// trial only by the world's own decisions.
const (
	holdManualReview     = "manual_review"     // an operation stays in MANUAL_REVIEW
	holdOperatorEdit     = "operator_edit"     // the record was changed out of band
	holdCommanderRefused = "commander_refused" // the commander refused the promotion
)

// gateway is everything a fenced worker asks of the effect gateway, under
// its worker identity: its trial's gateway server over the network
// (hopLedger, gateway_worker.go; realGateway, fenced_real.go), or the
// ledger in the worker's own process (inProcess, the simulated drill's
// fast mode). Approvals and resolutions are the world's commander's, never
// a worker's.
type gateway interface {
	Propose(ctx context.Context, g coordinator.Grant, operation string, e ledger.Effect, pre ledger.Observation) (ledger.Record, error)
	ProposeRequiring(ctx context.Context, g coordinator.Grant, operation string, e ledger.Effect, pre ledger.Observation, requires []ledger.Requirement) (ledger.Record, error)
	Dispatch(ctx context.Context, g coordinator.Grant, operation string) (ledger.Record, error)
	Reconcile(ctx context.Context, g coordinator.Grant) ([]ledger.Record, error)
	List(ctx context.Context, tenant, task string, state ledger.State) ([]ledger.Record, error)
	Record(ctx context.Context, tenant, task, operation string) (ledger.Record, []ledger.Transition, error)
}

// inProcess is the ledger in the worker's process: its adapters are the
// worker's own, so a paused worker pauses its gateway.
type inProcess struct{ *ledger.Ledger }

var _ gateway = inProcess{}

// fencedPace is how a world's time runs for the design: how long a worker
// waits between looks (simulated seconds, or real ones).
type fencedPace struct {
	// reconcileWait is the wait between reconciliations of a change still
	// UNKNOWN.
	reconcileWait time.Duration
	// A proposal is re-read every decisionFirst until doubleAfter, then at
	// doubling intervals up to decisionMost, at most decisionPolls times.
	decisionFirst, decisionMost, doubleAfter time.Duration
	decisionPolls                            int
	// A record in MANUAL_REVIEW is re-read every reviewPoll, at most
	// reviewPolls times: the commander's to resolve.
	reviewPoll  time.Duration
	reviewPolls int
	// settlePoll, settleTries: the wait for no promotion in progress.
	settlePoll  time.Duration
	settleTries int
	// dispatchHolds bounds how often a dispatch the gateway answered with
	// a hold (the provider could not show its world) is tried again,
	// dispatchWait apart; 0: a hold ends the worker as the drill's error.
	dispatchHolds int
	dispatchWait  time.Duration
}

// fencedPort is the world as one fenced worker meets it.
type fencedPort interface {
	// ctx bounds the worker; grant is its current grant; tenantTask the
	// incident task.
	ctx() context.Context
	grantNow() coordinator.Grant
	tenantTask() (tenant, task string)
	// acquire claims the task (errStop: nothing to claim it for); release
	// gives it up when done.
	acquire() error
	release()
	// open is the worker's gateway.
	open() (gateway, error)
	// check records what a gateway call did and says whether the worker
	// may go on: nil; errStop when the fence refused it; the drill's own
	// error otherwise.
	check(op string, err error) error
	// hold stops the worker, traffic held, saying why (errStop).
	hold(reason, format string, args ...any) error
	note(format string, args ...any)
	// wait lets d of the world's time pass; act is the time one action
	// takes; clock is the world's time now.
	wait(d time.Duration)
	act()
	clock() time.Duration
	pace() fencedPace
	// The world as this worker may read it: view is its view of the
	// topology (a stale cache, in the simulation, on a worker's first
	// read), writerNow the topology's authority, recordNow the traffic
	// record's value at its authority, verifyView both authorities read for
	// the final check. A writer "" is no single writer.
	view() (writer, promoting string, err error)
	writerNow() (string, error)
	recordNow() (string, error)
	verifyView() (record, writer, promoting string, err error)
	// The design's proposals as this worker's build writes them: the n-th
	// promotion intent, the n-th traffic intent toward writer, each with
	// the world it is proposed against; the traffic intent also with what
	// it requires of the database adapter's world: the topology showing
	// writer, as the worker saw it when it chose writer (view). The
	// gateway observes that world again at dispatch and supersedes the
	// change, nothing sent, if it moved.
	proposePromotion(n int) (string, ledger.Effect, ledger.Observation, error)
	proposeTraffic(n int, writer string) (string, ledger.Effect, ledger.Observation, []ledger.Requirement, error)
	// trafficValue is where a traffic record points the record; original
	// the writer before the incident.
	trafficValue(rec ledger.Record) string
	original() string
	// trafficRecord names the record traffic follows.
	trafficRecord() string
	// seen is told of each of the task's records the worker lists.
	seen(rec ledger.Record)
	// beforeDispatch is the world at a dispatch: the time it takes, and the
	// faults that strike there.
	beforeDispatch(rec ledger.Record)
	// closed: the worker verified that traffic follows the writer.
	closed()
}

// fencedRun is one fenced worker's run on its port.
type fencedRun struct {
	p fencedPort
	l gateway
}

// runFencedOn runs the design: claim, reconcile, the promotion, traffic,
// release. A step's error stops it: errStop (the fence refused it, or it
// holds) is the design at work; any other error is the drill's own.
func runFencedOn(p fencedPort) error {
	if err := p.acquire(); err != nil {
		return err
	}
	l, err := p.open()
	if err != nil {
		return err
	}
	f := &fencedRun{p: p, l: l}
	if err := f.reconcile(); err != nil {
		return err
	}
	if err := f.promote(); err != nil {
		return err
	}
	if err := f.traffic(); err != nil {
		return err
	}
	p.release()
	return nil
}

// reconcile settles what an earlier owner left: its DISPATCHING records
// become UNKNOWN, and every UNKNOWN is asked of the provider's authority.
func (f *fencedRun) reconcile() error {
	for round := 0; round < reconcileRounds; round++ {
		recs, err := f.l.Reconcile(f.p.ctx(), f.p.grantNow())
		if err := f.p.check("reconcile", err); err != nil {
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
		f.p.wait(f.p.pace().reconcileWait)
	}
	return nil
}

// existing returns the task's records of kind, in the ledger's order.
func (f *fencedRun) existing(kind string) ([]ledger.Record, error) {
	tenant, task := f.p.tenantTask()
	recs, err := f.l.List(f.p.ctx(), tenant, task, "")
	if err := f.p.check("list", err); err != nil {
		return nil, err
	}
	var out []ledger.Record
	for _, r := range recs {
		if r.Effect.Kind == kind {
			f.p.seen(r)
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

// promote drives the promotion to an end: CONFIRMED, or the world moved
// on without it (the target is the writer anyway) — nil: go on to
// traffic — or a hold (errStop).
func (f *fencedRun) promote() error {
	p := f.p
	for n := 1; n <= promotionIntents; n++ {
		found, err := f.existing(kindPromote)
		if err != nil {
			return err
		}
		rec, adopted := adoptable(found)
		switch {
		case adopted:
			p.note("adopts promotion %s (%s) from the ledger by its stored intent: promote %s", rec.Operation, rec.State, targetOf(rec.Effect))
		case len(found) > 0 && found[len(found)-1].State != ledger.Failed:
			rec = found[len(found)-1] // SUPERSEDED or REJECTED: no new intent
		default:
			id, e, pre, err := p.proposePromotion(len(found) + 1)
			if err != nil {
				return p.check("observe", err)
			}
			rec, err = f.l.Propose(p.ctx(), p.grantNow(), id, e, pre)
			if err := p.check("propose", err); err != nil {
				return err
			}
		}
		rec, err = f.drive(rec)
		if err == nil && rec.State == ledger.ManualReview {
			// The commander's to resolve: the worker waits for its decision.
			pc := p.pace()
			rec, err = f.await(rec, ledger.ManualReview, pc.reviewPoll, pc.reviewPoll, pc.reviewPolls)
		}
		if err != nil {
			return err
		}
		p.note("promotion %s ends %s", rec.Operation, rec.State)
		switch rec.State {
		case ledger.Confirmed:
			return nil
		case ledger.ManualReview:
			return p.hold(holdManualReview, "promotion %s stays in MANUAL_REVIEW: traffic held for the commander", rec.Operation)
		case ledger.Proposed:
			return p.hold(holdCommanderRefused, "no decision on promotion %s: traffic held", rec.Operation)
		case ledger.Rejected, ledger.Failed:
			// Refused, or established never applied: if the target is the
			// writer anyway (promoted out of band), traffic follows it.
			writer, err := f.settledView()
			if err != nil {
				return err
			}
			if writer == targetOf(rec.Effect) {
				return nil
			}
			if rec.State == ledger.Rejected {
				return p.hold(holdCommanderRefused, "the commander refused promotion %s: traffic held", rec.Operation)
			}
			continue // the commander established it never applied: a new intent
		}
		// SUPERSEDED: the world moved before dispatch; traffic follows
		// whatever the writer now is.
		return nil
	}
	return p.hold(holdManualReview, "no promotion applied after %d intents", promotionIntents)
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

// traffic points the record at the writer as its own operation, after the
// topology settled (as the worker sees it), and verifies from both
// authorities that the record follows the writer. The change requires the
// topology to show the writer it points at (proposeTraffic): the gateway,
// not the worker, looks at the writer when the change is sent. The worker
// proposes; the world's traffic policy (or, over an operator's edit, the
// commander) decides. A superseded change (the worker's view was stale, or
// the writer moved after the proposal: the gateway revalidated it), or one
// refused as not toward the writer, is followed by a new intent with a new
// id. A refusal while the record is not what the
// workflow last left it (an operator's edit the commander let stand) is a
// hold. The record is never changed around the gateway: an operator's edit
// reaches the commander as the next proposal's precondition.
func (f *fencedRun) traffic() error {
	p := f.p
	for n := 0; n < trafficAttempts; n++ {
		found, err := f.existing(kindTraffic)
		if err != nil {
			return err
		}
		var rec ledger.Record
		if len(found) > 0 {
			rec = found[len(found)-1]
		}
		refusedToWriter := false
		if rec.State == ledger.Rejected {
			writer, err := p.writerNow()
			if err != nil {
				return p.check("observe", err)
			}
			refusedToWriter = p.trafficValue(rec) == writer
		}
		edited := false
		if refusedToWriter {
			if edited, err = f.editedOutOfBand(found); err != nil {
				return err
			}
		}
		switch {
		case edited:
			// Toward the writer, and refused: over the operator's edit.
			return p.hold(holdOperatorEdit, "the commander refused traffic operation %s over an out-of-band edit of %s: traffic held", rec.Operation, p.trafficRecord())
		case rec.State != "" && !rec.State.Terminal():
			p.note("adopts traffic operation %s (%s)", rec.Operation, rec.State)
		case rec.State == ledger.Confirmed:
			if done, err := f.verify(); done || err != nil {
				return err
			}
			fallthrough
		default:
			writer, err := f.settledView()
			if err != nil {
				return err
			}
			if writer == "" {
				return p.hold(holdManualReview, "no single writer answers: traffic held")
			}
			if _, err := f.editedOutOfBand(found); err != nil {
				return err
			}
			id, e, pre, requires, err := p.proposeTraffic(len(found)+1, writer)
			if err != nil {
				return p.check("observe", err)
			}
			rec, err = f.l.ProposeRequiring(p.ctx(), p.grantNow(), id, e, pre, requires)
			if err := p.check("propose", err); err != nil {
				return err
			}
		}
		if _, err := f.drive(rec); err != nil {
			return err
		}
	}
	found, err := f.existing(kindTraffic)
	if err != nil {
		return err
	}
	if len(found) > 0 && found[len(found)-1].State == ledger.Confirmed {
		if done, err := f.verify(); err != nil || done {
			return err
		}
	}
	return p.hold(holdManualReview, "traffic does not follow the writer after %d operations: traffic held for review", trafficAttempts)
}

// lastLeft is the value the workflow last left the record at: the newest
// traffic operation that may have reached the provider (CONFIRMED, or
// still in flight), else the value before the incident.
func (f *fencedRun) lastLeft(found []ledger.Record) string {
	for i := len(found) - 1; i >= 0; i-- {
		switch found[i].State {
		case ledger.Confirmed, ledger.Dispatching, ledger.Unknown, ledger.ManualReview:
			if v := f.p.trafficValue(found[i]); v != "" {
				return v
			}
		}
	}
	return f.p.original()
}

// editedOutOfBand reads the record at its authority and reports whether it
// is not what the workflow last left it: an operator changed the recovery
// resource. The worker does not decide what that means; the next traffic
// intent is proposed against the record as it now is, and the commander
// decides on it (a holding action goes on, a routing decision stands).
func (f *fencedRun) editedOutOfBand(found []ledger.Record) (bool, error) {
	now, err := f.p.recordNow()
	if err != nil {
		return false, f.p.check("observe", err)
	}
	want := f.lastLeft(found)
	if now == want {
		return false, nil
	}
	f.p.note("%s was edited out of band to %s (the workflow left %s): the next intent is proposed against it, for the commander to decide", f.p.trafficRecord(), now, want)
	return true, nil
}

// drive takes one operation as far as it goes: the world's decision on a
// proposal (the worker only waits for it), dispatch through the gateway,
// reconciliation of an unknown outcome. It returns the record as it ends
// (UNKNOWN if a change is still PENDING after reconciling, PROPOSED if no
// decision came), and an error when the worker must stop.
func (f *fencedRun) drive(rec ledger.Record) (ledger.Record, error) {
	p, ctx := f.p, f.p.ctx()
	pc := p.pace()
	holds := 0
	for step := 0; step < 20; step++ {
		var err error
		op := ""
		switch rec.State {
		case ledger.Proposed:
			if rec, err = f.await(rec, ledger.Proposed, pc.decisionFirst, pc.decisionMost, pc.decisionPolls); err != nil || rec.State == ledger.Proposed {
				return rec, err
			}
			continue
		case ledger.Authorized:
			p.beforeDispatch(rec)
			op = "dispatch"
			var r ledger.Record
			r, err = f.l.Dispatch(ctx, p.grantNow(), rec.Operation)
			if err != nil && holds < pc.dispatchHolds && coordinator.DispositionOf(err).Class() == coordinator.ClassUnavailable {
				holds++
				p.note("dispatch of %s held (%s): the provider cannot show the world now; tries again", rec.Operation, coordinator.DispositionOf(err))
				if err := p.check("read", nil); err != nil {
					return rec, err
				}
				p.wait(pc.dispatchWait)
				step--
				continue
			}
			if err == nil || r.Operation != "" {
				rec = r
			}
		case ledger.Dispatching, ledger.Unknown:
			if err := f.reconcile(); err != nil {
				return rec, err
			}
			op = "read"
			tenant, task := p.tenantTask()
			rec, _, err = f.l.Record(ctx, tenant, task, rec.Operation)
			if err == nil && (rec.State == ledger.Unknown || rec.State == ledger.Dispatching) {
				return rec, p.check(op, nil)
			}
		default:
			return rec, nil
		}
		if err := p.check(op, err); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// decisionPolls bounds how often a simulated worker re-reads a proposal
// waiting for the world's decision (every 2 s for 20 s, then doubling up
// to 15 s: about 17 minutes).
const decisionPolls = 76

// await re-reads rec while it is in state, every first until the pace's
// doubleAfter, then doubling up to most, at most polls times: the worker
// waiting for a decision that is not its own.
func (f *fencedRun) await(rec ledger.Record, state ledger.State, first, most time.Duration, polls int) (ledger.Record, error) {
	p := f.p
	start, wait := p.clock(), first
	for i := 0; i < polls && rec.State == state; i++ {
		if p.clock()-start >= p.pace().doubleAfter {
			wait = min(2*wait, most)
		}
		p.wait(wait)
		r, _, err := f.l.Record(p.ctx(), rec.Tenant, rec.Task, rec.Operation)
		if err := p.check("read", err); err != nil {
			return rec, err
		}
		rec = r
	}
	return rec, nil
}

// settledView waits until no promotion is in progress, as the worker sees
// it, and returns the writer it sees ("" if none single).
func (f *fencedRun) settledView() (string, error) {
	p := f.p
	pc := p.pace()
	for i := 0; i < pc.settleTries; i++ {
		writer, promoting, err := p.view()
		if err != nil {
			return "", p.check("observe", err)
		}
		if promoting == "" {
			return writer, nil
		}
		p.wait(pc.settlePoll)
	}
	writer, _, err := p.view()
	if err != nil {
		return "", p.check("observe", err)
	}
	return writer, nil
}

// verify reads the record and the writer from their authorities; when they
// agree the incident is closed (done).
func (f *fencedRun) verify() (bool, error) {
	p := f.p
	p.act()
	record, writer, promoting, err := p.verifyView()
	if err != nil {
		return false, p.check("observe", err)
	}
	if promoting == "" && writer != "" && record == writer {
		p.closed()
		p.note("verified: %s points at the writer %s; incident closed", p.trafficRecord(), writer)
		return true, nil
	}
	p.note("verify: %s points at %s, the writer is %s", p.trafficRecord(), record, writer)
	return false, nil
}
