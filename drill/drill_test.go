package drill_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
)

// drillCtx bounds a test's run of many trials: a few dozen trials of two
// designs, every call of them real etcd and loopback TLS, outlast
// lgtest.Timeout on a loaded machine (under -race, beside other packages).
func drillCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestShortDrill runs a few dozen trials of both designs on real etcd and
// checks the report's invariants.
func TestShortDrill(t *testing.T) {
	const trials = 80
	cli := embedtest.NewCluster(t).Client(t)
	ctx := drillCtx(t)
	var progress []drill.Progress
	rep, err := drill.Run(ctx, cli, drill.WithTrials(trials), drill.WithSeed(5), drill.WithPrefix("/short"),
		drill.WithProgress(func(p drill.Progress) { progress = append(progress, p) }))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass {
		t.Fatalf("drill failed: %s", rep.Why)
	}
	lines, last := 0, drill.Progress{}
	for _, p := range progress {
		if p.Line != "" {
			lines++
		}
		if p.Done < last.Done || p.Total != 2*trials {
			t.Fatalf("progress %+v after %+v", p, last)
		}
		last = p
	}
	if len(progress) != 2*trials+2 || lines != 2 || last.Done != 2*trials {
		t.Fatalf("%d progress calls, %d lines, last %+v: want one per trial and one per design", len(progress), lines, last)
	}
	if len(rep.Fixtures) != 11 {
		t.Fatalf("%d fixtures, want 11", len(rep.Fixtures))
	}
	for _, f := range rep.Fixtures {
		if !f.Pass || f.Expected != f.Observed {
			t.Errorf("fixture %q: expected %s observed %s (%s)", f.Name, f.Expected, f.Observed, f.Detail)
		}
	}
	fenced, naive := rep.Designs[drill.Fenced], rep.Designs[drill.Naive]
	for _, d := range []*drill.DesignReport{fenced, naive} {
		if d.Trials != trials {
			t.Errorf("trials %d, want %d", d.Trials, trials)
		}
		sum := 0
		for _, n := range d.Violations {
			sum += n
		}
		if sum != d.TotalViolations || len(d.Violations) != len(drill.Graders()) || len(d.Faults) != len(drill.FaultKinds()) {
			t.Errorf("inconsistent report %+v", d)
		}
		if d.Reconciled+d.ManualReview > d.UnknownOperations {
			t.Errorf("reconciled %d + manual review %d > unknown %d", d.Reconciled, d.ManualReview, d.UnknownOperations)
		}
	}
	if fenced.TotalViolations != 0 {
		t.Errorf("fenced violations: %v", fenced.Violations)
	}
	for _, k := range drill.FaultKinds() {
		if fenced.Faults[k] == 0 {
			t.Errorf("fault %s never fired in %d fenced trials", k, trials)
		}
	}
	if fenced.UnknownOperations == 0 || fenced.Reconciled+fenced.ManualReview != fenced.UnknownOperations {
		t.Errorf("fenced: %d unknown, %d reconciled, %d manual review: every unknown must be reconciled or left to an operator, and faults must make some",
			fenced.UnknownOperations, fenced.Reconciled, fenced.ManualReview)
	}
	// Seed 003's incident, often: its central sequence in at least 10% of
	// each design's trials, its traffic order in at least 5% of the naive
	// design's (counted from the world's record).
	for _, d := range []*drill.DesignReport{fenced, naive} {
		if 10*d.SeedSequence < trials {
			t.Errorf("the seed's central sequence in %d of %d trials, want at least 10%%", d.SeedSequence, trials)
		}
	}
	if 20*naive.NaiveOrder < trials || fenced.NaiveOrder != 0 {
		t.Errorf("the seed's traffic order in %d of %d naive trials (want at least 5%%), %d fenced (want 0)", naive.NaiveOrder, trials, fenced.NaiveOrder)
	}
	if p := rep.Paired; p == nil || p.WritesHeld.Trials != trials || p.Recovery.Trials == 0 || p.OrdersQueued.P95 < p.OrdersQueued.P50 {
		t.Errorf("paired cost %+v", p)
	}
	if fenced.ManualReview == 0 || fenced.Resolved == 0 {
		t.Errorf("fenced: %d manual reviews, %d resolved by the commander: the lookup outage and the stops before the call must make some, and the commander resolve some",
			fenced.ManualReview, fenced.Resolved)
	}
	if c := fenced.Cost; c.Recovery.Trials == 0 || c.Recovery.P50 <= 0 || c.Recovery.P50 > c.Recovery.P95 || c.Recovery.P95 > c.Recovery.Max ||
		c.WritesHeld.Trials == 0 || c.Commander == 0 || c.Holds == 0 || c.Recovery.Trials+c.Holds > trials {
		t.Errorf("fenced cost of safety: %+v", c)
	}
	if fenced.ResidualStaleCalls != 0 {
		// Through the gateway a worker's pause stops the worker alone: the
		// gateway sends as it reads the fence (the in-process residual
		// window is TestStopInEveryWindow's).
		t.Errorf("%d stale calls went through the residual window: a worker's pause paused its gateway", fenced.ResidualStaleCalls)
	}
	if fenced.RefusedAtGateway == 0 {
		t.Error("no stale worker was refused at the gateway: the takeover faults did not bite")
	}
	caught := 0
	for _, n := range naive.Violations {
		if n > 0 {
			caught++
		}
	}
	if caught < 2 {
		t.Errorf("naive caught by %d graders: %v", caught, naive.Violations)
	}
	if err := drill.Cleanup(ctx, cli, "/short"); err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Get(ctx, "/short", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("after cleanup: %v keys, %v", resp.Count, err)
	}
}

// TestReplaySameSeed: a trial replayed alone, twice, takes the same
// trajectory in both designs (epochs compared by order of appearance).
func TestReplaySameSeed(t *testing.T) {
	cli := embedtest.NewCluster(t).Client(t)
	ctx := drillCtx(t)
	render := func(prefix string, trial int) map[drill.Design]string {
		rep, err := drill.Run(ctx, cli, drill.WithSeed(11), drill.WithReplay(trial), drill.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		out := map[drill.Design]string{}
		for _, tr := range rep.Replayed {
			out[tr.Design] = tr.Render(true)
		}
		return out
	}
	for trial := range 3 {
		a, b := render("/replay-a", trial), render("/replay-b", trial)
		for _, d := range []drill.Design{drill.Fenced, drill.Naive} {
			if a[d] == "" || a[d] != b[d] {
				t.Fatalf("trial %d %s differs between runs:\n%s\n---\n%s", trial, d, a[d], b[d])
			}
			if strings.Count(a[d], "\n") < 10 {
				t.Fatalf("trial %d %s: a trajectory of a few lines:\n%s", trial, d, a[d])
			}
		}
	}
}

// TestBadOptions: bad options are invalid_input before any I/O.
func TestBadOptions(t *testing.T) {
	for _, o := range []drill.Option{drill.WithTrials(0), drill.WithParallel(0), drill.WithDesigns("fast"),
		drill.WithPrefix("no-slash"), drill.WithReplay(-1), drill.WithLogger(nil), drill.WithProgress(nil)} {
		_, err := drill.Run(context.Background(), nil, o)
		if coordinator.DispositionOf(err) != coordinator.InvalidInput {
			t.Errorf("got %v, want invalid_input", err)
		}
	}
}
