package drill

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestATrafficChangeWhoseWriterMovedBeforeItsDispatchIsSupersededAtTheGateway:
// the fenced design's traffic change requires the topology to show the
// writer it points traffic at. On a plain trial, as the first traffic
// change (toward the promoted secondary, approved) is about to be
// dispatched, an operator fails the writer back to the original out of
// band and the worker dispatches once the writer moved. The gateway
// observes the topology again after its claim: the change ends
// SUPERSEDED, the journal naming the requirement, and nothing reaches the
// DNS provider under it — through the trial's gateway and in-process.
// The same trial with the requirement dropped from the proposal (the DNS
// provider's own precondition is the record alone) sends the stale change,
// and the graders flag it (prohibited_traffic_transition): the case the
// requirement closes.
func TestATrafficChangeWhoseWriterMovedBeforeItsDispatchIsSupersededAtTheGateway(t *testing.T) {
	for _, mode := range []string{"gateway", "in-process"} {
		for _, drop := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/requirement-dropped=%v", mode, drop), func(t *testing.T) {
				r, run, first := newTrialRunner(t)
				if mode == "gateway" {
					r, run, first = newHopRunner(t)
				}
				trial := first(func(p plan) bool {
					return p.stopIn == "" && plain(p) && !p.staleCache && !p.newBuild && p.lookupOutage == 0
				})
				r.dropTrafficRequirement = drop
				moved := false
				r.atTrafficDispatch = func(wk *worker) {
					if moved {
						return
					}
					moved = true
					w := wk.w
					w.traj.add(Event{At: w.s.now, Kind: KindNote, Actor: "operator",
						Detail: "fails the writer back to " + clusterPrimary + " out of band, after the traffic change's approval"})
					w.topo.operatorPromote(clusterPrimary)
					for w.topo.writer != clusterPrimary {
						wk.a.sleep(time.Second)
					}
				}
				tr := run(Fenced, trial)
				text := tr.Render(true)
				if !moved {
					t.Fatalf("trial %d: no traffic change reached its dispatch\n%s", trial, text)
				}
				op := fmt.Sprintf("traffic/incident-%d/1", trial)
				var sent []Event
				reason := ""
				for _, e := range tr.Events {
					if e.Kind == KindCall && e.Effect == "ChangeResourceRecordSets" && e.Operation == op {
						sent = append(sent, e)
					}
					if e.Kind == KindTransition && e.Operation == op && e.To == "SUPERSEDED" {
						reason = e.Detail
					}
				}
				got := path(tr, []string{op})
				prohibited := hasViolation(Grade(tr), GraderProhibitedTraffic)
				if drop {
					if len(sent) == 0 || !prohibited || strings.Contains(got, "SUPERSEDED") {
						t.Errorf("trial %d without the requirement: %s went %s, %d call(s) sent, prohibited_traffic_transition %v; want it sent and flagged (the test's scenario must bite)\n%s",
							trial, op, got, len(sent), prohibited, text)
					}
					return
				}
				if !strings.HasSuffix(got, "DISPATCHING->SUPERSEDED") || !strings.Contains(reason, "requirement 0 changed") {
					t.Errorf("trial %d: %s went %s (%q), want it SUPERSEDED at dispatch on its requirement\n%s", trial, op, got, reason, text)
				}
				if len(sent) > 0 || prohibited {
					t.Errorf("trial %d: %d call(s) under %s reached the DNS provider (%v), prohibited_traffic_transition %v; want none\n%s",
						trial, len(sent), op, sent, prohibited, text)
				}
			})
		}
	}
}
