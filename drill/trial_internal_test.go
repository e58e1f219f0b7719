package drill

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// newTrialRunner is a runner for single trials of seed 7 on a fresh etcd.
func newTrialRunner(t *testing.T) (*runner, func(Design, int) *Trajectory, func(func(plan) bool) int) {
	cli := embedtest.NewCluster(t).Client(t)
	ctx := lgtest.Ctx(t)
	coord, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/faults"), coordinator.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: config{Seed: 7, Logger: zap.NewNop()}, coord: coord}
	first := func(match func(plan) bool) int {
		for i := range 5000 {
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
	return r, run, first
}

// plain is a plan whose path to the provider is plain: no out-of-band
// promotion (which would supersede the dispatch before its claim), no
// dropped response, no operator edit, no lag over the bound.
func plain(p plan) bool {
	return !p.topologyChanged && p.dropOn == "" && !p.operatorEdit && p.lagOver == p.lagBack
}

// TestStopBetweenClaimAndCall runs, in both designs, the first trial of
// seed 7 whose plan stops worker A between its promotion's dispatch claim
// and the provider call (killed, then paused), and checks how each ends.
func TestStopBetweenClaimAndCall(t *testing.T) {
	_, run, first := newTrialRunner(t)
	for _, fault := range []FaultKind{FaultKilledAfterClaim, FaultPausedAfterClaim} {
		trial := first(func(p plan) bool {
			return p.stopIn == winPromoteClaim && stopFault(p.stopIn, p.kill) == fault && plain(p) && p.lookupOutage == 0
		})
		tr := run(Fenced, trial)
		text := tr.Render(true)
		if !fired(tr, fault) {
			t.Fatalf("%s: fenced trial %d: the fault did not fire:\n%s", fault, trial, text)
		}
		if v := Grade(tr); len(v) > 0 {
			t.Errorf("%s: fenced trial %d: %v\n%s", fault, trial, v, text)
		}
		// The provider never saw worker-a's promotion. Without a lookup by
		// id the replacement cannot retry it: it goes to MANUAL_REVIEW, the
		// commander fails it once the audit trail's delivery bound passed
		// with no trace of it, and a second intent is dispatched.
		var keys []string
		for _, e := range tr.Events {
			if isMutation(e) && e.By == "worker-a" {
				t.Errorf("%s: worker-a reached the provider: %+v", fault, e)
			}
			if e.Kind == KindCall && e.Effect == "PromoteTarget" {
				keys = append(keys, e.Operation)
			}
		}
		op := fmt.Sprintf("promote/incident-%d", trial)
		if len(keys) != 1 || keys[0] == op {
			t.Errorf("%s: promotion calls under %v, want one, of a second intent", fault, keys)
		}
		want := "DISPATCHING->UNKNOWN UNKNOWN->MANUAL_REVIEW MANUAL_REVIEW->FAILED"
		// An answer worker-a kept on the UNKNOWN record (ledger step answer)
		// changes no state.
		if got := strings.ReplaceAll(path(tr, []string{op}), "UNKNOWN->UNKNOWN ", ""); !strings.Contains(got, want) {
			t.Errorf("%s: promotion went %s, want it to contain %s\n%s", fault, got, want, text)
		}
		refused := false
		for _, e := range tr.Events {
			refused = refused || (e.Kind == KindRefused && e.Actor == "worker-a" && e.Effect == "send")
		}
		if refused != (fault == FaultPausedAfterClaim) {
			t.Errorf("%s: worker-a refused as the call leaves: %v\n%s", fault, refused, text)
		}
		if tr.FinalWriter != clusterSecondary || tr.FinalTraffic != clusterSecondary {
			t.Errorf("%s: ends writer %s traffic %s", fault, tr.FinalWriter, tr.FinalTraffic)
		}
		if fault == FaultPausedAfterClaim {
			// The naive design sends the woken worker's call anyway.
			n := run(Naive, trial)
			if !fired(n, fault) || !hasViolation(Grade(n), GraderStaleEpochDispatch) {
				t.Errorf("naive trial %d: fired %v, violations %v", trial, fired(n, fault), Grade(n))
			}
		}
	}
}

// TestStopInEveryWindow runs, fenced, the first trial of seed 7 that stops
// worker A in each of the other windows — inside the traffic dispatch,
// inside Reconcile, before the commander's Resolve is written, and between
// the gateway's last fence read and the call — and checks that it fired,
// that no grader flags the trial, and what the woken or replaced worker did.
func TestStopInEveryWindow(t *testing.T) {
	_, run, first := newTrialRunner(t)
	for _, c := range []struct {
		win   window
		kill  bool
		check func(t *testing.T, tr *Trajectory)
	}{
		{winTrafficClaim, true, func(t *testing.T, tr *Trajectory) {
			// B found A's traffic dispatch claimed, never sent: not applied
			// by the DNS provider's lookup, retried under the same id.
			if got := path(tr, []string{fmt.Sprintf("traffic/incident-%d/1", tr.Trial)}); !strings.Contains(got, "DISPATCHING->UNKNOWN UNKNOWN->AUTHORIZED") {
				t.Errorf("traffic went %s", got)
			}
		}},
		{winTrafficApply, false, func(t *testing.T, tr *Trajectory) {
			if !refusedStep(tr, "worker-a", "dispatch") {
				t.Error("the woken worker's record of its traffic change was not refused")
			}
		}},
		{winReconcile, false, func(t *testing.T, tr *Trajectory) {
			if !refusedStep(tr, "worker-a", "reconcile") && !refusedStep(tr, "worker-a", "read") {
				t.Error("the woken worker's reconcile step was not refused")
			}
		}},
		{winResolve, false, func(t *testing.T, tr *Trajectory) {
			// The commander's Resolve is the world's and goes on; the worker,
			// stopped beside it, wakes under a grant no longer current.
			refused := false
			for _, e := range tr.Events {
				refused = refused || e.Kind == KindRefused && e.Actor == "worker-a"
			}
			if !refused || !slices.ContainsFunc(tr.Events, func(e Event) bool { return isWorldDecision(e) && e.Effect == decisionResolve }) {
				t.Error("the commander did not resolve, or the woken worker's next step was not refused")
			}
		}},
		{winPromoteResidual, false, func(t *testing.T, tr *Trajectory) {
			if _, res := staleCalls(tr); len(res) == 0 {
				t.Error("no stale call went through the residual window")
			}
		}},
		{winTrafficResidual, false, func(t *testing.T, tr *Trajectory) {
			if _, res := staleCalls(tr); len(res) == 0 {
				t.Error("no stale call went through the residual window")
			}
		}},
	} {
		t.Run(string(c.win), func(t *testing.T) {
			trial := first(func(p plan) bool {
				return p.stopIn == c.win && p.kill == c.kill && !p.topologyChanged && !p.operatorEdit && p.lagOver == p.lagBack &&
					(c.win != winResolve || p.lookupOutage < 12*time.Minute) && (c.win == winReconcile || c.win == winResolve || p.dropOn == "")
			})
			tr := run(Fenced, trial)
			text := tr.Render(true)
			if !fired(tr, stopFault(c.win, c.kill)) {
				t.Fatalf("trial %d: the stop did not fire:\n%s", trial, text)
			}
			if v := Grade(tr); len(v) > 0 {
				t.Errorf("trial %d: %v\n%s", trial, v, text)
			}
			c.check(t, tr)
			if t.Failed() {
				t.Log(text)
			}
		})
	}
}

// TestOutageWithStopBeforeCall: the provider's evidence is out and worker
// A stopped between its claim and the call. Nothing can show what became
// of the promotion while the outage lasts: it goes to MANUAL_REVIEW and
// traffic is held there — no worker changes it while the promotion is in
// MANUAL_REVIEW — and the trial ends in that hold or, the evidence back,
// on the commander's decision.
func TestOutageWithStopBeforeCall(t *testing.T) {
	_, run, first := newTrialRunner(t)
	trial := first(func(p plan) bool {
		return p.lookupOutage > 0 && p.stopIn == winPromoteClaim && p.kill && plain(p)
	})
	tr := run(Fenced, trial)
	text := tr.Render(true)
	if !fired(tr, FaultLookupOutage) || !fired(tr, FaultKilledAfterClaim) {
		t.Fatalf("trial %d: the faults did not fire:\n%s", trial, text)
	}
	if v := Grade(tr); len(v) > 0 {
		t.Errorf("trial %d: %v\n%s", trial, v, text)
	}
	op := fmt.Sprintf("promote/incident-%d", trial)
	if got := path(tr, []string{op}); !strings.Contains(got, "UNKNOWN->MANUAL_REVIEW") {
		t.Errorf("promotion went %s\n%s", got, text)
	}
	inReview := false
	for _, e := range tr.Events {
		if e.Kind == KindTransition && e.Operation == op {
			inReview = e.To == "MANUAL_REVIEW"
		}
		if inReview && e.Kind == KindApplied && e.Effect == "record" && byWorker(e) {
			t.Errorf("traffic changed while %s was in MANUAL_REVIEW: %+v", op, e)
		}
	}
	if worldHold(tr).reason(tr) == "" && (tr.FinalWriter != clusterSecondary || tr.FinalTraffic != clusterSecondary) {
		t.Errorf("ends neither held nor recovered: writer %s traffic %s\n%s", tr.FinalWriter, tr.FinalTraffic, text)
	}
}

// TestCommanderRefusesOverTheLossBound: with the replication lag past the
// loss bound for longer than the commander waits, the promotion is
// REJECTED and traffic held; with it back in time, approved later. (The
// naive design's standby then runs the activity anyway: it never asks.)
func TestCommanderRefusesOverTheLossBound(t *testing.T) {
	_, run, first := newTrialRunner(t)
	for _, long := range []bool{true, false} {
		trial := first(func(p plan) bool {
			return plain(p) == false && p.lagOver != p.lagBack && p.stopIn == "" && !p.topologyChanged && p.dropOn == "" &&
				!p.operatorEdit && p.lagOver < 3*time.Second && (p.lagBack > commanderPatience+30*time.Second) == long && p.lagBack > 40*time.Second
		})
		tr := run(Fenced, trial)
		text := tr.Render(true)
		if !fired(tr, FaultLagExceeded) {
			t.Fatalf("trial %d: the lag never exceeded the bound:\n%s", trial, text)
		}
		if v := Grade(tr); len(v) > 0 {
			t.Errorf("trial %d: %v\n%s", trial, v, text)
		}
		if got := worldHold(tr).reason(tr); (got == ReasonLossBound) != long {
			t.Errorf("long lag %v: hold %q\n%s", long, got, text)
		}
	}
}

// TestOperatorEditRespected: an operator's edit of the record is never
// overwritten by the fenced design: to the maintenance page, the commander
// lets the workflow go on from it after confirming; to the static
// checkout, it stands and the trial ends held. The naive design
// overwrites the first.
func TestOperatorEditRespected(t *testing.T) {
	_, run, first := newTrialRunner(t)
	for _, value := range []string{maintenance, staticFallback} {
		trial := first(func(p plan) bool {
			return p.operatorEdit && p.operatorValue == value && p.operatorAt < 20*time.Second && p.stopIn == "" &&
				!p.topologyChanged && p.lagOver == p.lagBack && !p.dnsLong
		})
		tr := run(Fenced, trial)
		text := tr.Render(true)
		if !fired(tr, FaultOperatorEdit) {
			t.Fatalf("trial %d: no edit:\n%s", trial, text)
		}
		if v := Grade(tr); len(v) > 0 {
			t.Errorf("%s: trial %d: %v\n%s", value, trial, v, text)
		}
		held := worldHold(tr).reason(tr) == ReasonOperatorTookOver
		if held != (value == staticFallback) {
			t.Errorf("%s: ends held %v\n%s", value, held, text)
		}
		if n := run(Naive, trial); value == maintenance && !hasViolation(Grade(n), GraderOperatorEditOverwritten) {
			t.Errorf("%s: naive trial %d does not overwrite the edit:\n%s", value, trial, n.Render(true))
		}
	}
}

// TestNewBuildAdoptsByIntent: worker B runs build v2, which names the
// promotion and encodes its parameters differently; taking over from A it
// adopts A's record by its stored intent and mints no second one.
func TestNewBuildAdoptsByIntent(t *testing.T) {
	_, run, first := newTrialRunner(t)
	trial := first(func(p plan) bool {
		return p.newBuild && p.stopIn == winPromoteApply && !p.kill && plain(p) && p.lookupOutage == 0
	})
	tr := run(Fenced, trial)
	text := tr.Render(true)
	if v := Grade(tr); len(v) > 0 {
		t.Errorf("trial %d: %v\n%s", trial, v, text)
	}
	adopted := false
	for _, e := range tr.Events {
		if e.Kind == KindTransition && e.To == "PROPOSED" && e.Effect == "promote" && e.Actor == "worker-b" {
			t.Errorf("build v2 proposed a promotion of its own: %+v", e)
		}
		adopted = adopted || (e.Actor == "worker-b" && strings.Contains(e.Detail, "by its stored intent"))
	}
	if !adopted {
		t.Errorf("worker-b did not adopt the record:\n%s", text)
	}
	if targetOf(ledger.Effect{Params: (&worker{build: "v2"}).promotionParams()}) != clusterSecondary ||
		targetOf(ledger.Effect{Params: (&worker{build: "v1"}).promotionParams()}) != clusterSecondary {
		t.Error("targetOf does not read both builds' encodings")
	}
}

func refusedStep(tr *Trajectory, actor, op string) bool {
	for _, e := range tr.Events {
		if e.Kind == KindRefused && e.Actor == actor && e.Effect == op {
			return true
		}
	}
	return false
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
// and the topology agree, fails a promotion only once the audit trail's
// delivery bound has passed with no trace of it, and decides nothing
// otherwise.
func TestCommanderEvidence(t *testing.T) {
	ids := []string{"rds-req-1"}
	late, early := auditBound+time.Second, auditBound/2
	for _, c := range []struct {
		ids                       []string
		err                       error
		writer, promoting, target string
		age                       time.Duration
		want                      ledger.State
	}{
		{ids, nil, clusterSecondary, "", clusterSecondary, early, ledger.Confirmed},
		{ids, nil, clusterPrimary, clusterSecondary, clusterSecondary, early, ledger.Confirmed},
		{ids, errLookupTimeout, clusterSecondary, "", clusterSecondary, late, ""},
		{nil, nil, clusterSecondary, "", clusterSecondary, late, ""}, // the target is the writer, but not by this id
		{nil, nil, clusterPrimary, "", clusterSecondary, early, ""},  // the audit trail may not have delivered yet
		{nil, nil, clusterPrimary, "", clusterSecondary, late, ledger.Failed},
		{nil, nil, clusterPrimary, clusterSecondary, clusterSecondary, late, ""},
		{ids, nil, clusterPrimary, "", clusterSecondary, late, ""},
	} {
		if got, why := commanderVerdict(c.ids, c.err, c.writer, c.promoting, c.target, c.age); got != c.want {
			t.Errorf("commanderVerdict(%v, %v, %s, %s, %s, %v) = %q (%s), want %q", c.ids, c.err, c.writer, c.promoting, c.target, c.age, got, why, c.want)
		}
	}
}

// TestCommanderRule: the commander approves a promotion only with the
// replication lag within the loss bound and the target the replica the
// topology names.
func TestCommanderRule(t *testing.T) {
	settled := func() (string, string) { return clusterPrimary, "" }
	for _, c := range []struct {
		target string
		lag    time.Duration
		topo   func() (string, string)
		want   bool
		code   string // the reason's code: only an over-bound lag is the world's own hold
	}{
		{clusterSecondary, maxLoss, settled, true, ReasonRule},
		{clusterSecondary, maxLoss + time.Millisecond, settled, false, ReasonLossBound},
		{clusterSecondary, time.Second, func() (string, string) { return clusterSecondary, "" }, false, ReasonTarget},
		{clusterSecondary, time.Second, func() (string, string) { return clusterPrimary, clusterSecondary }, false, ReasonTarget},
		{"aurora-euw1", time.Second, settled, false, ReasonTarget},
	} {
		if got, code, why := commanderRule(c.target, c.lag, c.topo); got != c.want || code != c.code {
			t.Errorf("commanderRule(%s, %v) = %v %s (%s), want %v %s", c.target, c.lag, got, code, why, c.want, c.code)
		}
	}
}
