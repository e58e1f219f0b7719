package drill_test

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/drill"
)

// clean is a hand-made trajectory of a sound recovery: one promotion
// intent, calls under the newest epoch, confirmations after the provider's
// evidence, the one UNKNOWN reconciled, traffic to the writer.
func clean() *drill.Trajectory {
	at := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	return &drill.Trajectory{Trial: 1, Design: drill.Fenced, Original: "aurora-use1",
		FinalWriter: "aurora-usw2", FinalTraffic: "aurora-usw2",
		Events: []drill.Event{
			{At: at(0), Kind: drill.KindClaim, Actor: "worker-a", Epoch: 10},
			{At: at(1), Kind: drill.KindTransition, Actor: "worker-a", Epoch: 10, Operation: "promote/x", Effect: "promote", To: "PROPOSED"},
			{At: at(2), Kind: drill.KindCall, Actor: "aurora", By: "worker-a", Epoch: 10, Operation: "promote/x", Effect: "PromoteTarget", Value: "aurora-usw2"},
			{At: at(2), Kind: drill.KindApplied, Actor: "aurora", By: "worker-a", Epoch: 10, Operation: "promote/x", Effect: "promotion-accepted", Evidence: []string{"rds-req-1"}},
			{At: at(2), Kind: drill.KindTransition, Actor: "worker-a", Epoch: 10, Operation: "promote/x", Effect: "promote", From: "DISPATCHING", To: "UNKNOWN"},
			{At: at(3), Kind: drill.KindClaim, Actor: "worker-b", Epoch: 12},
			{At: at(3), Kind: drill.KindTransition, Actor: "worker-b", Epoch: 12, Operation: "promote/x", Effect: "promote", From: "UNKNOWN", To: "CONFIRMED", Evidence: []string{"rds-req-1"}},
			{At: at(8), Kind: drill.KindApplied, Actor: "aurora", Operation: "promote/x", Effect: "writer", Value: "aurora-usw2"},
			{At: at(9), Kind: drill.KindCall, Actor: "route53", By: "worker-b", Epoch: 12, Operation: "traffic/x/1", Effect: "ChangeResourceRecordSets", Value: "aurora-usw2"},
			{At: at(9), Kind: drill.KindApplied, Actor: "route53", By: "worker-b", Epoch: 12, Operation: "traffic/x/1", Effect: "record", Value: "aurora-usw2", Evidence: []string{"C-1"}},
			// An operator's out-of-band promotion and edit are not the
			// workflow's intents or transitions.
			{At: at(9), Kind: drill.KindCall, Actor: "aurora", By: "operator", Operation: "operator", Effect: "PromoteTarget", Value: "aurora-usw2"},
			{At: at(10), Kind: drill.KindApplied, Actor: "route53", By: "operator", Effect: "record", Value: "maintenance-page", Evidence: []string{"C-2"}},
			{At: at(12), Kind: drill.KindApplied, Actor: "route53", Operation: "traffic/x/1", Effect: "insync", Evidence: []string{"C-1"}},
			{At: at(13), Kind: drill.KindTransition, Actor: "worker-b", Epoch: 12, Operation: "traffic/x/1", Effect: "traffic", From: "DISPATCHING", To: "CONFIRMED", Evidence: []string{"C-1"}},
		}}
}

func insert(t *drill.Trajectory, i int, e drill.Event) {
	t.Events = append(t.Events[:i], append([]drill.Event{e}, t.Events[i:]...)...)
}

func TestGraders(t *testing.T) {
	if v := drill.Grade(clean()); len(v) != 0 {
		t.Fatalf("clean trajectory: %v", v)
	}
	cases := []struct {
		grader drill.Grader
		inject func(t *drill.Trajectory)
		also   drill.Grader // a second grader that must catch it too ("": none)
	}{
		{drill.GraderOnePromotionIntent, func(t *drill.Trajectory) {
			insert(t, 6, drill.Event{Kind: drill.KindCall, Actor: "aurora", By: "worker-b", Epoch: 12, Operation: "attempt-b", Effect: "PromoteTarget"})
		}, ""},
		{drill.GraderStaleEpochDispatch, func(t *drill.Trajectory) {
			// worker-a wakes after worker-b's claim and changes traffic under epoch 10.
			insert(t, 9, drill.Event{Kind: drill.KindCall, Actor: "route53", By: "worker-a", Epoch: 10, Operation: "traffic/x/9", Effect: "ChangeResourceRecordSets", Value: "aurora-usw2"})
		}, ""},
		{drill.GraderConfirmedWithoutEvidence, func(t *drill.Trajectory) {
			// The traffic change confirmed while still PENDING: before the INSYNC.
			last := t.Events[len(t.Events)-1]
			t.Events = t.Events[:len(t.Events)-1]
			insert(t, 10, last)
		}, ""},
		{drill.GraderConfirmedWithoutEvidence, func(t *drill.Trajectory) {
			t.Events[6].Evidence = nil
		}, ""},
		{drill.GraderConfirmedWithoutEvidence, func(t *drill.Trajectory) {
			// Evidence of another operation's request.
			t.Events[6].Operation, t.Events[4].Operation = "promote/y", "promote/y"
			t.Events[1].Operation = "promote/y"
		}, ""},
		{drill.GraderUnresolvedUnknown, func(t *drill.Trajectory) {
			t.Events[6].To = "AUTHORIZED"
			t.Events[6].Evidence = nil
		}, ""},
		{drill.GraderUnresolvedUnknown, func(t *drill.Trajectory) {
			// The takeover never reconciled the dispatch: it stays DISPATCHING.
			t.Events[4].To, t.Events[4].From = "DISPATCHING", "AUTHORIZED"
			t.Events = append(t.Events[:6], t.Events[7:]...)
		}, ""},
		{drill.GraderFinalTrafficWriter, func(t *drill.Trajectory) { t.FinalTraffic = "aurora-use1" }, drill.GraderLiveness},
		{drill.GraderProhibitedTraffic, func(t *drill.Trajectory) {
			// A worker holds traffic on the old writer after the promotion
			// moved it (and later fixes it: the end is green).
			insert(t, 8, drill.Event{Kind: drill.KindApplied, Actor: "route53", By: "worker-b", Epoch: 12, Operation: "hold", Effect: "record", Value: "aurora-use1"})
		}, ""},
	}
	cases = append(cases, newGraderCases...)
	for _, c := range cases {
		t.Run(string(c.grader), func(t *testing.T) {
			traj := clean()
			c.inject(traj)
			got := map[drill.Grader]int{}
			for _, v := range drill.Grade(traj) {
				got[v.Grader]++
			}
			if got[c.grader] == 0 {
				t.Fatalf("%s did not catch it; violations %v", c.grader, got)
			}
			if c.also != "" && got[c.also] == 0 {
				t.Errorf("%s did not catch it too; violations %v", c.also, got)
			}
			for g, n := range got {
				if g != c.grader && g != c.also {
					t.Errorf("%s also flagged %d (only %s should)", g, n, c.grader)
				}
			}
		})
	}
}

// ev is a shorthand for the hand-made trajectories below.
func ev(s float64, k drill.Kind, actor, by, op, effect, value string) drill.Event {
	return drill.Event{At: time.Duration(s * float64(time.Second)), Kind: k, Actor: actor, By: by, Operation: op, Effect: effect, Value: value}
}

// newGraderCases are the violations of the graders that cannot be passed
// by doing nothing, each injected into the clean trajectory.
var newGraderCases = []struct {
	grader drill.Grader
	inject func(t *drill.Trajectory)
	also   drill.Grader
}{
	{drill.GraderLiveness, func(t *drill.Trajectory) {
		// A design that does nothing: it claims, and the world stays as it was.
		t.Events = t.Events[:1]
		t.FinalWriter, t.FinalTraffic = "aurora-use1", "aurora-use1"
	}, ""},
	{drill.GraderLiveness, func(t *drill.Trajectory) {
		// A hold the trajectory does not bear out: nothing is in MANUAL_REVIEW.
		t.Events = append(t.Events[:1], drill.Event{At: time.Second, Kind: drill.KindHold, Actor: "worker-a", Effect: "manual_review"})
		t.FinalWriter, t.FinalTraffic = "aurora-use1", "aurora-use1"
	}, ""},
	{drill.GraderLiveness, func(t *drill.Trajectory) {
		// Refuse everything: the design rejects its own promotion (a REJECTED
		// in its story, a hold event) — no decision of the world's.
		t.Events = append(t.Events[:2],
			drill.Event{At: time.Second, Kind: drill.KindTransition, Actor: "worker-a", Epoch: 10, Operation: "promote/x", Effect: "promote", From: "PROPOSED", To: "REJECTED"},
			drill.Event{At: time.Second, Kind: drill.KindHold, Actor: "worker-a", Effect: "commander_refused"})
		t.FinalWriter, t.FinalTraffic = "aurora-use1", "aurora-use1"
	}, ""},
	{drill.GraderLiveness, func(t *drill.Trajectory) {
		// A world refusal, but of a target the evidence does not name: the
		// design's doing, no hold of the world's.
		t.Events = append(t.Events[:2],
			drill.Event{At: time.Second, Kind: drill.KindDecision, Actor: "incident-commander", Operation: "promote/x", Effect: "reject", Value: drill.ReasonTarget, To: "REJECTED"})
		t.FinalWriter, t.FinalTraffic = "aurora-use1", "aurora-use1"
	}, ""},
	{drill.GraderLiveness, func(t *drill.Trajectory) {
		// A loss-bound refusal signed by a worker, not the commander.
		t.Events = append(t.Events[:2],
			drill.Event{At: time.Second, Kind: drill.KindDecision, Actor: "worker-a", Operation: "promote/x", Effect: "reject", Value: drill.ReasonLossBound, To: "REJECTED"})
		t.FinalWriter, t.FinalTraffic = "aurora-use1", "aurora-use1"
	}, ""},
	{drill.GraderLiveness, func(t *drill.Trajectory) {
		// Release after claim, and an operator's edit of the record: the
		// edit is not the trial having moved on.
		t.Events = append(t.Events[:1], ev(2, drill.KindLost, "worker-a", "", "", "", ""),
			ev(10, drill.KindApplied, "route53", "operator", "", "record", "maintenance-page"))
		t.FinalWriter, t.FinalTraffic = "aurora-use1", "maintenance-page"
	}, drill.GraderFinalTrafficWriter},
	{drill.GraderLiveness, func(t *drill.Trajectory) {
		// The operator took the record over, but the writer never moved:
		// the promotion was still the design's to do.
		t.Events = append(t.Events[:1], ev(10, drill.KindApplied, "route53", "operator", "", "record", "static-fallback"),
			drill.Event{At: 10 * time.Second, Kind: drill.KindDecision, Actor: "incident-commander", Effect: "hold", Value: drill.ReasonOperatorTookOver})
		t.FinalWriter, t.FinalTraffic = "aurora-use1", "static-fallback"
	}, ""},
	{drill.GraderFinalTrafficWriter, func(t *drill.Trajectory) {
		// Promote, then hold traffic on the original, the design saying the
		// commander refused it.
		t.Events = append(t.Events[:8], drill.Event{At: 9 * time.Second, Kind: drill.KindHold, Actor: "worker-b", Effect: "commander_refused"})
		t.FinalTraffic = "aurora-use1"
	}, drill.GraderLiveness},
	{drill.GraderOperatorEditOverwritten, func(t *drill.Trajectory) {
		// The commander approved another operation over the edit, not this one.
		t.Events = append(t.Events,
			drill.Event{At: 13 * time.Second, Kind: drill.KindDecision, Actor: "incident-commander", Operation: "traffic/x/3", Effect: "approve", Value: drill.ReasonHoldingAction},
			ev(14, drill.KindApplied, "route53", "worker-b", "traffic/x/2", "record", "aurora-usw2"))
	}, ""},
	{drill.GraderOperatorEditOverwritten, func(t *drill.Trajectory) {
		// A design's own resume event is no approval.
		t.Events = append(t.Events, drill.Event{At: 13 * time.Second, Kind: drill.KindResume, Actor: "commander"},
			ev(14, drill.KindApplied, "route53", "worker-b", "traffic/x/2", "record", "aurora-usw2"))
	}, ""},
	{drill.GraderProhibitedTraffic, func(t *drill.Trajectory) {
		// Traffic pointed at the target before the promotion moved the writer.
		insert(t, 7, ev(5, drill.KindApplied, "route53", "worker-a", "early", "record", "aurora-usw2"))
	}, ""},
	{drill.GraderOperatorEditOverwritten, func(t *drill.Trajectory) {
		// The operator's edit at 10 s, then a worker's change over it.
		t.Events = append(t.Events, ev(14, drill.KindApplied, "route53", "worker-b", "traffic/x/2", "record", "aurora-usw2"))
	}, ""},
	{drill.GraderStaleEpochDispatch, func(t *drill.Trajectory) {
		// A fence read while current, but of another operation: no excuse.
		read := ev(2.5, drill.KindFenceRead, "worker-a", "", "traffic/x/8", "send", "")
		read.Epoch = 10
		insert(t, 5, read)
		call := ev(9, drill.KindCall, "route53", "worker-a", "traffic/x/9", "ChangeResourceRecordSets", "aurora-usw2")
		call.Epoch = 10
		insert(t, 9, call)
	}, ""},
}

// TestGradersPassLegitimateEnds: a trial that ends in a hold the
// trajectory bears out, a new promotion intent after the first was shown
// never applied, and a stale call through the residual window (the
// gateway read the grant current as it left) are not violations.
func TestGradersPassLegitimateEnds(t *testing.T) {
	for name, f := range map[string]func(t *drill.Trajectory){
		"manual review hold": func(t *drill.Trajectory) {
			t.Events = append(t.Events[:2], drill.Event{At: 2 * time.Second, Kind: drill.KindTransition, Actor: "worker-a", Operation: "promote/x", Effect: "promote", From: "UNKNOWN", To: "MANUAL_REVIEW"},
				drill.Event{At: 900 * time.Second, Kind: drill.KindDecision, Actor: "incident-commander", Operation: "promote/x", Effect: "hold", Value: drill.ReasonNoEvidence, To: "MANUAL_REVIEW"})
			t.Events[1].To = "UNKNOWN"
			t.FinalWriter, t.FinalTraffic = "aurora-usw2", "aurora-use1"
		},
		"commander refused over the loss bound": func(t *drill.Trajectory) {
			t.Events = append(t.Events[:2],
				drill.Event{At: 200 * time.Second, Kind: drill.KindDecision, Actor: "incident-commander", Operation: "promote/x", Effect: "reject", Value: drill.ReasonLossBound, To: "REJECTED"},
				drill.Event{At: 200 * time.Second, Kind: drill.KindTransition, Actor: "worker-a", Operation: "promote/x", Effect: "promote", From: "PROPOSED", To: "REJECTED"})
			t.FinalWriter, t.FinalTraffic = "aurora-use1", "aurora-use1"
		},
		"operator took the record over": func(t *drill.Trajectory) {
			t.Events[11].Value = "static-fallback"
			t.Events = append(t.Events, drill.Event{At: 10 * time.Second, Kind: drill.KindDecision, Actor: "incident-commander", Effect: "hold", Value: drill.ReasonOperatorTookOver})
			t.FinalTraffic = "static-fallback"
		},
		"commander approves over a holding action": func(t *drill.Trajectory) {
			t.Events = append(t.Events,
				drill.Event{At: 70 * time.Second, Kind: drill.KindDecision, Actor: "incident-commander", Operation: "traffic/x/2", Effect: "approve", Value: drill.ReasonHoldingAction},
				ev(71, drill.KindApplied, "route53", "worker-b", "traffic/x/2", "record", "aurora-usw2"))
		},
		"new intent after FAILED": func(t *drill.Trajectory) {
			// The commander found promote/x never applied; a second intent follows.
			t.Events[6].To, t.Events[6].Evidence = "MANUAL_REVIEW", nil
			call := ev(7, drill.KindCall, "aurora", "worker-b", "promote/x/2", "PromoteTarget", "aurora-usw2")
			call.Epoch = 12
			insert(t, 7, call)
			insert(t, 7, drill.Event{At: 7 * time.Second, Kind: drill.KindTransition, Actor: "worker-b", Epoch: 12, Operation: "promote/x", Effect: "promote", From: "MANUAL_REVIEW", To: "FAILED"})
		},
		"residual window": func(t *drill.Trajectory) {
			read := ev(2.5, drill.KindFenceRead, "worker-a", "", "traffic/x/9", "send", "")
			read.Epoch = 10
			insert(t, 5, read)
			call := ev(9, drill.KindCall, "route53", "worker-a", "traffic/x/9", "ChangeResourceRecordSets", "aurora-usw2")
			call.Epoch = 10
			insert(t, 9, call)
		},
	} {
		traj := clean()
		f(traj)
		if v := drill.Grade(traj); len(v) != 0 {
			t.Errorf("%s: %v", name, v)
		}
	}
}
