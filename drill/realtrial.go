package drill

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// A real trial is the seed's failover on the real servers, in real time:
// two workers (processes of their own: realchild.go, realproc.go) — the
// fenced design's reach the servers only through the run's `leasegate
// serve --config` (realserve.go), with a session of their own there; the
// naive design's call the servers themselves —, the world's incident
// commander (realcommander.go, in the drill's process), and the faults
// that are real there (realPlan). The trajectory is the
// graders' vocabulary (trajectory.go), filled from what the servers
// themselves record — the standby's statement log (every pg_promote with
// the application_name that carries its operation and epoch), the
// topology each node reports (pg_is_in_recovery, timeline), the zone's SOA
// serial and incremental history — never from what a worker believes.

// FaultStandbyStopped: the standby is shut down as the promotion is about
// to be dispatched, and restarted by an operator a few seconds later.
const FaultStandbyStopped FaultKind = "standby_stopped"

// RealFaultKinds are the faults of the real-provider drill, in the
// report's order. It returns a new slice each time: the caller may keep or
// change it.
func RealFaultKinds() []FaultKind { return slices.Clone(realFaultKinds) }

var realFaultKinds = []FaultKind{FaultResponseDropped, FaultPausedAfterClaim, FaultResidualPause, FaultTrafficStop,
	FaultOperatorEdit, FaultStandbyStopped}

// Real-time constants of a real trial.
const (
	// realSessionTTL is a fenced worker's session TTL at the gateway: its
	// lease, renewed through the gateway every third of it, expires in
	// etcd this long after the last renewal. Longer than the naive
	// worker's: a renewal takes a hop more, and a slow machine (the race
	// detector, a loaded CI runner) must not end a running worker's
	// session.
	realSessionTTL = 4 * time.Second
	// realLeaseTTL is a worker's etcd lease TTL: a paused worker's lease
	// expires (in etcd, for real) this long after its last heartbeat.
	realLeaseTTL = 2 * time.Second
	// realTrialLimit bounds one trial.
	realTrialLimit = 3 * time.Minute
	// realClaimRetry is how often a waiting worker tries the task again.
	realClaimRetry = 250 * time.Millisecond
)

// realPlan is a real trial's faults, drawn from the trial's RNG (both
// designs face the same plan for the same seed and trial).
type realPlan struct {
	// cut: the first promote's connection is cut after send (CutProxy):
	// the server ran it, its answer is lost.
	cut bool
	// pauseIn: the first worker's process is SIGSTOPped there (its
	// heartbeats stop, its lease expires in etcd, the other worker takes
	// over), and gets SIGCONT wakeAfter past the other's claim to go on
	// where it was.
	pauseIn   window
	wakeAfter time.Duration
	// operatorEdit: an operator points the record at operatorValue by
	// nsupdate, when the promotion shows applied (operatorAtCall false) or
	// just before the first traffic call reaches the server (true).
	operatorEdit   bool
	operatorAtCall bool
	operatorValue  string
	// resumeAfter is how long the commander takes to confirm a
	// maintenance-page edit with the operator before the workflow resumes.
	resumeAfter time.Duration
	// standbyStop: the standby is shut down as the promotion is about to be
	// dispatched, and started again standbyDown later.
	standbyStop bool
	standbyDown time.Duration
	// standbyAt is when the second worker starts asking for the task.
	standbyAt time.Duration
}

// realWindows are the windows a real pause strikes in.
var realWindows = []window{winPromoteClaim, winPromoteResidual, winTrafficClaim}

func newRealPlan(rng *rand.Rand) realPlan {
	var p realPlan
	coin := func(prob float64) bool { return rng.Float64() < prob }
	p.cut = coin(0.35)
	if coin(0.5) {
		p.pauseIn = realWindows[rng.IntN(len(realWindows))]
	}
	p.wakeAfter = time.Duration(300+rng.IntN(1700)) * time.Millisecond
	p.operatorEdit = coin(0.35)
	p.operatorAtCall = coin(0.5)
	p.operatorValue = maintenance
	if rng.IntN(3) == 0 {
		p.operatorValue = staticFallback
	}
	p.resumeAfter = time.Duration(300+rng.IntN(700)) * time.Millisecond
	p.standbyStop = coin(0.25)
	p.standbyDown = time.Duration(1000+rng.IntN(2000)) * time.Millisecond
	p.standbyAt = time.Duration(300+rng.IntN(1200)) * time.Millisecond
	return p
}

// realWorld is one real trial.
type realWorld struct {
	ctx    context.Context
	run    *runner
	prov   *RealProviders
	design Design
	trial  int
	task   string
	plan   realPlan
	start  time.Time

	mu         sync.Mutex // guards what follows, and the trajectory
	traj       *Trajectory
	journalRev int64
	held       bool            // a worker holds for the commander
	holder     string          // the worker that held
	exited     map[string]bool // workers done (their process said so, or ended)
	errs       []error
	history    naiveHistory
	fired      map[string]bool // faults that fired (each once)
	claims     map[string]chan struct{}

	// provMu orders the provider mutations and the reads that attribute
	// their effects (watch), so that a change is credited to its caller.
	provMu     sync.Mutex
	logAt      int64  // how far the standby's log was read
	lastOp     string // the last pg_promote statement's operation
	lastBy     string
	lastEp     int64
	cutsBefore int // the proxy's cuts before an armed promote
	// promotes counts this trial's pg_promote statements by operation.
	promotes map[string]int
	writer   string // the writer as last recorded
	record   string // the record's value as last recorded
	recordBy string // who made the record's last change
	serial   uint32 // the zone's serial as last read
	bg       sync.WaitGroup
	journal  *ledger.Ledger
	workers  []*realWorker
	promoted atomic.Bool
	// remote is set in a worker process: the link to the drill, which
	// keeps the trajectory and does what only it can (realchild.go).
	remote *workerLink
	// names maps a gateway identity to its worker's name (a fenced trial).
	names map[string]string
}

// realWorker is one worker of a real trial: in the drill, the process's
// stand-in (its pid, its grant as last reported); in the worker process,
// the worker.
type realWorker struct {
	w      *realWorld
	name   string
	first  bool
	pid    int
	sess   *coordinator.Session
	grant  coordinator.Grant
	hbStop chan struct{} // closes the heartbeat of the current session
	hbDone chan struct{}
	paused bool // the plan's pause struck it (once)
	// resumedFrom is the record's value the commander let it go on from.
	resumedFrom string
}

// runRealTrial runs one trial of design on the real providers.
func (r *runner) runRealTrial(ctx context.Context, design Design, trial int) (*Trajectory, []error) {
	traj := &Trajectory{Trial: trial, Design: design, Original: realOriginal}
	p := r.cfg.real
	if _, err := p.reset(ctx); err != nil {
		return traj, []error{err}
	}
	ctx, cancel := context.WithTimeout(ctx, realTrialLimit)
	defer cancel()
	w := &realWorld{ctx: ctx, run: r, prov: p, design: design, trial: trial, task: fmt.Sprintf("incident-%d", trial),
		plan: newRealPlan(trialRNG(r.cfg.Seed, trial)), start: time.Now(), traj: traj,
		fired: map[string]bool{}, exited: map[string]bool{}, claims: map[string]chan struct{}{}, promotes: map[string]int{}, writer: realOriginal, record: realOriginal}
	if fi, err := os.Stat(p.pair.Standby.Log); err == nil {
		w.logAt = fi.Size() // earlier trials' statements are not this one's
	}
	if s, err := p.dns.SOASerial(ctx); err == nil {
		w.serial = s
	}
	l, err := ledger.New(r.coord, ledger.WithLogger(r.cfg.Logger))
	if err != nil {
		return traj, []error{err}
	}
	w.journal = l
	a := w.newWorker("worker-a", true)
	b := w.newWorker("worker-b", false)
	stop, commanded := make(chan struct{}), make(chan struct{})
	close(commanded)
	if design == Fenced {
		w.names = map[string]string{}
		for _, name := range realCallers {
			w.names[r.serve.certs.IDs[name]] = name
		}
		if w.plan.cut { // the first promote that reaches the standby: its connection is cut after send
			w.cutsBefore = p.proxy.Cuts()
			p.proxy.CutAfter("pg_promote")
		}
		commanded = make(chan struct{})
		go func() {
			defer close(commanded)
			w.runCommander(r.serve.commander, stop)
		}()
	}
	var wg sync.WaitGroup
	for _, wk := range []*realWorker{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if wk == b {
				wk.sleep(w.plan.standbyAt)
			}
			wk.runProc(wk.spec())
		}()
	}
	wg.Wait()
	close(stop)
	<-commanded
	w.bg.Wait() // the standby's restart, if it was stopped
	w.provMu.Lock()
	w.watch("", 0, "")
	w.provMu.Unlock()
	w.syncJournal()
	w.provMu.Lock()
	w.watch("", 0, "")
	w.provMu.Unlock()
	traj.FinalWriter, traj.FinalTraffic = w.writer, w.record
	for _, wk := range w.workers {
		wk.endSession()
	}
	return traj, w.errs
}

func (w *realWorld) newWorker(name string, first bool) *realWorker {
	wk := &realWorker{w: w, name: name, first: first}
	w.workers = append(w.workers, wk)
	return wk
}

// since is real time since the trial started: the trajectory's clock.
func (w *realWorld) since() time.Duration { return time.Since(w.start) }

func (w *realWorld) add(e Event) {
	if w.remote != nil {
		w.remote.call(linkMsg{Op: opEvent, Event: &e})
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e.At = w.since()
	w.traj.add(e)
}

func (w *realWorld) fail(err error) {
	if w.remote != nil {
		w.remote.fail(err)
		return
	}
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
	w.add(Event{Kind: KindNote, Actor: "drill", Detail: "error: " + err.Error()})
}

// once reports whether fault kind fires now (the first time it is asked).
func (w *realWorld) once(kind string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired[kind] {
		return false
	}
	w.fired[kind] = true
	return true
}

func (w *realWorld) fault(kind FaultKind, actor, detail string) {
	w.add(Event{Kind: KindFault, Actor: actor, Effect: string(kind), Detail: detail})
}

// claimed is closed when name has been granted the task.
func (w *realWorld) claimed(name string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.claims[name]
	if !ok {
		c = make(chan struct{})
		w.claims[name] = c
	}
	return c
}

// isHeld reports whether there is nothing left to claim the task for: a
// worker ended in a hold for the commander (it held and its process is
// done — a hold the commander may still resume from is not the end), or
// the trial failed. The drill answers it.
func (w *realWorld) isHeld() bool {
	if w.remote != nil {
		return w.remote.call(linkMsg{Op: opHeld}).B
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return (w.held && w.exited[w.holder]) || len(w.errs) > 0
}

// setHeld holds (or resumes) the task for the commander.
func (w *realWorld) setHeld(h bool) {
	w.remote.call(linkMsg{Op: opSetHeld, B: h})
}

// syncJournal appends the ledger journal's new transitions of the task to
// the trajectory, as the sim's world does: the graders read the journal.
func (w *realWorld) syncJournal() {
	if w.design != Fenced {
		return
	}
	if w.remote != nil {
		w.remote.call(linkMsg{Op: opSync})
		return
	}
	ts, err := w.journal.Journal(context.WithoutCancel(w.ctx), w.run.tenant(w.design), w.task)
	if err != nil {
		w.fail(fmt.Errorf("journal: %w", err))
		return
	}
	if len(ts) > 0 && ts[len(ts)-1].Revision > w.journalRevNow() {
		// What the servers show now precedes what the journal says: an
		// outcome cites evidence the servers recorded before it.
		w.provMu.Lock()
		w.watch("", 0, "")
		w.provMu.Unlock()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range ts {
		if t.Revision <= w.journalRev {
			continue
		}
		w.journalRev = t.Revision
		actor := t.Owner
		if name, ok := w.names[t.Owner]; ok {
			actor = name
		}
		e := Event{At: w.since(), Kind: KindTransition, Actor: actor, Epoch: t.Epoch, Operation: t.Operation,
			Effect: realEffect(t.Operation), From: string(t.From), To: string(t.To), Detail: string(t.By) + ": " + t.Reason}
		if t.Evidence != nil {
			e.Evidence = t.Evidence.ProviderIDs
		}
		w.traj.add(e)
	}
}

// journalRevNow is the revision of the last journal entry copied.
func (w *realWorld) journalRevNow() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.journalRev
}

// realEffect names an operation's effect by its id.
func realEffect(operation string) string {
	if strings.HasPrefix(operation, "promote") {
		return "promote"
	}
	return "traffic"
}

// promoteLine is a pg_promote statement in the standby's log, with the
// application_name the caller set: "<design> <operation> epoch <n>".
var promoteLine = regexp.MustCompile(`app=(leasegate|naive) (\S+) epoch (\d+) .*statement: SELECT pg_promote`)

// watch reads what the servers recorded since the last look and adds it to
// the trajectory, crediting changes to by (its epoch, its operation): the
// pg_promote statements the standby logged (a call under the operation and
// epoch its connection named), the standby out of recovery (the writer
// moved: the promotion accepted, with the timeline as evidence), the
// record's value at the authoritative server (a change, with the zone's
// serials as evidence: BIND applies an update at once, so a change it
// answers is in sync). The caller holds provMu.
func (w *realWorld) watch(by string, epoch int64, operation string) {
	ctx := context.WithoutCancel(w.ctx)
	w.watchLog(by)
	if w.writer == realOriginal {
		t := w.prov.pg.Topology(ctx)
		if n, _ := t.Node(realTarget); n.Reachable && !n.InRecovery {
			// The statement's log line may reach the file a moment after
			// the promotion shows: the accepted promotion is credited to
			// the call that made it.
			for i := 0; i < 40 && w.lastOp == ""; i++ {
				time.Sleep(25 * time.Millisecond)
				w.watchLog(by)
			}
			w.writer = realTarget
			ids := []string{realTarget + "@promoted", fmt.Sprintf("%s@timeline-%d", realTarget, n.Timeline)}
			w.add(Event{Kind: KindApplied, Actor: "postgres", Effect: "promotion-accepted", Operation: w.lastOp, Value: realTarget,
				Evidence: ids, Epoch: w.lastEp, By: w.lastBy, Detail: fmt.Sprintf("%s out of recovery on timeline %d", realTarget, n.Timeline)})
			w.add(Event{Kind: KindApplied, Actor: "postgres", Effect: "writer", Operation: w.lastOp, Value: realTarget, Evidence: ids})
			w.promoted.Store(true)
			if w.plan.operatorEdit && !w.plan.operatorAtCall && w.once("operator") {
				w.operatorEdit()
			}
		}
	}
	w.watchDNS(by, epoch, operation)
}

// watchLog adds the standby's new pg_promote statements as calls.
func (w *realWorld) watchLog(by string) {
	f, err := os.Open(w.prov.pair.Standby.Log)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= w.logAt {
		return
	}
	buf := make([]byte, fi.Size()-w.logAt)
	n, _ := f.ReadAt(buf, w.logAt)
	text := string(buf[:n])
	end := strings.LastIndexByte(text, '\n')
	if end < 0 {
		return
	}
	w.logAt += int64(end + 1)
	for _, line := range strings.Split(text[:end], "\n") {
		m := promoteLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ep, _ := strconv.ParseInt(m[3], 10, 64)
		caller := by
		if caller == "" {
			caller = w.ownerOf(ep)
		}
		w.lastOp, w.lastEp, w.lastBy = m[2], ep, caller
		w.promotes[m[2]]++
		w.add(Event{Kind: KindCall, Actor: "postgres", Effect: "PromoteTarget", Epoch: ep, Operation: m[2], Value: realTarget,
			By: caller, Detail: "pg_promote in " + realTarget + "'s statement log"})
	}
}

// historyTimeout is the workflow engine's heartbeat timeout of worker's
// open attempt, seen when another worker took the task: no result was
// recorded, so its outcome is unknown.
func (w *realWorld) historyTimeout(worker string) {
	if w.remote != nil {
		w.remote.call(linkMsg{Op: opHistTimeout, S: worker})
		return
	}
	w.mu.Lock()
	key, ok := w.history.open[worker]
	delete(w.history.open, worker)
	w.mu.Unlock()
	if ok {
		w.add(Event{Kind: KindTransition, Actor: "temporal", Operation: key, Effect: "promote",
			From: "STARTED", To: "UNKNOWN", Detail: "activity heartbeat timeout; no result recorded"})
	}
}

// promotesLogged reads the standby's log and returns how many pg_promote
// statements it shows in this trial under operation ("": under any).
func (w *realWorld) promotesLogged(operation string) int {
	if w.remote != nil {
		return int(w.remote.call(linkMsg{Op: opPromotes, S: operation}).N)
	}
	w.provMu.Lock()
	defer w.provMu.Unlock()
	w.watchLog("")
	if operation != "" {
		return w.promotes[operation]
	}
	n := 0
	for _, c := range w.promotes {
		n += c
	}
	return n
}

// ownerOf is the worker whose grant has epoch.
func (w *realWorld) ownerOf(epoch int64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wk := range w.workers {
		if wk.grant.Epoch == epoch {
			return wk.name
		}
	}
	return "unknown"
}

// watchDNS adds the record's changes since the last look, each step of
// the zone's own history (IXFR) in order — two changes between two looks
// (the gateway's update, then an operator's nsupdate) are two changes,
// each with its serials as evidence. The last is credited to by (its
// epoch, its operation) when given; any other the fenced design's gateway
// made is credited to the journal's traffic operation toward its value.
func (w *realWorld) watchDNS(by string, epoch int64, operation string) {
	ctx := context.WithoutCancel(w.ctx)
	rr, err := w.prov.up.Read(ctx, realRecord, "A")
	if err != nil {
		w.add(Event{Kind: KindNote, Actor: "bind", Detail: "read: " + err.Error()})
		return
	}
	zone := w.prov.dns.Zone
	before := w.serial
	w.serial = rr.Serial
	type change struct {
		value string
		ids   []string
	}
	var changes []change
	if steps, err := w.prov.up.History(ctx, before); err == nil {
		for _, st := range steps {
			for _, a := range st.Added {
				if x, ok := a.(*mdns.A); ok && strings.EqualFold(x.Hdr.Name, mdns.CanonicalName(realRecord)) {
					changes = append(changes, change{realName([]string{x.A.String()}),
						[]string{fmt.Sprintf("%s serial %d", zone, st.To), fmt.Sprintf("%s serial %d->%d", zone, st.From, st.To)}})
				}
			}
		}
	}
	if len(changes) == 0 { // no history from that serial: the value now
		changes = []change{{realName(rr.Values), []string{fmt.Sprintf("%s serial %d", zone, rr.Serial)}}}
	}
	for i, ch := range changes {
		if ch.value == w.record {
			continue
		}
		w.record = ch.value
		b, e, op := "", int64(0), ""
		if i == len(changes)-1 {
			b, e, op = by, epoch, operation
		}
		if b == "" && w.design == Fenced {
			// Through the gateway: the journal's traffic operation toward it.
			if b, e, op = w.creditTraffic(ch.value); b != "" {
				w.add(Event{Kind: KindCall, Actor: "bind", Effect: "ChangeResourceRecordSets", Epoch: e, Operation: op,
					Value: ch.value, By: b, Detail: "RFC 2136 UPDATE from the gateway, prerequisite: the approved record"})
			}
		}
		if b == "" {
			b = "unknown"
		}
		w.recordBy = b
		w.add(Event{Kind: KindApplied, Actor: "bind", Effect: "record", Operation: op, Value: ch.value, Evidence: ch.ids, Epoch: e, By: b})
		w.add(Event{Kind: KindApplied, Actor: "bind", Effect: "insync", Operation: op, Value: ch.value, Evidence: ch.ids, Epoch: e, By: b})
	}
}

// operatorEdit is the operator's nsupdate mid-incident: the record pointed
// at the plan's value by hand, outside any gateway. The caller holds
// provMu.
func (w *realWorld) operatorEdit() {
	v := w.plan.operatorValue
	w.fault(FaultOperatorEdit, "operator", "nsupdate points the record at "+v+" by hand")
	if err := w.prov.dns.Nsupdate(context.WithoutCancel(w.ctx),
		fmt.Sprintf("update delete %s A\nupdate add %s 60 A %s", realRecord, realRecord, realAddr[v])); err != nil {
		w.fail(fmt.Errorf("operator's nsupdate: %w", err))
		return
	}
	w.watchDNS(operatorCaller.actor, 0, "")
	if v != maintenance && w.design == Fenced {
		w.add(Event{Kind: KindDecision, Actor: commander, Effect: decisionHold, Value: ReasonOperatorTookOver, Detail: fmt.Sprintf(
			"the operator pointed %s at %s by hand: a routing decision that stands until a person decides otherwise", realRecord, v)})
	}
}

// beforeTrafficCall is the operator's edit at the call, when the plan puts
// it there: after the gateway revalidated, before the update reaches the
// server. The caller holds provMu.
func (w *realWorld) beforeTrafficCall() {
	if w.plan.operatorEdit && w.plan.operatorAtCall && w.once("operator") {
		w.operatorEdit()
	}
}

// beforePromoteCall arms the cut of the first promote that reaches the
// standby, when planned; afterPromoteCall reports it if it fired, and
// otherwise takes it back for the next promote (the call never reached
// the server: the standby was down, say). The caller holds provMu.
func (w *realWorld) beforePromoteCall() {
	w.mu.Lock()
	armed := w.plan.cut && !w.fired["cut"]
	w.mu.Unlock()
	if armed {
		w.cutsBefore = w.prov.proxy.Cuts()
		w.prov.proxy.CutAfter("pg_promote")
	}
}

func (w *realWorld) afterPromoteCall() {
	w.mu.Lock()
	done := w.fired["cut"]
	w.mu.Unlock()
	if !w.plan.cut || done {
		return
	}
	if w.prov.proxy.Cuts() == w.cutsBefore {
		w.prov.proxy.Disarm()
		return
	}
	w.once("cut")
	w.add(Event{Kind: KindFault, Actor: "network", Effect: string(FaultResponseDropped),
		Detail: "the promote's connection was cut after send: the server ran it, its answer is lost"})
}

// stopStandby is the standby-stopped fault, before the first dispatch of
// the promotion: a fast shutdown, and a start standbyDown later.
func (w *realWorld) stopStandby() {
	if !w.plan.standbyStop || !w.once("standby") {
		return
	}
	w.fault(FaultStandbyStopped, "postgres", fmt.Sprintf("%s shut down; an operator starts it again in %v", realTarget, w.plan.standbyDown.Round(time.Millisecond)))
	if err := w.prov.pair.Standby.Stop(); err != nil {
		w.fail(fmt.Errorf("stop the standby: %w", err))
		return
	}
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		time.Sleep(w.plan.standbyDown)
		if err := w.prov.pair.Standby.Start(context.WithoutCancel(w.ctx)); err != nil {
			w.fail(fmt.Errorf("start the standby again: %w", err))
			return
		}
		w.add(Event{Kind: KindNote, Actor: "operator", Detail: realTarget + " started again"})
	}()
}

// writers is the topology's writers now, from each node.
func (w *realWorld) writers() []string {
	return w.prov.pg.Topology(context.WithoutCancel(w.ctx)).Writers()
}

// recordNow is the record's value at the authoritative server.
func (w *realWorld) recordNow() string {
	rr, err := w.prov.up.Read(context.WithoutCancel(w.ctx), realRecord, "A")
	if err != nil {
		return "(unreadable)"
	}
	return realName(rr.Values)
}

// record adds an event of the worker's.
func (wk *realWorker) record(e Event) {
	if e.Actor == "" {
		e.Actor = wk.name
	}
	if e.Epoch == 0 {
		e.Epoch = wk.grant.Epoch
	}
	wk.w.add(e)
}

func (wk *realWorker) note(format string, args ...any) {
	wk.record(Event{Kind: KindNote, Detail: fmt.Sprintf(format, args...)})
}

// sleep waits d of real time (or until the trial's end).
func (wk *realWorker) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wk.w.ctx.Done():
	}
}

// step is the time one action of a worker takes.
func (wk *realWorker) step() { wk.sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond) }

func (wk *realWorker) run() {
	if err := wk.naive(); err != nil && !errors.Is(err, errStop) {
		wk.w.fail(err)
	}
}

// acquire claims the task: a fresh session (lease realLeaseTTL, kept alive
// by this worker's heartbeat) per attempt, tried again every
// realClaimRetry while another worker holds the task. errStop when there
// is nothing to claim for (a hold, the trial lost, the trial's end).
func (wk *realWorker) acquire() error {
	w := wk.w
	for {
		if w.isHeld() {
			return fmt.Errorf("%w: nothing to claim the task for", errStop)
		}
		if err := wk.openSession(); err != nil {
			return err
		}
		g, err := wk.sess.Claim(w.ctx, w.run.tenant(w.design), w.task)
		switch coordinator.DispositionOf(err) {
		case coordinator.OK:
			wk.grant = g
			wk.record(Event{Kind: KindClaim, Detail: "granted " + wk.name})
			w.remote.call(linkMsg{Op: opClaimed, N: g.Epoch, N2: g.Lease})
			if w.isHeld() { // the holder ended in its hold as this claim went in
				wk.release()
				return fmt.Errorf("%w: the task is held for the commander", errStop)
			}
			if w.design == Naive {
				w.historyTimeout(otherWorker(wk.name))
			}
			return nil
		case coordinator.Busy:
			wk.endSession()
			if w.isHeld() || w.ctx.Err() != nil {
				return fmt.Errorf("%w: nothing to claim the task for", errStop)
			}
			wk.sleep(realClaimRetry)
		default:
			wk.endSession()
			return fmt.Errorf("claim by %s: %w", wk.name, err)
		}
	}
}

// openSession grants the worker a lease and starts its heartbeat: a
// renewal every TTL/4 (none while the process is stopped).
func (wk *realWorker) openSession() error {
	s, err := wk.w.run.coord.NewSession(wk.w.ctx, wk.name, realLeaseTTL, coordinator.WithoutKeepAlive())
	if err != nil {
		return fmt.Errorf("session of %s: %w", wk.name, err)
	}
	wk.sess, wk.hbStop, wk.hbDone = s, make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}, lease int64) {
		defer close(done)
		t := time.NewTicker(realLeaseTTL / 4)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(wk.w.ctx), realLeaseTTL/2)
			_, _, _ = store.Of(wk.w.run.coord).RenewLease(ctx, lease)
			cancel()
		}
	}(wk.hbStop, wk.hbDone, s.Lease())
	return nil
}

// endSession stops the heartbeat and revokes the lease (gone already is
// fine).
func (wk *realWorker) endSession() {
	if wk.sess == nil {
		return
	}
	close(wk.hbStop)
	<-wk.hbDone
	ctx, cancel := context.WithTimeout(context.WithoutCancel(wk.w.ctx), 10*time.Second)
	_ = wk.sess.Close(ctx)
	cancel()
	wk.sess = nil
}

// release gives the task up when the worker is done.
func (wk *realWorker) release() {
	if err := wk.w.run.coord.Release(wk.w.ctx, wk.grant); err != nil {
		wk.note("release refused: %s", coordinator.DispositionOf(err))
		return
	}
	wk.record(Event{Kind: KindLost, Detail: "released"})
}

// stopAt is where the plan's pause may strike: the first worker, once, in
// the plan's window. The worker process asks the drill to pause it and
// blocks on the answer; the drill SIGSTOPs it (realWorker.pause), its
// lease expires in etcd after realLeaseTTL, the other worker claims the
// task, and wakeAfter later the drill sends SIGCONT and answers: the
// worker goes on exactly where it was.
func (wk *realWorker) stopAt(win window, what string) {
	w := wk.w
	if !wk.first || wk.paused || w.plan.pauseIn != win {
		return
	}
	wk.paused = true
	w.remote.call(linkMsg{Op: opPause, S: string(win), S2: what})
	wk.note("wakes up and continues where it was (%s)", win)
}

func otherWorker(name string) string {
	if name == "worker-a" {
		return "worker-b"
	}
	return "worker-a"
}

// woken reports whether the plan's pause struck this worker.
func (wk *realWorker) woken() bool { return wk.paused }
