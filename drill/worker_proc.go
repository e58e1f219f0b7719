package drill

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/embedtest"
	gw "github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
)

// procRun is a worker drill's run: the certificates (kept on disk for the
// worker processes until the run ends) and the run's gateway listener on
// loopback (the hop of gateway.go: one TLS listener in front of each
// trial's gateway, by the path prefix /t/<trial>/, the session key every
// trial's gateway signs with, the commander's connections).
type procRun struct {
	r     *runner
	lg    *zap.Logger
	argv  []string
	dir   string
	certs gw.DevCerts
	hop   *hop
}

// procCallers are the certificates a worker drill makes: one per instance
// a trial may start, and the world's commander.
func procCallers() []string {
	names := []string{commander}
	for i := 1; i <= procInstances; i++ {
		names = append(names, fmt.Sprintf("worker-%d", i))
	}
	return names
}

func startProcRun(r *runner, argv []string, lg *zap.Logger) (*procRun, error) {
	dir, err := os.MkdirTemp("", "leasegate-drill-worker-")
	if err != nil {
		return nil, fmt.Errorf("drill: the workers' certificates: %w", err)
	}
	pr := &procRun{r: r, lg: lg, argv: argv, dir: dir}
	if pr.certs, err = gw.WriteDevCerts(dir, hopTrustDomain, procCallers()...); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("drill: %w", err)
	}
	if pr.hop, err = listenHop(lg, pr.certs, procCallers(), "drilling a worker: its instances reach their gateway over loopback TLS"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	lg.Info("the worker drilled", zap.Strings("worker", argv))
	return pr, nil
}

func (pr *procRun) close() error {
	err := pr.hop.close()
	if rerr := os.RemoveAll(pr.dir); err == nil && rerr != nil {
		err = rerr
	}
	return err
}

// nameOf is the caller a certificate identity names (the identity itself
// if it is none of the run's).
func (pr *procRun) nameOf(id string) string {
	if n, ok := pr.hop.names[id]; ok {
		return n
	}
	return id
}

// handlerOnHop is the trial's handler on the run's listener: each request
// served by the trial (serve), from the caller its certificate names.
func (pt *procTrial) handlerOnHop() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pt.serve(w, r, pt.pr.hop.peer(r), r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
	})
}

// order sorts a run's trials longest first, by the faults their plans
// draw (slowness): a worker's trials take real time, a few seconds each
// but a minute for some, and the run ends with its last trial; started
// last, a long one would leave the other slots idle while it runs.
func (pr *procRun) order(trials []int) {
	slow := map[int]time.Duration{}
	for _, t := range trials {
		slow[t] = newProcPlan(trialRNG(pr.r.cfg.Seed, t)).slowness()
	}
	slices.SortStableFunc(trials, func(a, b int) int { return cmp.Compare(slow[b], slow[a]) })
}

// slowness is about how much world time a plan's faults add to a trial:
// a DNS change PENDING for minutes, the commander confirming an
// operator's maintenance page, the lag over the bound, the audit trail's
// lookup down, and a stopped instance's lease the replacement waits out.
func (p procPlan) slowness() time.Duration {
	var d time.Duration
	if p.dnsLong {
		d += 165 * time.Second
	}
	if p.operatorEdit && p.operatorValue == maintenance {
		d += 2 * time.Minute
	}
	if p.lagOver > 0 || p.lagBack > 0 {
		d += p.lagBack - p.lagOver
	}
	d += p.lookupOutage
	if p.stopIn != "" {
		d += procSessionTTL * procScale * time.Second
	}
	return d
}

// procInstance is one start of the user's worker.
type procInstance struct {
	n        int
	name     string
	cmd      *exec.Cmd
	pid      int
	started  time.Time
	lastCall time.Time // its last request at the gateway (a renewal is one): its heartbeat
	calls    int
	promoted bool          // a promotion dispatch of its reached the provider
	exited   chan struct{} // closed once it exited; code then holds its exit code
	code     int
	out      *tailBuffer
	woken    chan struct{} // a paused instance's: closed when it got SIGCONT
	killed   bool
	// hop is the loopback proxy between the instance and the run's
	// gateway listener: its worker↔gateway network, where answers are
	// dropped.
	hop *embedtest.Proxy
}

// runTrial runs one trial of the user's worker.
func (pr *procRun) runTrial(ctx context.Context, trial int) (*Trajectory, []error) {
	r := pr.r
	rng := trialRNG(r.cfg.Seed, trial)
	p := newProcPlan(rng)
	traj := &Trajectory{Trial: trial, Design: Worker, Original: clusterPrimary}
	s := newSim(rng, traj)
	audit := &auditTrail{s: s, duplicate: p.auditDuplicate, delayLong: p.auditDelay}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pt := &procTrial{pr: pr, ctx: ctx, live: tctx, trial: trial, task: fmt.Sprintf("incident-%d", trial), tenant: r.tenant(Worker), plan: p,
		s: s, topo: newTopology(s, audit), dns: newDNS(s, audit), audit: audit, traj: traj,
		effects: map[string]string{}, epochs: map[int64]string{}, claimedCh: make(chan struct{}), byName: map[string]*procInstance{}}
	pt.dns.longDelay = p.dnsLong
	pt.topo.lookupDownUntil = p.lookupOutage
	pt.topo.lagOver, pt.topo.lagBack = p.lagOver, p.lagBack
	if p.dropProvider == "promote" {
		pt.topo.dropNext = true
	}
	l, err := ledger.New(r.coord, ledger.WithLogger(r.cfg.Logger))
	if err != nil {
		return traj, []error{err}
	}
	pt.journal = l
	if pt.handler, err = pt.newGateway(); err != nil {
		return traj, []error{err}
	}
	pt.key = pr.hop.serveTrial(fmt.Sprintf("%s-%d", Worker, trial), pt.handlerOnHop())
	defer pr.hop.unserveTrial(pt.key)

	pt.mu.Lock()
	if p.dnsLong {
		pt.add(Event{Kind: KindFault, Actor: "route53", Effect: string(FaultDNSPendingLong), Detail: "changes stay PENDING for minutes"})
	}
	if p.operatorEdit {
		s.at(p.operatorAt, "operator edits the record", func() {
			pt.edited = true
			pt.add(Event{Kind: KindFault, Actor: "operator", Effect: string(FaultOperatorEdit), Value: p.operatorValue,
				Detail: "points the record at " + p.operatorValue + " by hand"})
			pt.dns.operatorSet(p.operatorValue)
			if p.operatorValue != maintenance {
				pt.add(Event{Kind: KindDecision, Actor: commander, Effect: decisionHold, Value: ReasonOperatorTookOver,
					Detail: "the operator pointed " + recordName + " at " + p.operatorValue + " by hand: a routing decision that stands"})
			}
		})
	}
	pt.mu.Unlock()

	var bg sync.WaitGroup
	bg.Add(3)
	go func() { defer bg.Done(); pt.watchClaims(tctx) }()
	go func() { defer bg.Done(); pt.tick(tctx) }()
	go func() { defer bg.Done(); pt.commander(tctx) }()
	pt.supervise()
	pt.inflight.Wait()
	cancel()
	bg.Wait()
	pt.wakes.Wait()
	for _, in := range pt.inst {
		in.hop.Close()
	}

	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.syncClaims()
	pt.syncJournal()
	pt.settle()
	traj.FinalWriter, traj.FinalTraffic = pt.topo.writer, pt.dns.value
	return traj, pt.errs
}

// newGateway is the trial's gateway: the server of `leasegate serve`,
// with the trial's providers as its adapters, each instance's certificate
// a worker of the trial's tenant and the commander's an approver and
// operator; its ledger on the world's clock.
func (pt *procTrial) newGateway() (http.Handler, error) {
	pr := pt.pr
	var ids []gw.Identity
	for _, name := range procCallers() {
		roles := []gw.Role{gw.RoleWorker}
		if name == commander {
			roles = []gw.Role{gw.RoleApprover, gw.RoleOperator}
		}
		ids = append(ids, gw.Identity{ID: pr.certs.IDs[name], Roles: roles, Tenants: []string{pt.tenant}})
	}
	srv, err := gw.New(pr.r.coord, gw.WithIdentities(ids...), gw.WithSessionKey(pr.hop.key),
		gw.WithAdapters(procAdapter{pt: pt, kind: kindPromote}, procAdapter{pt: pt, kind: kindTraffic}),
		gw.WithLogger(pr.r.cfg.Logger),
		gw.WithLedgerOptions(
			ledger.WithClock(func() time.Time { return simTime(pt.worldNow()) }),
			ledger.WithSleep(pt.sleep),
			ledger.WithPolling(2*time.Second, 30*time.Second, 12)))
	if err != nil {
		return nil, fmt.Errorf("drill: gateway: %w", err)
	}
	return srv.Handler(), nil
}

// tick fires the world's events as their time comes.
func (pt *procTrial) tick(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pt.mu.Lock()
			pt.advance()
			pt.mu.Unlock()
		}
	}
}

// serve is one request to the trial's gateway, from caller name. The
// instance's request is its heartbeat; the fault plan's stop between its
// effects and the dropped answer strike here.
func (pt *procTrial) serve(w http.ResponseWriter, r *http.Request, name, method string) {
	pt.mu.Lock()
	if pt.done {
		pt.mu.Unlock()
		http.Error(w, "drill: the trial is over", http.StatusServiceUnavailable)
		return
	}
	inst := pt.byName[name]
	if inst != nil && pt.started.Load() == 0 {
		pt.started.Store(time.Now().UnixNano()) // the incident begins as the worker is up
	}
	pt.advance()
	info := &reqInfo{proc: method, inst: inst}
	var wait chan struct{}
	if inst != nil {
		inst.lastCall, inst.calls = time.Now(), inst.calls+1
		if inst.promoted && method != "RenewSession" && method != "KeepAlive" {
			pt.stopAt(inst, pwBetweenEffects, "its promotion answered, its next request ("+method+") held until it wakes")
			wait = inst.woken
		}
	}
	pt.inflight.Add(1)
	pt.mu.Unlock()
	defer pt.inflight.Done()
	if wait != nil {
		select {
		case <-wait:
		case <-pt.live.Done():
			return
		}
	}
	r = r.WithContext(context.WithValue(r.Context(), reqKey{}, info))
	drop := method == "Dispatch" && pt.plan.dropHop && inst != nil
	if !drop {
		pt.handler.ServeHTTP(w, r)
		pt.after(inst)
		return
	}
	buf := &bufferedResponse{h: http.Header{}, code: http.StatusOK}
	pt.handler.ServeHTTP(buf, r)
	pt.after(inst)
	pt.mu.Lock()
	drop = info.applied == kindPromote && !pt.hopDropped
	if drop {
		pt.hopDropped = true
		pt.add(Event{Kind: KindFault, Actor: "network", Effect: string(FaultAnswerDroppedAtWorker),
			Detail: "the gateway ran " + inst.name + "'s promotion Dispatch and answered; the hop between them (a loopback proxy) cuts the connection, and the answer is lost on the way"})
	}
	pt.mu.Unlock()
	answerThrough(w, buf, inst.hop, drop)
}

// answerThrough writes a buffered answer to w. When drop, the instance's
// hop — the loopback proxy its connections pass through — first cuts the
// connections open on it, so the answer the gateway then writes is lost
// on the way and the worker sees its connection end with no answer (as a
// network that lost the answer shows it, not a slow one); its next
// connection passes.
func answerThrough(w http.ResponseWriter, buf *bufferedResponse, hop *embedtest.Proxy, drop bool) {
	if drop {
		hop.CutOpen()
	}
	for k, v := range buf.h {
		w.Header()[k] = v
	}
	w.WriteHeader(buf.code)
	_, _ = w.Write(buf.body.Bytes())
}

// after copies what a request changed in etcd into the trajectory.
func (pt *procTrial) after(inst *procInstance) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if inst != nil {
		inst.lastCall = time.Now()
	}
	if pt.done {
		return
	}
	pt.advance()
	pt.syncClaims()
	pt.syncJournal()
}

// bufferedResponse holds a handler's answer until the drill decides
// whether it reaches the worker.
type bufferedResponse struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.h }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

// stopAt stops inst at win if the plan says so (mu held): SIGKILL, or
// SIGSTOP with a SIGCONT once another instance claimed the task (or after
// a bound) and wakeAfter more. Only the first instance is stopped.
func (pt *procTrial) stopAt(inst *procInstance, win pwindow, what string) {
	if inst == nil || inst.n != 1 || pt.stopFired || pt.plan.stopIn != win {
		return
	}
	pt.stopFired = true
	if pt.plan.kill {
		inst.killed = true
		err := signalGroup(inst.pid, syscall.SIGKILL)
		pt.add(Event{Kind: KindFault, Actor: inst.name, Effect: string(FaultWorkerKilled),
			Detail: fmt.Sprintf("SIGKILL pid %d (%s): %s", inst.pid, win, what)})
		if err != nil {
			pt.fail(fmt.Errorf("SIGKILL %s: %w", inst.name, err))
		}
		return
	}
	inst.woken = make(chan struct{})
	if err := signalGroup(inst.pid, syscall.SIGSTOP); err != nil {
		pt.fail(fmt.Errorf("SIGSTOP %s: %w", inst.name, err))
		close(inst.woken)
		return
	}
	state := waitProcState(pt.ctx, inst.pid, 'T', time.Second)
	pt.add(Event{Kind: KindFault, Actor: inst.name, Effect: string(FaultWorkerPaused),
		Detail: fmt.Sprintf("SIGSTOP pid %d (%s, state %c): %s", inst.pid, win, state, what)})
	pt.wakes.Add(1)
	go pt.wake(inst)
}

// wake sends a paused instance SIGCONT once another instance claimed the
// task (or 20 s passed), plus the plan's wakeAfter.
func (pt *procTrial) wake(inst *procInstance) {
	defer pt.wakes.Done()
	defer close(inst.woken)
	bound := time.NewTimer(20 * time.Second)
	defer bound.Stop()
	for {
		pt.mu.Lock()
		other := pt.owner != "" && pt.owner != inst.name && pt.epochs[pt.epoch] != inst.name
		ch := pt.claimedCh
		pt.mu.Unlock()
		if other {
			break
		}
		select {
		case <-ch:
			continue
		case <-bound.C:
		case <-pt.live.Done():
		}
		break
	}
	select {
	case <-time.After(pt.plan.wakeAfter):
	case <-pt.live.Done():
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	state := procState(inst.pid)
	if err := signalGroup(inst.pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		pt.fail(fmt.Errorf("SIGCONT %s: %w", inst.name, err))
	}
	pt.advance()
	pt.add(Event{Kind: KindNote, Actor: inst.name, Detail: fmt.Sprintf("SIGCONT pid %d (state %c): it goes on where it was; the task's owner is %s",
		inst.pid, state, orDash(pt.owner))})
}

// signalGroup signals the worker's process group (a worker run through a
// shell stops with its children).
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// startInstance starts the next instance of the worker (mu held).
func (pt *procTrial) startInstance(why string) error {
	pr := pt.pr
	n := len(pt.inst) + 1
	name := fmt.Sprintf("worker-%d", n)
	f := pr.certs.Clients[name]
	hop, err := embedtest.NewProxy(pr.hop.addr)
	if err != nil {
		return fmt.Errorf("drill: %s's hop to the gateway: %w", name, err)
	}
	cmd := exec.Command(pr.argv[0], pr.argv[1:]...)
	cmd.Env = append(os.Environ(),
		EnvGateway+"=https://"+hop.Addr()+"/t/"+pt.key, EnvCA+"="+pr.certs.CA, EnvCert+"="+f.Cert, EnvKey+"="+f.Key,
		EnvTenant+"="+pt.tenant, EnvTask+"="+pt.task, EnvPlan+"="+planJSON(pt.task), EnvInstance+"="+fmt.Sprint(n),
		EnvSessionTTL+"="+fmt.Sprint(procSessionTTL), EnvHeartbeatTimeout+"="+fmt.Sprint(procHeartbeat.Seconds()))
	out := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		hop.Close()
		return fmt.Errorf("%w: %s could not start: %v", ErrWorkerContract, name, err)
	}
	inst := &procInstance{n: n, name: name, cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), exited: make(chan struct{}), out: out, hop: hop}
	pt.inst = append(pt.inst, inst)
	pt.byName[name] = inst
	pt.add(Event{Kind: KindNote, Actor: name, Detail: fmt.Sprintf("started, pid %d: %s", inst.pid, why)})
	go func() {
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			code = workerExitUnknown
		}
		pt.mu.Lock()
		inst.code = code
		if !pt.done {
			pt.advance()
			pt.add(Event{Kind: KindNote, Actor: name, Detail: "exited: " + exitMeaning(code, cmd.ProcessState)})
		}
		close(inst.exited)
		pt.mu.Unlock()
	}()
	return nil
}

// exitMeaning is an exit as the contract reads it.
func exitMeaning(code int, st *os.ProcessState) string {
	switch code {
	case WorkerExitDone:
		return "0, done"
	case WorkerExitUsage:
		return "2, it could not use what it was given"
	case WorkerExitHeld:
		return "3, held for the commander"
	case WorkerExitFenced:
		return "4, another instance holds the task"
	}
	return fmt.Sprintf("%d, failed (%s)", code, st)
}

func planJSON(task string) string {
	b, _ := json.Marshal(workerPlan(task))
	return string(b)
}

// supervise starts the first instance, then replaces the newest one as
// Temporal retries an activity: when it made no call for procHeartbeat
// (its heartbeat timeout) or failed; the old instance is not stopped. It
// returns once every instance exited, or at procTrialBound, having
// killed the rest.
func (pt *procTrial) supervise() {
	pt.mu.Lock()
	err := pt.startInstance("the activity's first attempt")
	pt.mu.Unlock()
	if err != nil {
		pt.mu.Lock()
		pt.errs = append(pt.errs, err)
		pt.mu.Unlock()
		return
	}
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-pt.ctx.Done():
			pt.killAll()
			return
		case <-tk.C:
		}
		pt.mu.Lock()
		end, err := pt.superviseStep()
		if err != nil {
			pt.errs = append(pt.errs, err)
			pt.add(Event{Kind: KindNote, Actor: "drill", Detail: "error: " + err.Error()})
		}
		pt.mu.Unlock()
		if end || err != nil {
			pt.killAll()
			return
		}
	}
}

// superviseStep is one look at the instances (mu held): whether the trial
// ended, or the worker broke the contract.
func (pt *procTrial) superviseStep() (bool, error) {
	pt.advance()
	if start := pt.started.Load(); start != 0 && time.Since(time.Unix(0, start)) > procTrialBound {
		pt.add(Event{Kind: KindNote, Actor: "drill", Detail: fmt.Sprintf("the trial's bound (%v real) passed: the instances still running are killed", procTrialBound)})
		return true, nil
	}
	newest := pt.inst[len(pt.inst)-1]
	running := 0
	for _, in := range pt.inst {
		if !isClosed(in.exited) {
			running++
		}
	}
	replace := ""
	switch {
	case isClosed(newest.exited):
		switch code := newest.code; {
		case code == WorkerExitUsage:
			return true, fmt.Errorf("%w: %s exited 2 (it could not use what it was given): %s", ErrWorkerContract, newest.name, newest.out.String())
		case newest.calls == 0 && !newest.killed && code != WorkerExitDone:
			return true, fmt.Errorf("%w: %s exited %d before any call to the gateway: %s", ErrWorkerContract, newest.name, code, newest.out.String())
		case code == WorkerExitFenced && running == 0:
			// Fenced, and no other instance left to hold the task: its
			// lease ran out, the activity is not done. Retried.
			replace = fmt.Sprintf("%s stopped fenced (exit 4) and no other instance runs: the activity is retried", newest.name)
		case code == WorkerExitDone || code == WorkerExitHeld || code == WorkerExitFenced:
			if running == 0 {
				return true, nil
			}
		default:
			replace = fmt.Sprintf("%s failed (%s): the activity is retried", newest.name, exitMeaning(code, newest.cmd.ProcessState))
		}
	case newest.calls == 0 && time.Since(newest.started) > procFirstCall && newest.woken == nil:
		return true, fmt.Errorf("%w: %s made no call to the gateway within %v of its start: %s", ErrWorkerContract, newest.name, procFirstCall, newest.out.String())
	case newest.calls > 0 && time.Since(newest.lastCall) > procHeartbeat:
		replace = fmt.Sprintf("%s made no call for %v (its heartbeat timeout): the activity is retried; %s is not stopped",
			newest.name, procHeartbeat, newest.name)
	}
	if replace == "" {
		return false, nil
	}
	if len(pt.inst) >= procInstances {
		if running == 0 {
			return true, nil
		}
		return false, nil
	}
	return false, pt.startInstance(replace)
}

// killAll kills every instance still running and waits for them.
func (pt *procTrial) killAll() {
	pt.mu.Lock()
	insts := append([]*procInstance(nil), pt.inst...)
	pt.mu.Unlock()
	for _, in := range insts {
		if !isClosed(in.exited) {
			_ = signalGroup(in.pid, syscall.SIGKILL)
			_ = signalGroup(in.pid, syscall.SIGCONT)
		}
	}
	for _, in := range insts {
		<-in.exited
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return "(no output)"
	}
	return strings.ReplaceAll(s, "\n", " | ")
}
