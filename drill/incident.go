package drill

import "strings"

// How often the trials play seed 003's incident, counted from the world's
// record (the providers' histories, the claims, the gateway's refusals),
// never from a design's report.

// seedSequence reports whether a trial played the seed's central
// sequence: the provider acknowledged worker A's promotion, the answer
// never reached A (the network dropped it, or A's heartbeats stopped as it
// arrived), A's lease expired while A was paused (not dead), a replacement
// claimed the task, and A woke and tried its next effect — a provider call,
// or a request the gateway refused.
func seedSequence(t *Trajectory) bool {
	stage := 0
	for _, e := range t.Events {
		switch stage {
		case 0:
			if e.Kind == KindApplied && e.Effect == "promotion-accepted" && e.By == "worker-a" {
				stage = 1
			}
		case 1:
			if e.Kind == KindFault && (e.Effect == string(FaultResponseDropped) || e.Effect == string(FaultHeartbeatStop)) {
				stage = 2
			}
		case 2:
			if e.Kind == KindLost && e.Actor == "worker-a" && strings.HasPrefix(e.Detail, "lease expired") {
				stage = 3
			}
		case 3:
			if e.Kind == KindClaim && e.Actor == "worker-b" {
				stage = 4
			}
		case 4:
			if (e.Kind == KindRefused && e.Actor == "worker-a") || (isMutation(e) && e.By == "worker-a") {
				return true
			}
		}
	}
	return false
}

// naiveOrder reports whether a trial played the seed's traffic order:
// after the replacement's claim, the stale worker A points traffic at the
// promoted secondary, and then the replacement B points it back at the
// original.
func naiveOrder(t *Trajectory) bool {
	claimed, aMoved := false, false
	for _, e := range t.Events {
		switch {
		case e.Kind == KindClaim && e.Actor == "worker-b":
			claimed = true
		case claimed && e.Kind == KindApplied && e.Effect == "record" && e.By == "worker-a" && e.Value == clusterSecondary:
			aMoved = true
		case aMoved && e.Kind == KindApplied && e.Effect == "record" && e.By == "worker-b" && e.Value == clusterPrimary:
			return true
		}
	}
	return false
}
