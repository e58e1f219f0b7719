package drill

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leasegate/leasegate/ledger"
)

// TestWorkerCommanderHoldsAfterLooksWithoutEvidence: the world's commander
// of a worker's trial, looking at a promotion in MANUAL_REVIEW whose audit
// trail never answers, looks again commanderLooks-1 times, and at the last
// look stops looking and records the world's hold (KindDecision hold,
// ReasonNoEvidence) — the built-in world's rule. A trial that ends with
// the operation in MANUAL_REVIEW then passes liveness on that decision,
// and fails it without.
func TestWorkerCommanderHoldsAfterLooksWithoutEvidence(t *testing.T) {
	traj := &Trajectory{Trial: 0, Design: Worker, Original: clusterPrimary}
	s := newSim(rand.New(rand.NewPCG(1, 2)), traj)
	audit := &auditTrail{s: s}
	pt := &procTrial{s: s, topo: newTopology(s, audit), dns: newDNS(s, audit), audit: audit, traj: traj}
	pt.topo.lookupDownUntil = trialLimit // the audit trail's lookup never answers
	params, _ := json.Marshal(promoteParams{Target: clusterSecondary, MaxLoss: maxLoss.String()})
	rec := ledger.Record{Operation: "promote/incident-0", Effect: ledger.Effect{Kind: kindPromote, Target: clusterSecondary, Params: params},
		State: ledger.ManualReview}
	traj.add(Event{Kind: KindTransition, Actor: "worker-1", Epoch: 7, Operation: rec.Operation, Effect: "promote", From: "UNKNOWN", To: "MANUAL_REVIEW"})

	decisions := func() []Event {
		var out []Event
		for _, e := range traj.Events {
			if e.Kind == KindDecision {
				out = append(out, e)
			}
		}
		return out
	}
	for look := 1; look <= commanderLooks; look++ {
		s.now += commanderLook
		agains, holds := 0, 0
		act := pt.resolve(context.Background(), nil, rec, look, func(time.Duration) { agains++ }, func() { holds++ })
		if act != nil {
			t.Fatalf("look %d: the commander calls the gateway (a Resolve) with no evidence either way", look)
		}
		if look < commanderLooks {
			if agains != 1 || holds != 0 || len(decisions()) != 0 {
				t.Fatalf("look %d of %d: looks again %d, holds %d, decisions %+v: want one more look, no decision", look, commanderLooks, agains, holds, decisions())
			}
			continue
		}
		ds := decisions()
		if agains != 0 || holds != 1 || len(ds) != 1 {
			t.Fatalf("look %d (the last): looks again %d, holds %d, decisions %+v: want it to stop looking and decide once", look, agains, holds, ds)
		}
		if d := ds[0]; d.Actor != commander || d.Effect != decisionHold || d.Value != ReasonNoEvidence || d.To != string(ledger.ManualReview) ||
			d.Operation != rec.Operation {
			t.Fatalf("decision %+v: want the commander's hold, no_evidence, on %s, staying in MANUAL_REVIEW", d, rec.Operation)
		}
	}

	traj.FinalWriter, traj.FinalTraffic = clusterPrimary, clusterPrimary // never recovered
	if vs := liveness(traj); len(vs) != 0 {
		t.Fatalf("liveness with the commander's no_evidence hold: %v", vs)
	}
	var without Trajectory
	without = *traj
	without.Events = nil
	for _, e := range traj.Events {
		if e.Kind != KindDecision {
			without.Events = append(without.Events, e)
		}
	}
	if vs := liveness(&without); len(vs) == 0 {
		t.Fatal("liveness passes a trial left in MANUAL_REVIEW with no decision of the world: the test proves nothing")
	}
}
