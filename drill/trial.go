package drill

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// Design is one recovery design the drill runs.
type Design string

// The designs.
const (
	// Fenced: stable operation ids, the effect ledger's gateway with the
	// fence, reconciliation against the provider, revalidation before the
	// traffic change, promotion and traffic as separate operations.
	Fenced Design = "fenced"
	// Naive: the incident's design — a fresh request key per attempt, no
	// fence at the gateway, the checkpoint trusted as present truth,
	// promotion and traffic as one coarse step.
	Naive Design = "naive"
)

// Simulated-time constants of the scenario.
const (
	// simLeaseTTL is how long after a worker's last heartbeat its lease
	// expires (simulated; the drill then revokes the real etcd lease).
	simLeaseTTL = 10 * time.Second
	// trialLimit is when the simulated world stops.
	trialLimit = 30 * time.Minute
	// sessionTTL is the real etcd lease TTL of a worker's session. Workers
	// do not keep it alive (a trial lasts well under it in real time); a
	// simulated expiry revokes it.
	sessionTTL = 60 * time.Second
	// claimRetry is how soon a standby worker first tries the task again;
	// it doubles up to claimRetryMax.
	claimRetry    = 2 * time.Second
	claimRetryMax = 30 * time.Second
)

// world is one trial: the simulated clock and providers, the fault plan,
// and the workers.
type world struct {
	ctx     context.Context
	run     *runner
	design  Design
	trial   int
	task    string
	s       *sim
	topo    *topology
	dns     *dns
	audit   *auditTrail
	plan    plan
	traj    *Trajectory
	closed  bool // the incident is closed: a worker verified traffic follows the writer
	held    bool // a worker stopped for the incident commander, traffic held
	workers []*worker
	history naiveHistory
	errs    []error
	// replacement is started once (on takeover, or as the standby).
	replacement bool
	// journalRev is the revision of the last ledger journal entry copied
	// into the trajectory; effects names each operation's effect.
	journalRev int64
	effects    map[string]string
	journal    *ledger.Ledger
	// gw is the trial's gateway when the fenced workers reach it over the
	// network (gateway.go; nil: in-process); calls maps the actor of each
	// call at it to the worker that made it, and hopMu hands the world over
	// between a caller and the gateway's handler.
	gw       *trialGateway
	calls    map[*actor]*worker
	hopMu    sync.Mutex
	hopCalls map[string]*hopCall // under hopMu
	hopSeq   int
	// cmd is the world's incident commander (commander.go; nil in the
	// naive design, whose commander only reviews its plan).
	cmd *worldCommander
}

// worker is one simulated worker process; its ownership is real etcd.
type worker struct {
	w          *world
	name       string
	build      string
	a          *actor
	sess       session
	grant      coordinator.Grant
	first      bool // the first worker: the one faults stop
	staleCache bool // its first topology read comes from a stale cache
	cacheUsed  bool
	failed     bool // a worker fault fired on it
	// resumedFrom is the record's value the commander let this worker go
	// on from after an out-of-band edit ("" if none).
	resumedFrom string
	// stop is a stop that struck while the worker's call was at the
	// gateway, to take effect when it next runs (applyStop).
	stop *stopped
}

// trialRNG derives a trial's RNG from the run's seed and the trial
// number: a trial replays alone, in any order, in either design.
func trialRNG(seed uint64, trial int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(trial)*0x9e3779b97f4a7c15+1))
}

// runTrial runs one trial of one design and returns its trajectory.
func (r *runner) runTrial(ctx context.Context, design Design, trial int) (*Trajectory, []error) {
	if r.cfg.real != nil {
		return r.runRealTrial(ctx, design, trial)
	}
	if r.proc != nil {
		return r.proc.runTrial(ctx, trial)
	}
	rng := trialRNG(r.cfg.Seed, trial)
	return r.runWorld(ctx, design, trial, newPlan(rng), nil, rng)
}

// runWorld runs one world: a trial's plan, or a scenario's (sc set).
func (r *runner) runWorld(ctx context.Context, design Design, trial int, p plan, sc *script, rng *rand.Rand) (*Trajectory, []error) {
	traj := &Trajectory{Trial: trial, Design: design, Original: clusterPrimary}
	s := newSim(rng, traj)
	s.script = sc
	task, start := fmt.Sprintf("incident-%d", trial), time.Duration(0)
	if sc != nil {
		task, start = "incident-seed003", sc.start
	}
	audit := &auditTrail{s: s, duplicate: p.auditDuplicate, delayLong: p.auditDelay}
	w := &world{ctx: ctx, run: r, design: design, trial: trial, task: task, s: s,
		topo: newTopology(s, audit), dns: newDNS(s, audit), audit: audit, plan: p, traj: traj, effects: map[string]string{},
		calls: map[*actor]*worker{}, hopCalls: map[string]*hopCall{}}
	if design.ledgered() {
		l, err := ledger.New(r.coord, ledger.WithLogger(r.cfg.Logger))
		if err != nil {
			return traj, []error{err}
		}
		w.journal = l
		if r.hop != nil {
			gw, err := r.hop.startGateway(w)
			if err != nil {
				return traj, []error{err}
			}
			defer gw.stop()
			w.gw = gw
		}
	}
	w.dns.longDelay = p.dnsLong
	w.topo.lookupDownUntil = p.lookupOutage
	w.topo.lagOver, w.topo.lagBack = p.lagOver, p.lagBack
	switch p.dropOn {
	case "promote":
		w.topo.dropNext = true
	case "traffic":
		w.dns.dropNext = true
	}
	if p.dnsLong {
		traj.add(Event{Kind: KindFault, Actor: "route53", Effect: string(FaultDNSPendingLong), Detail: "changes stay PENDING for minutes"})
	}
	if p.operatorEdit {
		s.at(p.operatorAt, "operator edits the record", func() {
			if w.closed {
				return
			}
			traj.add(Event{At: s.now, Kind: KindFault, Actor: "operator", Effect: string(FaultOperatorEdit), Value: p.operatorValue,
				Detail: "points the record at " + p.operatorValue + " by hand"})
			w.dns.operatorSet(p.operatorValue)
			w.operatorTookOver(p.operatorValue)
		})
	}
	w.spawnWorker("worker-a", "v1", start, true)
	if w.journal != nil {
		w.startCommander()
	}
	if sc != nil {
		s.at(sc.repairAt, "the commander's repair", w.commanderRepair)
	}
	if p.stopIn == "" {
		w.spawnReplacement(p.standbyAt)
	}
	s.run(trialLimit)
	if w.journal != nil {
		w.syncJournal() // anything no worker copied (none expected): the graders read it all
	}
	traj.FinalWriter, traj.FinalTraffic = w.topo.writer, w.dns.value
	for _, wk := range w.workers {
		if wk.sess != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = wk.sess.Close(cctx) // revokes the lease; already gone is fine
			cancel()
		}
	}
	return traj, w.errs
}

// spawnWorker starts a worker at simulated time t.
func (w *world) spawnWorker(name, build string, t time.Duration, first bool) *worker {
	wk := &worker{w: w, name: name, build: build, first: first}
	wk.a = w.s.spawn(name, t, func(a *actor) {
		switch w.design {
		case Fenced:
			wk.runFenced()
		case Naive:
			wk.runNaive()
		default:
			wk.runSelfTest()
		}
	})
	w.workers = append(w.workers, wk)
	return wk
}

// spawnReplacement starts the second worker at t: the takeover after a
// failure, or a standby when nothing failed. It carries the stale-cache
// and new-build faults.
func (w *world) spawnReplacement(t time.Duration) {
	if w.replacement {
		return
	}
	w.replacement = true
	build := "v1"
	if w.plan.newBuild {
		build = "v2"
	}
	wk := w.spawnWorker("worker-b", build, t, false)
	wk.staleCache = w.plan.staleCache
	if w.plan.newBuild {
		w.s.at(t, "new build starts", func() {
			if !w.closed {
				w.traj.add(Event{At: w.s.now, Kind: KindFault, Actor: wk.name, Effect: string(FaultNewBuild),
					Detail: "worker build v2 starts while the v1 execution is open"})
			}
		})
	}
}

// fail records an infrastructure error (etcd unreachable, say): the trial
// does not count as passed or failed by the graders; the run reports it.
func (w *world) fail(err error) {
	w.errs = append(w.errs, err)
	w.traj.add(Event{At: w.s.now, Kind: KindNote, Actor: "drill", Detail: "error: " + err.Error()})
}

func (wk *worker) record(e Event) {
	e.At = wk.w.s.now
	if e.Actor == "" {
		e.Actor = wk.name
	}
	if e.Epoch == 0 {
		e.Epoch = wk.grant.Epoch
	}
	wk.w.traj.add(e)
}

func (wk *worker) note(format string, args ...any) {
	wk.record(Event{Kind: KindNote, Detail: fmt.Sprintf(format, args...)})
}

// caller is how this worker appears to a provider for a call under key.
func (wk *worker) caller(key string) caller {
	return caller{actor: wk.name, epoch: wk.grant.Epoch, key: key}
}

// start opens the worker's etcd session (its real lease).
func (wk *worker) start() error {
	s, err := wk.openSession()
	if err != nil {
		return fmt.Errorf("session of %s: %w", wk.name, err)
	}
	wk.sess = s
	return nil
}

// acquire claims the incident task in etcd, trying again after claimRetry
// (simulated), doubling up to claimRetryMax, while another worker holds it.
// It returns errStop when there is nothing left to claim for (the incident
// is held for the commander, or the trial already failed on etcd), and the
// drill's own error when etcd did not answer.
func (wk *worker) acquire() error {
	if wk.sess == nil {
		if err := wk.start(); err != nil {
			return err
		}
	}
	for retry := claimRetry; ; retry = min(2*retry, claimRetryMax) {
		var (
			g   coordinator.Grant
			err error
		)
		wk.direct(func() { g, err = wk.sess.Claim(wk.w.ctx, wk.w.run.tenant(wk.w.design), wk.w.task) })
		switch coordinator.DispositionOf(err) {
		case coordinator.OK:
			wk.grant = g
			wk.record(Event{Kind: KindClaim, Detail: "granted " + wk.name})
			return nil
		case coordinator.Busy:
			if len(wk.w.errs) > 0 || wk.w.held { // held for the commander, or the trial is lost already
				return fmt.Errorf("%w: nothing to claim the task for", errStop)
			}
			wk.a.sleep(retry)
		default:
			return fmt.Errorf("claim by %s: %w", wk.name, err)
		}
	}
}

// release gives the task up when the worker is done.
func (wk *worker) release() {
	if err := wk.releaseTask(); err != nil {
		if wk.w.gw != nil {
			if err := wk.check("release", err); !errors.Is(err, errStop) { // a stale worker's is refused at the gateway
				wk.note("release: %v", err)
			}
			return
		}
		wk.note("release refused: %s", coordinator.DispositionOf(err))
		return
	}
	wk.record(Event{Kind: KindLost, Detail: "released"})
}

// topology is the worker's view of the writer: its cache on the first read
// when the stale-cache fault is on, the provider's authority otherwise.
func (wk *worker) topology() string {
	if wk.staleCache && !wk.cacheUsed {
		wk.cacheUsed = true
		wk.record(Event{Kind: KindFault, Effect: string(FaultStaleCache), Value: clusterPrimary,
			Detail: "topology read from a stale cache"})
		return clusterPrimary
	}
	writer, _ := wk.w.topo.Describe(wk.caller(""))
	return writer
}

// stopAt is a point in the worker's run where the plan's stop may strike:
// the first worker, once, in the plan's window. A killed worker never
// comes back; a paused one stops sending heartbeats (its lease expires
// and the replacement takes over) and wakes up 20-60 s past its lease to
// go on exactly where it was.
func (wk *worker) stopAt(win window, what string) {
	p := wk.w.plan
	if !wk.first || wk.failed || p.stopIn != win {
		return
	}
	wk.failed = true
	fault := stopFault(win, p.kill)
	if wk.w.gw != nil || win == winResolve { // the commander's Resolve is never the worker's own code
		wk.stopBesideGateway(win, fault, what)
		return
	}
	if p.kill {
		wk.record(Event{Kind: KindFault, Effect: string(fault), Detail: "the process dies " + what})
		wk.expireLease()
		wk.a.kill()
	}
	wk.record(Event{Kind: KindFault, Effect: string(fault), Detail: "heartbeats stop " + what + "; the process is paused"})
	wk.expireLease()
	wk.a.sleep(wk.w.leaseTTL() + p.takeoverPause)
	wk.note("wakes up and continues where it was (%s)", win)
}

// expireLease makes the worker's lease expire simLeaseTTL from now: the
// drill revokes the real etcd lease then (etcd deletes the owner key, as on
// expiry), and the replacement starts.
func (wk *worker) expireLease() {
	w := wk.w
	ttl := w.leaseTTL()
	w.s.at(w.s.now+ttl, "lease expires", func() {
		err := w.run.coord.RevokeLease(w.ctx, wk.sess.Lease())
		if err != nil && coordinator.DispositionOf(err) != coordinator.ExpiredOwner {
			w.fail(fmt.Errorf("revoke %s's lease: %w", wk.name, err))
		}
		w.traj.add(Event{At: w.s.now, Kind: KindLost, Actor: wk.name, Epoch: wk.grant.Epoch,
			Detail: "lease expired (no heartbeats for " + ttl.String() + ")"})
		if w.design == Naive {
			w.history.timeout(w, wk.name)
		}
		w.spawnReplacement(w.s.now + w.takeoverDelay())
	})
}
