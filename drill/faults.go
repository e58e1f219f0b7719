package drill

import (
	"math/rand/v2"
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
)

// FaultKinds lists every fault, in the report's order.
var FaultKinds = []FaultKind{
	FaultResponseDropped, FaultKilledBeforeReceipt, FaultHeartbeatStop, FaultStaleCache, FaultTopologyChanged,
	FaultDNSPendingLong, FaultAuditDuplicated, FaultAuditDelayed, FaultNewBuild, FaultOperatorEdit,
}

// plan is a trial's faults, drawn before the trial runs from the trial's
// own RNG: both designs face the same plan for the same seed and trial.
type plan struct {
	dropOn          string // "promote", "traffic" or "" (no drop)
	workerFault     FaultKind
	staleCache      bool
	topologyChanged bool
	dnsLong         bool
	auditDuplicate  bool
	auditDelay      bool
	newBuild        bool
	operatorEdit    bool
	operatorAt      time.Duration
	// takeoverPause is how long a worker whose heartbeats stopped sleeps.
	takeoverPause time.Duration
	// standbyAt is when the second worker starts when nothing fails.
	standbyAt time.Duration
}

// faultProbability is the chance of each independent fault.
const faultProbability = 0.4

func newPlan(rng *rand.Rand) plan {
	var p plan
	coin := func() bool { return rng.Float64() < faultProbability }
	if coin() {
		p.dropOn = "promote"
		if rng.IntN(3) == 0 {
			p.dropOn = "traffic"
		}
	}
	switch rng.IntN(3) {
	case 0:
		p.workerFault = FaultKilledBeforeReceipt
	case 1:
		p.workerFault = FaultHeartbeatStop
	}
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
	return p
}
