package drill_test

import (
	"strings"
	"testing"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestSelfTestDesignsFailTheDrill runs each of the graders' self-test
// designs — refuse everything, promote then hold traffic on the original,
// release after claim, do nothing — for a few trials and checks that the
// drill fails each, by liveness: only the world's own record can excuse a
// trial that did not recover.
func TestSelfTestDesignsFailTheDrill(t *testing.T) {
	const trials = 6
	cli := embedtest.NewCluster(t).Client(t)
	ctx := lgtest.Ctx(t)
	for _, d := range drill.SelfTestDesigns() {
		t.Run(string(d), func(t *testing.T) {
			rep, err := drill.Run(ctx, cli, drill.WithTrials(trials), drill.WithSeed(2), drill.WithPrefix("/selftest-"+string(d)),
				drill.WithDesigns(d))
			if err != nil {
				t.Fatal(err)
			}
			dr := rep.Designs[d]
			if rep.Pass || rep.Why == "" {
				t.Fatalf("the drill passes %s: %+v", d, dr.Violations)
			}
			live := dr.Violations[drill.GraderLiveness]
			switch d {
			case drill.DesignDoNothing, drill.DesignReleaseAfterClaim:
				if live != trials { // nothing the world does recovers for them: the world never promotes unasked
					t.Errorf("%s: liveness caught %d of %d trials", d, live, trials)
				}
			case drill.DesignHoldTraffic:
				if dr.Violations[drill.GraderFinalTrafficWriter] == 0 || live == 0 {
					t.Errorf("%s: %v", d, dr.Violations)
				}
			default:
				if live == 0 {
					t.Errorf("%s: liveness caught nothing: %v", d, dr.Violations)
				}
			}
		})
	}
}

// TestADesignHoldsAWorkerIdentityOnly replays a refuse-all trial: the
// design's own attempt to reject its promotion through the approver API is
// refused (its certificate is a worker's), and the only decision in the
// trajectory is the world's commander's.
func TestADesignHoldsAWorkerIdentityOnly(t *testing.T) {
	cli := embedtest.NewCluster(t).Client(t)
	rep, err := drill.Run(lgtest.Ctx(t), cli, drill.WithReplay(1), drill.WithSeed(2026), drill.WithPrefix("/identity"),
		drill.WithDesigns(drill.DesignRefuseAll))
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Replayed[0]
	refused, decided := false, 0
	for _, e := range tr.Events {
		if e.Kind == drill.KindNote && e.Actor == "worker-a" && strings.Contains(e.Detail, "permission_denied") {
			refused = true
		}
		if e.Kind == drill.KindDecision {
			decided++
			if e.Actor != "incident-commander" && e.Actor != "traffic-policy" {
				t.Errorf("a decision by %s: %+v", e.Actor, e)
			}
		}
	}
	if !refused || decided == 0 {
		t.Fatalf("the design's own rejection refused %v, world decisions %d\n%s", refused, decided, tr.Render(true))
	}
}
