package drill_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// runIncident runs the incident scenario in both designs (the fenced one
// through the gateway unless opts say otherwise).
func runIncident(t *testing.T, opts ...drill.Option) (naive, fenced *drill.Trajectory) {
	t.Helper()
	cli := embedtest.NewCluster(t).Client(t)
	rep, err := drill.Run(lgtest.Ctx(t), cli, append([]drill.Option{drill.WithScenario(drill.ScenarioIncident), drill.WithPrefix("/scenario")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass {
		t.Fatalf("scenario: %s", rep.Why)
	}
	for _, tr := range rep.Replayed {
		switch tr.Design {
		case drill.Naive:
			naive = tr
		case drill.Fenced:
			fenced = tr
		}
	}
	if naive == nil || fenced == nil {
		t.Fatalf("replayed %v", rep.Replayed)
	}
	return naive, fenced
}

// step is what the scenario test looks for: an event, and the seed's
// clock it must happen at ("" for any time).
type step struct {
	clock string
	match func(e drill.Event) bool
	what  string
}

// inOrder checks that the steps happen in the trajectory in this order,
// each at its clock.
func inOrder(t *testing.T, tr *drill.Trajectory, steps []step) {
	t.Helper()
	i := 0
	for _, e := range tr.Events {
		if i < len(steps) && steps[i].match(e) {
			if c := steps[i].clock; c != "" && clockOf(e) != c {
				t.Errorf("%s: %s at %s, the seed says %s", tr.Design, steps[i].what, clockOf(e), c)
			}
			i++
		}
	}
	if i < len(steps) {
		t.Errorf("%s: after %d steps in order, missing %q\n%s", tr.Design, i, steps[i].what, tr.Render(true))
	}
}

func clockOf(e drill.Event) string {
	s := int(e.At.Seconds())
	return fmt.Sprintf("02:%02d:%02d", 12+s/60, s%60)
}

func record(by, value, id string) func(drill.Event) bool {
	return func(e drill.Event) bool {
		return e.Kind == drill.KindApplied && e.Effect == "record" && e.By == by && e.Value == value &&
			(id == "" || strings.Join(e.Evidence, ",") == id)
	}
}

// TestIncidentScenario: the naive design reproduces the seed's timeline in
// its order and at its clock; the fenced design refuses A's late step,
// keeps the original operation instead of minting attempt-b, and never
// points traffic away from the writer. Through the gateway (the default)
// the gateway records AWS's acknowledgement as it comes — the receipt is
// the gateway's, not A's — and B adopts the CONFIRMED operation; with the
// ledger in A's process, A's pause loses the receipt and B reconciles it
// from the provider's evidence.
func TestIncidentScenario(t *testing.T) {
	naive, fenced := runIncident(t)
	promote := func(by, key string) func(drill.Event) bool {
		return func(e drill.Event) bool {
			return e.Kind == drill.KindCall && e.Effect == "PromoteTarget" && e.By == by && (key == "" || e.Operation == key)
		}
	}
	kind := func(k drill.Kind, actor, effect string) func(drill.Event) bool {
		return func(e drill.Event) bool {
			return e.Kind == k && e.Actor == actor && (effect == "" || e.Effect == effect)
		}
	}
	accepted := func(e drill.Event) bool { return e.Kind == drill.KindApplied && e.Effect == "promotion-accepted" }
	writer := func(e drill.Event) bool {
		return e.Kind == drill.KindApplied && e.Effect == "writer" && e.Value == "aurora-usw2"
	}
	inOrder(t, naive, []step{
		{"02:13:00", kind(drill.KindClaim, "worker-a", ""), "A claims"},
		{"02:13:27", promote("worker-a", "attempt-a"), "A's promotion, key attempt-a"},
		{"02:13:27", accepted, "AWS accepts it"},
		{"02:13:27", kind(drill.KindFault, "worker-a", "heartbeat_stop"), "A's connection fails before it persists the receipt"},
		{"02:13:33", kind(drill.KindLost, "worker-a", ""), "the heartbeat timeout"},
		{"02:13:40", kind(drill.KindClaim, "worker-b", ""), "B takes over"},
		{"", promote("worker-b", "attempt-b"), "B's attempt-b"},
		{"", kind(drill.KindFault, "worker-b", "stale_topology_cache"), "B's stale cached topology naming the original writer"},
		{"02:13:46", writer, "the topology names the secondary"},
		{"02:13:50", record("worker-a", "aurora-usw2", "A-184"), "A's late A-184 to the promoted secondary"},
		{"02:14:22", record("worker-b", "aurora-use1", "B-771"), "B's B-771 back to the original"},
		{"02:21:08", record("incident-commander", "aurora-usw2", "R-009"), "the commander's repair R-009"},
	})
	if n := moves(naive); n != 3 {
		t.Errorf("naive: traffic moved %d times, want 3", n)
	}

	for _, g := range []drill.Grader{drill.GraderOnePromotionIntent, drill.GraderStaleEpochDispatch, drill.GraderProhibitedTraffic} {
		if !caught(drill.Grade(naive), g) {
			t.Errorf("naive: %s did not catch the incident", g)
		}
	}
	checkFenced(t, fenced, true)
	_, inProcess := runIncident(t, drill.WithViaGateway(false))
	checkFenced(t, inProcess, false)
	side := drill.SideBySide(naive, fenced)
	for _, s := range []string{"02:13:27", "02:13:50", "02:14:22", "02:21:08", "A-184", "B-771", "R-009", "REFUSED at the gateway"} {
		if !strings.Contains(side, s) {
			t.Errorf("side by side lacks %q:\n%s", s, side)
		}
	}
}

// checkFenced checks the fenced design's run of the incident, through the
// gateway or in-process.
func checkFenced(t *testing.T, fenced *drill.Trajectory, viaGateway bool) {
	t.Helper()
	kind := func(k drill.Kind, actor, effect string) func(drill.Event) bool {
		return func(e drill.Event) bool {
			return e.Kind == k && e.Actor == actor && (effect == "" || e.Effect == effect)
		}
	}
	confirmedBy := func(actor string) func(drill.Event) bool {
		return func(e drill.Event) bool {
			return e.Kind == drill.KindTransition && e.Operation == "promote/incident-seed003" && e.To == "CONFIRMED" && e.Actor == actor
		}
	}
	steps := []step{
		{"02:13:00", kind(drill.KindClaim, "worker-a", ""), "A claims"},
		{"02:13:27", func(e drill.Event) bool {
			return e.Kind == drill.KindCall && e.Effect == "PromoteTarget" && e.By == "worker-a" && e.Operation == "promote/incident-seed003"
		}, "A's promotion under the stable id"},
		{"02:13:27", kind(drill.KindFault, "worker-a", "heartbeat_stop"), "A's connection fails"},
	}
	if viaGateway {
		steps = append(steps,
			step{"02:13:27", confirmedBy("worker-a"), "the gateway records AWS's answer under A's grant, A paused or not"},
			step{"02:13:40", kind(drill.KindClaim, "worker-b", ""), "B takes over"},
			step{"02:13:40", func(e drill.Event) bool {
				return e.Kind == drill.KindNote && e.Actor == "worker-b" && strings.Contains(e.Detail, "adopts promotion promote/incident-seed003 (CONFIRMED)")
			}, "B adopts the confirmed operation"},
			step{"02:13:50", kind(drill.KindRefused, "worker-a", ""), "A's late step refused at the gateway"})
		// B's first traffic intent, from its stale cache, is refused by the
		// world's traffic policy; its next points at the writer (before or
		// after A wakes: the fence, not the order, keeps A out).
		if !slices.ContainsFunc(fenced.Events, record("worker-b", "aurora-usw2", "")) {
			t.Errorf("fenced: B never points traffic at the writer\n%s", fenced.Render(true))
		}
		inOrder(t, fenced, steps)
		return
	} else {
		steps = append(steps,
			step{"02:13:40", kind(drill.KindClaim, "worker-b", ""), "B takes over"},
			step{"02:13:50", kind(drill.KindRefused, "worker-a", ""), "A's late step refused at the gateway"},
			step{"", confirmedBy("worker-b"), "B confirms the original operation from the provider's evidence"})
	}
	steps = append(steps, step{"", record("worker-b", "aurora-usw2", ""), "B points traffic at the writer"})
	inOrder(t, fenced, steps)
	for _, e := range fenced.Events {
		if e.Kind == drill.KindCall && e.Effect == "PromoteTarget" && e.Operation != "promote/incident-seed003" {
			t.Errorf("fenced: a second promotion intent %q", e.Operation)
		}
		if (e.Kind == drill.KindCall || e.Kind == drill.KindApplied) && e.By == "worker-a" && e.Effect != "PromoteTarget" &&
			e.Effect != "promotion-accepted" && e.Effect != "DescribeGlobalCluster" && e.Effect != "ListResourceRecordSets" {
			t.Errorf("fenced: A's late call reached a provider: %+v", e)
		}
	}
	if n := moves(fenced); n != 1 {
		t.Errorf("fenced: traffic moved %d times, want 1", n)
	}
	if v := drill.Grade(fenced); len(v) != 0 {
		t.Errorf("fenced: %v", v)
	}
}

func moves(t *drill.Trajectory) int {
	n := 0
	for _, e := range t.Events {
		if e.Kind == drill.KindApplied && e.Effect == "record" && e.From != e.To {
			n++
		}
	}
	return n
}

func caught(vs []drill.Violation, g drill.Grader) bool {
	for _, v := range vs {
		if v.Grader == g {
			return true
		}
	}
	return false
}
