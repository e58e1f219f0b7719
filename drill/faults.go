package drill

import (
	"math/rand/v2"
	"slices"
	"time"
)

// FaultKind names one fault of the drill's fault model (seed 003, "The
// tests that cared how it finished").
type FaultKind string

// The faults. A trial draws several from its seeded RNG; a fault counts in
// the report only once it fired (some need the trial to reach a point: a
// response can be dropped only if a call is made).
const (
	// The provider applies a call and its response is lost.
	FaultResponseDropped FaultKind = "response_dropped"
	// The worker stops after the provider applied its promotion, before it
	// persists the receipt; it never comes back.
	FaultKilledBeforeReceipt FaultKind = "killed_before_receipt"
	// The worker's heartbeats stop, its lease expires, a replacement takes
	// over, and the old worker wakes and continues where it was.
	FaultHeartbeatStop FaultKind = "heartbeat_stop"
	// The replacement's cached topology still names the old writer.
	FaultStaleCache FaultKind = "stale_topology_cache"
	// The topology changes between the commander's approval and dispatch
	// (an out-of-band promotion of the same target).
	FaultTopologyChanged FaultKind = "topology_changed"
	// A DNS change stays PENDING for minutes.
	FaultDNSPendingLong FaultKind = "dns_pending_long"
	// Audit events are delivered twice.
	FaultAuditDuplicated FaultKind = "audit_duplicated"
	// Audit events arrive minutes late.
	FaultAuditDelayed FaultKind = "audit_delayed"
	// The replacement runs a new worker build while the old execution is
	// still open.
	FaultNewBuild FaultKind = "new_build_deployed"
	// An operator edits the DNS record by hand mid-incident.
	FaultOperatorEdit FaultKind = "operator_dns_edit"
	// The worker stops after its dispatch of the promotion is claimed
	// (DISPATCHING recorded) and before the call leaves for the provider;
	// it never comes back.
	FaultKilledAfterClaim FaultKind = "killed_after_claim"
	// The worker pauses at the same point, past its lease; a replacement
	// takes over, and the old worker wakes and goes on to the call.
	FaultPausedAfterClaim FaultKind = "paused_after_claim"
	// The database provider's evidence (the audit trail's lookup, and a
	// lookup by id where a provider has one) times out for 10-15 minutes:
	// its authority on an operation's outcome is inconclusive meanwhile.
	FaultLookupOutage FaultKind = "provider_lookup_outage"
	// The worker stops (killed, or paused past its lease) inside the
	// traffic change's dispatch: after its claim, or after the provider
	// accepted the change.
	FaultTrafficStop FaultKind = "stopped_in_traffic_dispatch"
	// The worker stops inside its Reconcile: the provider answered an
	// observation and nothing is recorded yet.
	FaultReconcileStop FaultKind = "stopped_in_reconcile"
	// The worker pauses after the incident commander decided on a
	// MANUAL_REVIEW record and before the decision is written (Resolve).
	FaultResolvePause FaultKind = "paused_in_resolve"
	// The worker pauses between the gateway's last fence read and the
	// provider call, past its lease, then makes the call: the residual
	// window only a provider that checks the fence token closes.
	FaultResidualPause FaultKind = "paused_in_residual_window"
	// Replication lag to the target rises past the approved loss bound
	// for a while (30 s to 5 min): the commander must not approve meanwhile.
	FaultLagExceeded FaultKind = "replication_lag_exceeded"
	// The incident commander is away for 1-4 minutes before the first
	// decision (seed 003: approvals take a person).
	FaultCommanderAway FaultKind = "commander_away"
)

// FaultKinds lists every fault, in the report's order. It returns a new
// slice each time: the caller may keep or change it.
func FaultKinds() []FaultKind { return slices.Clone(faultKinds) }

var faultKinds = []FaultKind{
	FaultResponseDropped, FaultKilledBeforeReceipt, FaultHeartbeatStop, FaultStaleCache, FaultTopologyChanged,
	FaultDNSPendingLong, FaultAuditDuplicated, FaultAuditDelayed, FaultNewBuild, FaultOperatorEdit,
	FaultKilledAfterClaim, FaultPausedAfterClaim, FaultLookupOutage, FaultTrafficStop, FaultReconcileStop,
	FaultResolvePause, FaultResidualPause, FaultLagExceeded, FaultCommanderAway,
}

// window is where in a worker's run a stop (kill or pause) strikes.
type window string

// The windows a worker can stop in.
const (
	winPromoteClaim    window = "promote-claim"    // promotion's dispatch claimed, the call not sent
	winPromoteResidual window = "promote-residual" // after the gateway's last fence read, before the call
	winPromoteApply    window = "promote-apply"    // the provider accepted; nothing recorded
	winTrafficClaim    window = "traffic-claim"
	winTrafficResidual window = "traffic-residual"
	winTrafficApply    window = "traffic-apply"
	winReconcile       window = "reconcile" // an observation answered, nothing recorded
	winResolve         window = "resolve"   // the commander decided, Resolve not written
)

// stopFault is the fault a stop of kind kill (or pause) in win reports.
func stopFault(win window, kill bool) FaultKind {
	switch win {
	case winPromoteClaim:
		if kill {
			return FaultKilledAfterClaim
		}
		return FaultPausedAfterClaim
	case winPromoteApply:
		if kill {
			return FaultKilledBeforeReceipt
		}
		return FaultHeartbeatStop
	case winTrafficClaim, winTrafficApply:
		return FaultTrafficStop
	case winReconcile:
		return FaultReconcileStop
	case winResolve:
		return FaultResolvePause
	}
	return FaultResidualPause
}

// plan is a trial's faults, drawn before the trial runs from the trial's
// own RNG: both designs face the same plan for the same seed and trial.
type plan struct {
	dropOn string // "promote", "traffic" or "" (no drop)
	// stopIn is where the first worker stops ("" : it does not), and
	// kill whether it dies there (else it pauses past its lease and
	// wakes up later).
	stopIn window
	kill   bool
	// lagOver is when the replication lag rises past the loss bound, and
	// lagBack when it is back within it (both 0: it never does).
	lagOver, lagBack time.Duration
	staleCache       bool
	topologyChanged  bool
	dnsLong          bool
	auditDuplicate   bool
	auditDelay       bool
	newBuild         bool
	operatorEdit     bool
	// operatorValue is where the operator's edit points the record: the
	// maintenance page (a holding action), or the read-only static checkout
	// (a routing decision of the operator's own).
	operatorValue string
	operatorAt    time.Duration
	// lookupOutage is how long, from the trial's start, the topology
	// provider's request lookup times out (0: no outage).
	lookupOutage time.Duration
	// takeoverPause is how long a worker whose heartbeats stopped sleeps.
	takeoverPause time.Duration
	// standbyAt is when the second worker starts when nothing fails.
	standbyAt time.Duration
	// commanderAway is how long the commander is away before its first
	// decision (0: it is there).
	commanderAway time.Duration
}

// faultProbability is the chance of each independent fault.
const faultProbability = 0.4

// outageProbability is the chance of the provider's lookup outage.
const outageProbability = 0.25

func newPlan(rng *rand.Rand) plan {
	var p plan
	coin := func() bool { return rng.Float64() < faultProbability }
	if coin() {
		p.dropOn = "promote"
		if rng.IntN(3) == 0 {
			p.dropOn = "traffic"
		}
	}
	stop := rng.IntN(3) // 0 kill, 1 pause, 2 none
	p.staleCache = coin()
	p.topologyChanged = rng.Float64() < faultProbability/2
	p.dnsLong = coin()
	p.auditDuplicate = coin()
	p.auditDelay = coin()
	p.newBuild = coin()
	p.operatorEdit = coin()
	p.operatorAt = time.Duration(5+rng.IntN(60)) * time.Second
	p.takeoverPause = time.Duration(20+rng.IntN(40)) * time.Second
	p.standbyAt = time.Duration(3+rng.IntN(30)) * time.Second
	if rng.Float64() < outageProbability {
		p.lookupOutage = time.Duration(10+rng.IntN(6)) * time.Minute
	}
	if rng.Float64() < lagProbability {
		p.lagOver = time.Duration(rng.IntN(20)) * time.Second
		p.lagBack = p.lagOver + time.Duration(30+rng.IntN(270))*time.Second
	}
	if rng.Float64() < awayProbability {
		p.commanderAway = time.Duration(60+rng.IntN(180)) * time.Second
	}
	p.operatorValue = maintenance
	if rng.IntN(3) == 0 {
		p.operatorValue = staticFallback
	}
	seed := rng.Float64() < seedSequenceProbability
	if stop < 2 {
		p.kill = stop == 0
		p.stopIn = windows[rng.IntN(len(windows))]
		switch p.stopIn {
		case winPromoteResidual, winTrafficResidual, winResolve:
			p.kill = false // the point of these is what the woken worker does
		}
		// A stop in Reconcile needs an unknown to reconcile, and one in
		// Resolve a MANUAL_REVIEW to resolve: they bring what they need.
		switch p.stopIn {
		case winReconcile:
			p.dropOn = "promote"
		case winResolve:
			p.dropOn, p.lookupOutage = "promote", max(p.lookupOutage, 10*time.Minute)
		}
	}
	if seed {
		// Seed 003's central sequence: A's heartbeats stop as the provider's
		// acknowledgement of its promotion arrives, B takes over with a stale
		// cached topology, and A wakes 0.3-2 s after B's claim.
		p.stopIn, p.kill, p.staleCache = winPromoteApply, false, true
		if p.dropOn == "promote" {
			p.dropOn = "" // the acknowledgement reaches the gateway; A is the one who misses it
		}
		p.takeoverPause = time.Duration(300+rng.IntN(1700)) * time.Millisecond
	}
	return p
}

// seedSequenceProbability is the chance a trial's plan is seed 003's
// central sequence (on top of the stops drawn at random).
const seedSequenceProbability = 0.16

// windows are the stops' windows, as drawn.
var windows = []window{winPromoteClaim, winPromoteApply, winPromoteResidual, winTrafficClaim, winTrafficResidual,
	winTrafficApply, winReconcile, winResolve}

// awayProbability is the chance that the commander is away for a while.
const awayProbability = 0.15

// lagProbability is the chance that replication lag exceeds the loss
// bound for a while.
const lagProbability = 0.15
