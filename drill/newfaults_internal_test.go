package drill

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/lgtest"
)

// TestFaultsAroundTheCall runs, in both designs, the first trial of seed 7
// whose plan draws each of the faults that stop a worker between its
// dispatch claim and the provider call, and the provider's lookup outage,
// and checks how each ends.
func TestFaultsAroundTheCall(t *testing.T) {
	cli := embedtest.NewCluster(t).Client(t)
	ctx := lgtest.Ctx(t)
	coord, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/faults"), coordinator.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: config{Seed: 7, Logger: zap.NewNop()}, coord: coord}
	first := func(match func(plan) bool) int {
		for i := range 2000 {
			if match(newPlan(trialRNG(7, i))) {
				return i
			}
		}
		t.Fatal("no trial draws the fault")
		return -1
	}
	run := func(d Design, trial int) *Trajectory {
		traj, errs := r.runTrial(ctx, d, trial)
		if len(errs) > 0 {
			t.Fatalf("%s trial %d: %v", d, trial, errs)
		}
		return traj
	}
	// A plain path to the provider: no out-of-band promotion (which would
	// supersede the dispatch before its claim) and no dropped response.
	plain := func(p plan) bool { return !p.topologyChanged && p.dropOn == "" }

	for _, fault := range []FaultKind{FaultKilledAfterClaim, FaultPausedAfterClaim} {
		trial := first(func(p plan) bool { return p.workerFault == fault && plain(p) })
		tr := run(Fenced, trial)
		text := tr.Render(true)
		if !fired(tr, fault) {
			t.Fatalf("%s: fenced trial %d: the fault did not fire:\n%s", fault, trial, text)
		}
		if v := Grade(tr); len(v) > 0 {
			t.Errorf("%s: fenced trial %d: %v\n%s", fault, trial, v, text)
		}
		// The provider never saw worker-a's promotion; the replacement
		// found it DISPATCHING, reconciled it (not applied) and dispatched
		// it again under the same id, which the provider then applied.
		var keys []string
		for _, e := range tr.Events {
			if isMutation(e) && e.By == "worker-a" {
				t.Errorf("%s: worker-a reached the provider: %+v", fault, e)
			}
			if e.Kind == KindCall && e.Effect == "PromoteTarget" {
				keys = append(keys, e.Operation)
			}
		}
		if len(keys) != 1 {
			t.Errorf("%s: promotion calls under %v, want one", fault, keys)
		}
		want := []string{"DISPATCHING->UNKNOWN", "UNKNOWN->AUTHORIZED", "AUTHORIZED->DISPATCHING", "DISPATCHING->CONFIRMED"}
		if got := path(tr, keys); !strings.Contains(got, strings.Join(want, " ")) {
			t.Errorf("%s: promotion went %s, want it to contain %v\n%s", fault, got, want, text)
		}
		refused := false
		for _, e := range tr.Events {
			refused = refused || (e.Kind == KindRefused && e.Actor == "worker-a" && e.Effect == "send")
		}
		if refused != (fault == FaultPausedAfterClaim) {
			t.Errorf("%s: worker-a refused as the call leaves: %v\n%s", fault, refused, text)
		}
		if fault == FaultPausedAfterClaim {
			// The naive design sends the woken worker's call anyway.
			n := run(Naive, trial)
			if !fired(n, fault) || !hasViolation(Grade(n), GraderStaleEpochDispatch) {
				t.Errorf("naive trial %d: fired %v, violations %v", trial, fired(n, fault), Grade(n))
			}
		}
	}

	trial := first(func(p plan) bool {
		return p.lookupOutage > 0 && p.workerFault == "" && p.dropOn == "promote" && !p.topologyChanged
	})
	tr := run(Fenced, trial)
	text := tr.Render(true)
	if !fired(tr, FaultLookupOutage) {
		t.Fatalf("fenced trial %d: the outage did not fire:\n%s", trial, text)
	}
	if v := Grade(tr); len(v) > 0 {
		t.Errorf("outage: fenced trial %d: %v\n%s", trial, v, text)
	}
	if got := path(tr, []string{fmt.Sprintf("promote/incident-%d", trial)}); !strings.Contains(got, "UNKNOWN->MANUAL_REVIEW MANUAL_REVIEW->CONFIRMED") {
		t.Errorf("outage: promotion went %s\n%s", got, text)
	}
	resolved := false
	for _, e := range tr.Events {
		if e.Kind == KindTransition && e.From == "MANUAL_REVIEW" {
			resolved = strings.HasPrefix(e.Detail, "resolve: resolved by "+commander+": CloudTrail shows PromoteTarget") && len(e.Evidence) > 0
		}
	}
	if !resolved || tr.FinalWriter != clusterSecondary || tr.FinalTraffic != clusterSecondary {
		t.Errorf("outage: resolved by the commander with evidence %v; writer %s, traffic %s\n%s", resolved, tr.FinalWriter, tr.FinalTraffic, text)
	}
	if n := run(Naive, trial); fired(n, FaultLookupOutage) {
		t.Error("outage: fired in the naive design, which never asks the provider by id")
	}
}

func fired(t *Trajectory, k FaultKind) bool {
	for _, e := range t.Events {
		if e.Kind == KindFault && e.Effect == string(k) {
			return true
		}
	}
	return false
}

func hasViolation(vs []Violation, g Grader) bool {
	for _, v := range vs {
		if v.Grader == g {
			return true
		}
	}
	return false
}

// path is the journal's transitions of the operations named, in order.
func path(t *Trajectory, ops []string) string {
	var out []string
	for _, e := range t.Events {
		for _, op := range ops {
			if e.Kind == KindTransition && e.Operation == op {
				out = append(out, orDash(e.From)+"->"+e.To)
			}
		}
	}
	return strings.Join(out, " ")
}

// TestCommanderEvidence: the commander confirms only when the audit trail
// and the topology agree.
func TestCommanderEvidence(t *testing.T) {
	ids := []string{"rds-req-1"}
	for _, c := range []struct {
		ids                       []string
		writer, promoting, target string
		want                      bool
	}{
		{ids, clusterSecondary, "", clusterSecondary, true},
		{ids, clusterPrimary, clusterSecondary, clusterSecondary, true},
		{nil, clusterSecondary, "", clusterSecondary, false},
		{ids, clusterPrimary, "", clusterSecondary, false},
		{ids, clusterPrimary, "other", clusterSecondary, false},
	} {
		if got := acceptedOn(c.ids, c.writer, c.promoting, c.target); got != c.want {
			t.Errorf("acceptedOn(%v, %s, %s, %s) = %v, want %v", c.ids, c.writer, c.promoting, c.target, got, c.want)
		}
	}
}
