package drill

import (
	"testing"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestFixtureCheck: a fixture fails when the disposition differs from the
// expected one, and when a refusal changed the keyspace.
func TestFixtureCheck(t *testing.T) {
	cli := embedtest.NewCluster(t).Client(t)
	ctx := lgtest.Ctx(t)
	f := &fixtureRunner{ctx: ctx, client: cli, prefix: "/check", lg: zap.NewNop()}
	cases := []struct {
		name string
		act  func() (coordinator.Disposition, error)
		pass bool
	}{
		{"refused, nothing written", func() (coordinator.Disposition, error) { return coordinator.StaleOwner, nil }, true},
		{"another disposition", func() (coordinator.Disposition, error) { return coordinator.ExpiredOwner, nil }, false},
		{"refused but wrote", func() (coordinator.Disposition, error) {
			_, err := cli.Put(ctx, "/check/state/x", "written")
			return coordinator.StaleOwner, err
		}, false},
	}
	for _, c := range cases {
		if err := f.check(c.name, coordinator.StaleOwner, c.act); err != nil {
			t.Fatal(err)
		}
		if got := f.results[len(f.results)-1]; got.Pass != c.pass {
			t.Errorf("%s: pass %v, want %v (%+v)", c.name, got.Pass, c.pass, got)
		}
	}
}

// TestVerdict: pass needs every fixture, a clean fenced design and a naive
// design caught by at least two graders.
func TestVerdict(t *testing.T) {
	good := func() *Report {
		return &Report{
			Fixtures: []FixtureResult{{Name: "f", Expected: coordinator.StaleOwner, Observed: coordinator.StaleOwner, Pass: true}},
			Designs: map[Design]*DesignReport{
				Fenced: {Violations: map[Grader]int{GraderOnePromotionIntent: 0}},
				Naive:  {Violations: map[Grader]int{GraderOnePromotionIntent: 3, GraderStaleEpochDispatch: 1}, TotalViolations: 4},
			},
		}
	}
	if ok, why := verdict(good(), false); !ok {
		t.Fatalf("good report fails: %s", why)
	}
	bad := map[string]func(r *Report){
		"a fixture fails":         func(r *Report) { r.Fixtures[0].Pass = false },
		"fenced has a violation":  func(r *Report) { r.Designs[Fenced].TotalViolations = 1 },
		"naive caught by one":     func(r *Report) { r.Designs[Naive].Violations[GraderStaleEpochDispatch] = 0 },
		"naive caught by nothing": func(r *Report) { r.Designs[Naive].Violations = map[Grader]int{} },
	}
	for name, spoil := range bad {
		r := good()
		spoil(r)
		if ok, _ := verdict(r, false); ok {
			t.Errorf("%s: passes", name)
		}
	}
	r := good()
	r.Designs[Naive].Violations[GraderStaleEpochDispatch] = 0
	if ok, why := verdict(r, true); !ok {
		t.Errorf("a replay need not catch the naive design twice: %s", why)
	}
}

// TestDesignReportAdd: how one trajectory is counted.
func TestDesignReportAdd(t *testing.T) {
	tr := func(op, to string) Event {
		return Event{Kind: KindTransition, Operation: op, Effect: "traffic", To: to}
	}
	traj := &Trajectory{Original: "a", FinalWriter: "a", FinalTraffic: "a", Events: []Event{
		{Kind: KindFault, Effect: string(FaultResponseDropped)},
		{Kind: KindFault, Effect: string(FaultResponseDropped)},
		{Kind: KindRefused},
		tr("op1", "UNKNOWN"), tr("op1", "CONFIRMED"),
		tr("op2", "UNKNOWN"), tr("op2", "SUPERSEDED"),
		tr("op3", "UNKNOWN"), tr("op3", "MANUAL_REVIEW"),
		tr("op4", "DISPATCHING"), tr("op4", "CONFIRMED"),
		{Kind: KindHold, Effect: holdManualReview},                                                              // the design's word: it counts for nothing
		{Kind: KindDecision, Actor: commander, Operation: "op3", Effect: decisionHold, Value: ReasonNoEvidence}, // the world's: op3 stays there, a legitimate end
	}}
	dr := &DesignReport{Violations: map[Grader]int{}, Faults: map[FaultKind]int{}, FirstViolation: map[Grader]int{}}
	dr.add(traj)
	if dr.Trials != 1 || dr.UnknownOperations != 3 || dr.Reconciled != 2 || dr.ManualReview != 1 ||
		dr.Faults[FaultResponseDropped] != 1 || dr.RefusedAtGateway != 1 ||
		dr.TotalViolations != 2 || dr.Violations[GraderConfirmedWithoutEvidence] != 2 || // two CONFIRMED cite nothing
		dr.Cost.Holds != 1 || dr.Cost.HoldReasons[ReasonNoEvidence] != 1 || dr.Cost.Commander != 1 {
		t.Fatalf("counted %+v", dr)
	}
}
