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

// The fenced design's port in the simulated world (fenced.go runs on it):
// a worker of the trial's simulation, in simulated time, reaching its
// trial's gateway server over loopback TLS (hopLedger) or, in the fast
// mode, the ledger in its own process (inProcess), and reading the
// simulated providers as a caller of theirs.

// simPort is one simulated worker as the fenced design's port.
type simPort struct{ *worker }

var _ fencedPort = simPort{}

// simPace is the fenced design's pace in simulated time.
var simPace = fencedPace{
	reconcileWait: 10 * time.Second,
	decisionFirst: 2 * time.Second, decisionMost: 15 * time.Second, doubleAfter: 20 * time.Second, decisionPolls: decisionPolls,
	reviewPoll: commanderLook, reviewPolls: commanderLooks + 2,
	settlePoll: 2 * time.Second, settleTries: 60,
}

// runFenced is one fenced worker of the simulated world.
func (wk *worker) runFenced() {
	if err := runFencedOn(simPort{wk}); err != nil && !errors.Is(err, errStop) {
		wk.w.fail(err)
	}
}

func (p simPort) ctx() context.Context              { return p.w.ctx }
func (p simPort) grantNow() coordinator.Grant       { return p.grant }
func (p simPort) tenantTask() (tenant, task string) { return p.w.run.tenant(p.w.design), p.w.task }
func (p simPort) wait(d time.Duration)              { p.a.sleep(d) }
func (p simPort) act()                              { p.a.step() }
func (p simPort) clock() time.Duration              { return p.w.s.now }
func (p simPort) pace() fencedPace                  { return simPace }
func (p simPort) original() string                  { return clusterPrimary }
func (p simPort) trafficRecord() string             { return recordName }
func (p simPort) closed()                           { p.w.closed = true }

// open is the worker's gateway; build v2 orders its steps differently: it
// reads the world first.
func (p simPort) open() (gateway, error) {
	l, err := p.newLedger()
	if err != nil {
		return nil, err
	}
	if p.build == "v2" {
		p.observe()
	}
	return l, nil
}

func (p simPort) view() (string, string, error) {
	writer, promoting := p.observe()
	return writer, promoting, nil
}

func (p simPort) writerNow() (string, error) {
	writer, _ := p.w.topo.Describe(p.caller(""))
	return writer, nil
}

func (p simPort) recordNow() (string, error) { return p.w.dns.Record(p.caller("")), nil }

func (p simPort) verifyView() (string, string, string, error) {
	record := p.w.dns.Record(p.caller(""))
	writer, promoting := p.w.topo.Describe(p.caller(""))
	return record, writer, promoting, nil
}

func (p simPort) proposePromotion(n int) (string, ledger.Effect, ledger.Observation, error) {
	writer, promoting := p.observe()
	id := p.promotionID(n)
	p.w.effects[id] = "promote"
	return id, p.promotion(), p.observation(writer, promoting), nil
}

// promotion is the incident's promotion as this worker's build writes it.
func (p simPort) promotion() ledger.Effect {
	return ledger.Effect{Kind: kindPromote, Target: clusterSecondary, Params: p.promotionParams(), Policy: policyPromote}
}

// proposeTraffic is the n-th traffic intent toward writer, against the
// record's value at the DNS provider, requiring the topology — the
// database adapter's world, observed for the promotion — to show writer
// with no promotion in progress: the world the worker chose writer from
// (settledView). A view that was stale (the stale-cache fault), or a
// writer that moves before the dispatch, is a requirement the gateway
// finds changed: SUPERSEDED, nothing sent.
func (p simPort) proposeTraffic(n int, writer string) (string, ledger.Effect, ledger.Observation, []ledger.Requirement, error) {
	w := p.w
	id := fmt.Sprintf("traffic/%s/%d", w.task, n)
	w.effects[id] = "traffic"
	params, _ := json.Marshal(trafficParams{Record: recordName, Value: writer})
	requires := []ledger.Requirement{{Effect: p.promotion(), Precondition: p.observation(writer, "")}}
	if w.run.dropTrafficRequirement {
		requires = nil // a broken design, for the test that pins the requirement
	}
	return id, ledger.Effect{Kind: kindTraffic, Target: recordName, Params: params, Policy: policyTraffic},
		p.recordObservation(w.dns.Record(p.caller(""))), requires, nil
}

func (p simPort) trafficValue(rec ledger.Record) string {
	var tp trafficParams
	_ = json.Unmarshal(rec.Effect.Params, &tp)
	return tp.Value
}

func (p simPort) seen(rec ledger.Record) { p.w.effects[rec.Operation] = effectName(rec.Effect.Kind) }

// beforeDispatch: a dispatch takes a step of the worker's time, unless the
// scenario's script times the promotion's dispatch.
func (p simPort) beforeDispatch(rec ledger.Record) {
	if rec.Effect.Kind == kindTraffic && p.w.run.atTrafficDispatch != nil {
		p.w.run.atTrafficDispatch(p.worker)
	}
	if rec.Effect.Kind != kindPromote || !p.until("dispatch") {
		p.a.step()
	}
}

// hold stops the worker for the incident commander: traffic stays where it
// is. It records why and returns errStop; the worker then releases
// nothing and does nothing more.
func (wk *worker) hold(reason, format string, args ...any) error {
	wk.w.held = true
	why := fmt.Sprintf(format, args...)
	wk.record(Event{Kind: KindHold, Effect: reason, Value: wk.w.dns.value, Detail: why})
	return fmt.Errorf("%w: holds for the commander (%s): %s", errStop, reason, why)
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

// observe is the worker's view of the topology: a stale cache on its first
// read when the stale-cache fault is on, the provider's authority otherwise.
func (wk *worker) observe() (writer, promoting string) {
	if wk.staleCache && !wk.cacheUsed {
		return wk.topology(), ""
	}
	return wk.w.topo.Describe(wk.caller(""))
}
