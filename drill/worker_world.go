package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/ledger"
)

// A worker's trial runs on real time: the user's processes cannot be
// scheduled in virtual time. The world is the simulated drill's (the
// topology, DNS and audit providers of providers.go, their timings drawn
// from the trial's RNG), its clock running procScale times faster than
// the wall clock, every access to it under one lock (mu). Its timed events
// (a promotion completing, a change going INSYNC, an operator's edit) fire
// from a ticker as their world time comes. What the graders read is the
// world's record only: the providers' logs, the ledger's journal read back
// from etcd, and the task's owner key as etcd shows it (claims and their
// loss), never anything a worker reports.

// procTrial is one trial of a user's worker.
type procTrial struct {
	pr     *procRun
	ctx    context.Context // the run's: etcd reads, to the end of the trial's grading
	live   context.Context // ended as the trial ends: what waits on the trial's processes
	wakes  sync.WaitGroup  // paused instances' wake-ups
	trial  int
	task   string
	tenant string
	key    string // the trial's path on the run's listener: /t/<key>/
	plan   procPlan

	mu sync.Mutex // the world: everything below, and s, topo, dns, audit, traj
	// confirmedEdit is the operator's DNS change the commander confirmed
	// as a holding action ("" : none yet).
	confirmedEdit string
	s             *sim
	topo          *topology
	dns           *dns
	audit         *auditTrail
	traj          *Trajectory
	// started is when the world's clock started (UnixNano; 0: not yet):
	// at the first instance's first call to the gateway, so that how long
	// the machine takes to start a process is not the incident's time.
	started atomic.Int64
	done    bool // the trial ended: the world settles, nothing more is served

	journal    *ledger.Ledger
	journalRev int64
	effects    map[string]string
	ownerRev   int64            // the owner key's last revision applied (claims, losses)
	epoch      int64            // the newest claim's epoch
	owner      string           // its holder's name ("" once the owner key is gone)
	epochs     map[int64]string // epoch → the instance that claimed it
	claimedCh  chan struct{}    // closed and replaced at every claim
	inst       []*procInstance
	byName     map[string]*procInstance
	errs       []error
	cacheUsed  bool // the stale-cache fault fired
	hopDropped bool // the worker↔gateway answer was dropped
	stopFired  bool // the plan's stop fired
	edited     bool // the operator's edit happened

	handler  http.Handler   // the trial's gateway
	inflight sync.WaitGroup // requests being served
}

// worldNow is the world's time now: real time since the trial's start,
// procScale times faster.
func (pt *procTrial) worldNow() time.Duration {
	start := pt.started.Load()
	if start == 0 {
		return 0
	}
	return time.Duration(float64(time.Now().UnixNano()-start) * procScale)
}

// advance brings the world to now (mu held): its due events fire in
// order of time, then of scheduling.
func (pt *procTrial) advance() {
	now := pt.worldNow()
	if pt.done {
		return
	}
	pt.fireUntil(now)
	pt.s.now = max(pt.s.now, now)
}

// fireUntil fires every event due at or before t, in order (mu held).
func (pt *procTrial) fireUntil(t time.Duration) {
	s := pt.s
	for {
		var next *worldEvent
		for _, e := range s.events {
			if next == nil || e.at < next.at || (e.at == next.at && e.seq < next.seq) {
				next = e
			}
		}
		if next == nil || next.at > t {
			return
		}
		s.now = max(s.now, next.at)
		s.removeEvent(next)
		next.fn()
	}
}

// settle lets the world run to its end once the trial is over: every
// pending promotion and DNS change completes, as in the simulated drill,
// however late in the world's time the trial ended (mu held).
func (pt *procTrial) settle() {
	pt.done = true
	pt.fireUntil(max(trialLimit, pt.s.now+procSettle))
}

// sleep waits world time d in real time, the world unlocked.
func (pt *procTrial) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d / procScale)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add appends an event to the trajectory at the world's now (mu held).
func (pt *procTrial) add(e Event) {
	e.At = pt.s.now
	pt.traj.add(e)
}

// fail records the drill's own error (mu held): the run reports it.
func (pt *procTrial) fail(err error) {
	pt.errs = append(pt.errs, err)
	pt.add(Event{Kind: KindNote, Actor: "drill", Detail: "error: " + err.Error()})
}

// syncClaims reads the task's owner key (mu held): a claim of a newer
// epoch is a claim event, the key gone a loss. etcd is the authority on
// who holds the task; what a worker says about it is not read.
func (pt *procTrial) syncClaims() {
	ctx, cancel := context.WithTimeout(pt.ctx, 5*time.Second)
	defer cancel()
	resp, err := pt.pr.r.coord.Client().Get(ctx, pt.pr.r.coord.Keys().Owner(pt.tenant, pt.task))
	if err != nil {
		if pt.ctx.Err() == nil {
			pt.fail(fmt.Errorf("read the task's owner key: %w", err))
		}
		return
	}
	if len(resp.Kvs) == 0 {
		pt.ownerChanged(nil, resp.Header.Revision)
		return
	}
	pt.ownerChanged(resp.Kvs[0], resp.Kvs[0].ModRevision)
}

// ownerChanged applies the owner key as of rev (nil: absent), once (mu
// held).
func (pt *procTrial) ownerChanged(kv *mvccpb.KeyValue, rev int64) {
	if rev <= pt.ownerRev {
		return
	}
	pt.ownerRev = rev
	switch {
	case kv == nil && pt.owner != "":
		pt.add(Event{Kind: KindLost, Actor: pt.owner, Epoch: pt.epoch,
			Detail: "the task's owner key is gone in etcd: lease expired, revoked or released"})
		pt.owner = ""
	case kv != nil && kv.ModRevision > pt.epoch:
		name := pt.pr.nameOf(string(kv.Value))
		pt.epoch, pt.owner = kv.ModRevision, name
		pt.epochs[kv.ModRevision] = name
		pt.add(Event{Kind: KindClaim, Actor: name, Epoch: kv.ModRevision,
			Detail: fmt.Sprintf("etcd: the owner key names %s (lease %x)", string(kv.Value), kv.Lease)})
		close(pt.claimedCh)
		pt.claimedCh = make(chan struct{})
	}
}

// watchClaims follows the owner key in etcd until ctx ends, so that a
// claim and a loss between two calls are recorded too.
func (pt *procTrial) watchClaims(ctx context.Context) {
	wc := pt.pr.r.coord.Client().Watch(ctx, pt.pr.r.coord.Keys().Owner(pt.tenant, pt.task))
	for resp := range wc {
		pt.mu.Lock()
		pt.advance()
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				pt.ownerChanged(nil, ev.Kv.ModRevision)
			} else {
				pt.ownerChanged(ev.Kv, ev.Kv.ModRevision)
			}
		}
		pt.mu.Unlock()
	}
}

// syncJournal appends the ledger journal's new transitions of the task to
// the trajectory, read from etcd (mu held).
func (pt *procTrial) syncJournal() {
	ts, err := pt.journal.Journal(pt.ctx, pt.tenant, pt.task)
	if err != nil {
		if pt.ctx.Err() == nil {
			pt.fail(fmt.Errorf("journal: %w", err))
		}
		return
	}
	for _, t := range ts {
		if t.Revision <= pt.journalRev {
			continue
		}
		pt.journalRev = t.Revision
		eff, ok := pt.effects[t.Operation]
		if !ok {
			eff = "traffic"
			if rec, _, err := pt.journal.Record(pt.ctx, pt.tenant, pt.task, t.Operation); err == nil {
				eff = effectName(rec.Effect.Kind)
			}
			pt.effects[t.Operation] = eff
		}
		actor := pt.pr.nameOf(t.Owner)
		if t.Approver != "" && (t.To == ledger.Authorized || t.To == ledger.Rejected) {
			actor = pt.pr.nameOf(t.Approver)
		}
		e := Event{Kind: KindTransition, Actor: actor, Epoch: t.Epoch, Operation: t.Operation,
			Effect: eff, From: string(t.From), To: string(t.To), Detail: string(t.By) + ": " + t.Reason}
		if t.Evidence != nil {
			e.Evidence = t.Evidence.ProviderIDs
		}
		pt.add(e)
	}
}

// procPlan is a worker trial's faults, drawn from the trial's RNG before
// it runs.
type procPlan struct {
	dropProvider    string  // "promote", "traffic": the gateway↔provider answer is lost
	dropHop         bool    // the answer to the promotion's Dispatch is lost on the worker↔gateway hop
	stopIn          pwindow // where the first instance stops ("" none)
	kill            bool    // the stop is SIGKILL (else SIGSTOP, then SIGCONT)
	wakeAfter       time.Duration
	dnsLong         bool
	lookupOutage    time.Duration
	operatorEdit    bool
	operatorAt      time.Duration
	operatorValue   string
	topologyChanged bool
	staleCache      bool
	lagOver         time.Duration
	lagBack         time.Duration
	auditDelay      bool
	auditDuplicate  bool
}

// pwindow is where a worker instance stops, as the drill sees it from the
// gateway.
type pwindow string

// The windows of a worker's stop.
const (
	pwPromoteClaim   pwindow = "promote-claim"   // the gateway claimed its promotion's dispatch; the call not yet made
	pwPromoteApply   pwindow = "promote-apply"   // the provider acknowledged; the answer not yet at the worker
	pwBetweenEffects pwindow = "between-effects" // its promotion answered, its next request held until it wakes
	pwTrafficClaim   pwindow = "traffic-claim"
	pwTrafficApply   pwindow = "traffic-apply"
	pwReconcile      pwindow = "reconcile" // inside its Reconcile: the provider answered an observation
)

var pwindows = []pwindow{pwPromoteClaim, pwPromoteApply, pwBetweenEffects, pwTrafficClaim, pwTrafficApply, pwReconcile}

// The faults of a worker's trial that the simulated drill does not have.
const (
	// The gateway's answer to the worker's promotion Dispatch never
	// reaches it: the gateway ran the dispatch, the connection is cut.
	FaultAnswerDroppedAtWorker FaultKind = "answer_dropped_at_worker"
	// A worker instance is SIGKILLed or SIGSTOPped (then SIGCONT) at a
	// window the drill sees from the gateway.
	FaultWorkerKilled FaultKind = "worker_killed"
	FaultWorkerPaused FaultKind = "worker_paused"
)

// WorkerFaultKinds lists the faults of a worker's trial, in the report's
// order.
func WorkerFaultKinds() []FaultKind {
	return []FaultKind{FaultResponseDropped, FaultAnswerDroppedAtWorker, FaultWorkerKilled, FaultWorkerPaused,
		FaultStaleCache, FaultTopologyChanged, FaultDNSPendingLong, FaultAuditDuplicated, FaultAuditDelayed,
		FaultOperatorEdit, FaultLookupOutage, FaultLagExceeded}
}

// newProcPlan draws a worker trial's faults.
func newProcPlan(rng *rand.Rand) procPlan {
	var p procPlan
	if rng.Float64() < 0.35 {
		p.dropProvider = "promote"
		if rng.IntN(3) == 0 {
			p.dropProvider = "traffic"
		}
	}
	p.dropHop = rng.Float64() < 0.25
	if stop := rng.IntN(3); stop < 2 {
		p.kill = stop == 0
		p.stopIn = pwindows[rng.IntN(len(pwindows))]
		if p.stopIn == pwReconcile {
			p.dropProvider = "promote" // an unknown to reconcile
		}
	}
	p.wakeAfter = time.Duration(300+rng.IntN(1200)) * time.Millisecond
	p.dnsLong = rng.Float64() < 0.1
	if rng.Float64() < 0.15 {
		p.lookupOutage = time.Duration(60+rng.IntN(60)) * time.Second
	}
	p.operatorEdit = rng.Float64() < 0.2
	p.operatorAt = time.Duration(5+rng.IntN(40)) * time.Second
	p.operatorValue = maintenance
	if rng.IntN(3) == 0 {
		p.operatorValue = staticFallback
	}
	p.topologyChanged = rng.Float64() < 0.1
	p.staleCache = rng.Float64() < 0.3
	if rng.Float64() < 0.1 {
		p.lagOver = time.Duration(rng.IntN(20)) * time.Second
		p.lagBack = p.lagOver + time.Duration(30+rng.IntN(90))*time.Second
	}
	p.auditDelay = rng.Float64() < 0.15
	p.auditDuplicate = rng.Float64() < 0.2
	return p
}

// reqInfo is what the trial's hop knows of the request being served:
// which procedure, from which instance, and whether its handler reached a
// provider with a mutation.
type reqInfo struct {
	proc    string
	inst    *procInstance
	applied string // the kind Apply sent for, "" if none
}

type reqKey struct{}

func infoOf(ctx context.Context) *reqInfo {
	i, _ := ctx.Value(reqKey{}).(*reqInfo)
	if i == nil {
		return &reqInfo{}
	}
	return i
}

// procAdapter is the trial's gateway's adapter of kind: the world's
// simulated providers with the simulated drill's declared contracts (the
// database: none; DNS: lookup, retry-safe, conditional).
type procAdapter struct {
	pt   *procTrial
	kind string
}

var _ ledger.Adapter = procAdapter{}

func (a procAdapter) Kind() string { return a.kind }

func (a procAdapter) Contract() ledger.Contract {
	if a.kind == kindPromote {
		return topologyAdapter{}.Contract()
	}
	return dnsAdapter{}.Contract()
}

var gatewayCaller = caller{actor: "gateway"}

func (a procAdapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	pt := a.pt
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.advance()
	writer, promoting := pt.topo.Describe(gatewayCaller)
	info := infoOf(ctx)
	if pt.plan.staleCache && !pt.cacheUsed && info.proc == "ObservePrecondition" && info.inst != nil && info.inst.n > 1 {
		pt.cacheUsed = true
		writer, promoting = clusterPrimary, ""
		pt.add(Event{Kind: KindFault, Actor: "gateway", Effect: string(FaultStaleCache),
			Detail: info.inst.name + "'s topology read is served from a stale cache naming " + clusterPrimary + " the writer"})
	}
	d, _ := json.Marshal(map[string]string{"writer": writer, "promoting": promoting})
	if a.kind == kindPromote {
		return ledger.Observation{Digest: topologyDigest(writer, promoting), At: simTime(pt.s.now), Detail: d}, nil
	}
	record := pt.dns.Record(gatewayCaller)
	d, _ = json.Marshal(map[string]string{"writer": writer, "promoting": promoting, "record": record})
	return ledger.Observation{Digest: trafficDigest(writer, promoting, record), At: simTime(pt.s.now), Detail: d}, nil
}

// callerOf is who a dispatch under epoch is made for: the instance that
// claimed it, as etcd showed (mu held).
func (pt *procTrial) callerOf(epoch int64, key string) caller {
	name := pt.epochs[epoch]
	if name == "" {
		pt.syncClaims()
		name = pt.epochs[epoch]
	}
	if name == "" {
		name = fmt.Sprintf("epoch-%d", epoch)
	}
	return caller{actor: name, epoch: epoch, key: key}
}

// fenceRead records whether the grant of the call's epoch is the task's
// current one as the call leaves, as etcd shows it (mu held). The call
// leaves either way: this is what `leasegate serve` does; a stale call is
// the graders' to flag.
func (pt *procTrial) fenceRead(c caller) {
	pt.syncClaims()
	if pt.owner == c.actor && pt.epoch == c.epoch {
		pt.add(Event{Kind: KindFenceRead, Actor: c.actor, Epoch: c.epoch, Operation: c.key, Effect: "send",
			Detail: "etcd: the grant is current as the call leaves"})
	}
}

func (pt *procTrial) evidence(ids []string, what string) ledger.Evidence {
	d, _ := json.Marshal(map[string]string{"provider": what})
	return ledger.Evidence{ProviderIDs: ids, Detail: d, At: simTime(pt.s.now)}
}

func (a procAdapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	if a.kind == kindPromote {
		return a.applyPromote(ctx, call)
	}
	return a.applyTraffic(ctx, call)
}

func (a procAdapter) applyPromote(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	pt, info := a.pt, infoOf(ctx)
	pt.mu.Lock()
	pt.advance()
	pt.syncJournal()
	c := pt.callerOf(call.Epoch, call.Operation)
	pt.stopAt(info.inst, pwPromoteClaim, "the gateway claimed its promotion's dispatch; the call is not made yet")
	pt.fenceRead(c)
	id, err := pt.topo.Promote(c, targetOf(call.Effect))
	info.applied = kindPromote
	defer pt.mu.Unlock()
	switch {
	case errors.Is(err, errResponseLost):
		return ledger.Evidence{}, ledger.Ambiguous(err)
	case errors.Is(err, errProviderRefused):
		return ledger.Evidence{}, ledger.Refused(err.Error(), pt.evidence(nil, err.Error()))
	case err != nil:
		return ledger.Evidence{}, ledger.Ambiguous(err)
	}
	pt.stopAt(info.inst, pwPromoteApply, "the provider acknowledged the promotion; the answer has not reached the worker")
	if info.inst != nil {
		info.inst.promoted = true
	}
	return pt.evidence([]string{id}, "promotion accepted"), nil
}

func (a procAdapter) applyTraffic(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	pt, info := a.pt, infoOf(ctx)
	var p trafficParams
	if err := json.Unmarshal(call.Effect.Params, &p); err != nil || p.Value == "" {
		return ledger.Evidence{}, ledger.Refused(fmt.Sprintf("bad traffic parameters %s: want {\"record\",\"value\"}", call.Effect.Params),
			ledger.Evidence{})
	}
	pt.mu.Lock()
	pt.advance()
	pt.syncJournal()
	c := pt.callerOf(call.Epoch, call.Operation)
	pt.stopAt(info.inst, pwTrafficClaim, "the gateway claimed its traffic change's dispatch; the call is not made yet")
	pt.fenceRead(c)
	if pt.plan.dropProvider == "traffic" {
		pt.plan.dropProvider = ""
		pt.dns.dropNext = true
	}
	id, _, err := pt.dns.Change(c, p.Value, approvedRecord(call.Approved))
	info.applied = kindTraffic
	switch {
	case errors.Is(err, errProviderRefused):
		pt.mu.Unlock()
		return ledger.Evidence{}, ledger.Refused(err.Error(), pt.evidence(nil, err.Error()))
	case err != nil:
		pt.mu.Unlock()
		return ledger.Evidence{}, ledger.Ambiguous(err)
	}
	pt.stopAt(info.inst, pwTrafficApply, "the provider accepted the traffic change; the answer has not reached the worker")
	pt.mu.Unlock()
	for waited := time.Duration(0); ; waited += 2 * time.Second {
		pt.mu.Lock()
		pt.advance()
		st := pt.dns.GetChange(c, id)
		ev := pt.evidence([]string{id}, st)
		pt.mu.Unlock()
		if st == statusInsync {
			return ev, nil
		}
		if waited >= dnsApplyWait {
			return ev, ledger.Ambiguous(fmt.Errorf("change %s still PENDING after %v", id, dnsApplyWait))
		}
		if err := pt.sleep(ctx, 2*time.Second); err != nil {
			return ev, ledger.Ambiguous(err)
		}
	}
}

func (a procAdapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	pt, info := a.pt, infoOf(ctx)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.advance()
	pt.syncJournal()
	var (
		out ledger.Outcome
		ev  ledger.Evidence
		err error
	)
	if a.kind == kindPromote {
		out, ev, err = pt.observePromotion(rec.Operation, targetOf(rec.Effect))
	} else {
		ch, ok := pt.dns.lookup(rec.Operation)
		switch {
		case !ok:
			out, ev = ledger.NotApplied, pt.evidence(nil, "the provider has no change under this id")
		case pt.dns.GetChange(gatewayCaller, ch.id) != statusInsync:
			out, ev = ledger.Pending, pt.evidence([]string{ch.id}, "PENDING")
		default:
			out, ev = ledger.Applied, pt.evidence([]string{ch.id}, "INSYNC")
		}
	}
	pt.stopAt(info.inst, pwReconcile, "inside its Reconcile: the provider answered an observation, nothing recorded yet")
	return out, ev, err
}

// observePromotion is the topology adapter's reading (adapters.go's
// observePromotion, for this world): the audit trail joined with the
// topology (mu held).
func (pt *procTrial) observePromotion(operation, target string) (ledger.Outcome, ledger.Evidence, error) {
	ids, err := pt.topo.LookupEvents(gatewayCaller, "PromoteTarget", operation)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	writer, promoting := pt.topo.Describe(gatewayCaller)
	seen := fmt.Sprintf("audit: %d PromoteTarget event(s) under this id; topology: writer %s, promoting %s", len(ids), writer, orDash(promoting))
	switch {
	case len(ids) > 0 && writer == target:
		return ledger.Applied, pt.evidence(ids, seen), nil
	case len(ids) > 0 && promoting == target:
		return ledger.Pending, pt.evidence(ids, seen), nil
	case len(ids) == 0 && writer != target && promoting != target:
		return ledger.NotApplied, pt.evidence(nil, seen), nil
	}
	return ledger.Inconclusive, pt.evidence(nil, seen), nil
}
