package drill

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// newHopRunner is newTrialRunner with the fenced workers reaching their
// trial's gateway over loopback TLS, as drill.Run does by default.
func newHopRunner(t *testing.T) (*runner, func(Design, int) *Trajectory, func(func(plan) bool) int) {
	r, run, first := newTrialRunner(t)
	h, err := startHop(zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.close(); err != nil {
			t.Error(err)
		}
	})
	r.hop = h
	return r, run, first
}

// wokeAt is when worker's stop beside the gateway ended (-1: it never
// woke).
func wokeAt(tr *Trajectory, worker string) time.Duration {
	for _, e := range tr.Events {
		if e.Kind == KindNote && e.Actor == worker && strings.HasPrefix(e.Detail, "wakes up") {
			return e.At
		}
	}
	return -1
}

// TestPausedAfterClaimThroughGateway: worker A pauses between its
// promotion's dispatch claim and the provider call, past its lease. Its
// call is at the gateway, which — not the worker — owns the dispatch: the
// gateway sends the promotion and records its answer (CONFIRMED under A's
// epoch) while A is paused; B takes over and adopts the confirmed
// operation; A, woken, finds its next action refused, and reaches no
// provider again. In-process (no gateway) the same trial shows what the
// gateway changes: A's pause paused the call too — nothing was sent, the
// promotion went to MANUAL_REVIEW, and a second intent was dispatched.
func TestPausedAfterClaimThroughGateway(t *testing.T) {
	_, run, first := newHopRunner(t)
	trial := first(func(p plan) bool {
		return p.stopIn == winPromoteClaim && !p.kill && plain(p) && p.lookupOutage == 0
	})
	tr := run(Fenced, trial)
	text := tr.Render(true)
	if !fired(tr, FaultPausedAfterClaim) {
		t.Fatalf("trial %d: the fault did not fire:\n%s", trial, text)
	}
	if v := Grade(tr); len(v) > 0 {
		t.Errorf("trial %d: %v\n%s", trial, v, text)
	}
	op := fmt.Sprintf("promote/incident-%d", trial)
	woke := wokeAt(tr, "worker-a")
	if woke < 0 {
		t.Fatalf("worker-a never woke:\n%s", text)
	}
	var called, confirmed, refused bool
	var keys []string
	for _, e := range tr.Events {
		switch {
		case e.Kind == KindCall && e.Effect == "PromoteTarget":
			keys = append(keys, e.Operation)
			called = called || (e.By == "worker-a" && e.Operation == op && e.At < woke)
		case e.Kind == KindTransition && e.Operation == op && e.From == "DISPATCHING" && e.To == "CONFIRMED":
			// recorded by the gateway under A's grant, while A was paused
			confirmed = e.Actor == "worker-a" && e.At < woke
		case e.Kind == KindRefused && e.Actor == "worker-a" && e.At >= woke:
			refused = true
		}
		if isMutation(e) && e.By == "worker-a" && e.At >= woke {
			t.Errorf("worker-a reached a provider after it woke: %+v", e)
		}
	}
	if !called || !confirmed {
		t.Errorf("the gateway did not complete A's claimed promotion while A was paused (called %v, confirmed %v)\n%s", called, confirmed, text)
	}
	if len(keys) != 1 || keys[0] != op {
		t.Errorf("promotion calls under %v, want one, %s", keys, op)
	}
	if !refused {
		t.Errorf("worker-a's next action after waking was not refused\n%s", text)
	}
	if tr.FinalWriter != clusterSecondary || tr.FinalTraffic != clusterSecondary {
		t.Errorf("ends writer %s traffic %s", tr.FinalWriter, tr.FinalTraffic)
	}

	// The same trial in-process (on an etcd of its own): the paused worker
	// paused its gateway.
	_, runIn, _ := newTrialRunner(t)
	in := runIn(Fenced, trial)
	if got := path(in, []string{op}); !strings.Contains(got, "UNKNOWN->MANUAL_REVIEW") {
		t.Errorf("in-process, the promotion went %s: want the never-sent call in MANUAL_REVIEW", got)
	}
}

// TestStopsBesideGateway: through the gateway, a stop of worker A in any
// window — killed or paused, inside a dispatch, inside Reconcile, before
// the commander's Resolve — stops A alone: the fault fires, no grader
// flags the trial, A reaches no provider after it stopped, a paused A's
// next action is refused, and no stale call goes through the residual
// window (the gateway sends as it reads the fence, whatever A does).
func TestStopsBesideGateway(t *testing.T) {
	_, run, first := newHopRunner(t)
	for _, c := range []struct {
		win  window
		kill bool
	}{
		{winPromoteClaim, true}, {winPromoteApply, true}, {winPromoteApply, false},
		{winTrafficClaim, true}, {winTrafficApply, false},
		{winReconcile, false}, {winResolve, false},
		{winPromoteResidual, false}, {winTrafficResidual, false},
	} {
		t.Run(fmt.Sprintf("%s/kill=%v", c.win, c.kill), func(t *testing.T) {
			trial := first(func(p plan) bool {
				return p.stopIn == c.win && p.kill == c.kill && !p.topologyChanged && !p.operatorEdit && p.lagOver == p.lagBack &&
					(c.win != winResolve || p.lookupOutage < 12*time.Minute) && (c.win == winReconcile || c.win == winResolve || p.dropOn == "")
			})
			tr := run(Fenced, trial)
			text := tr.Render(true)
			var stoppedAt time.Duration = -1
			for _, e := range tr.Events {
				if e.Kind == KindFault && e.Effect == string(stopFault(c.win, c.kill)) {
					stoppedAt = e.At
				}
			}
			if stoppedAt < 0 {
				t.Fatalf("trial %d: the stop did not fire:\n%s", trial, text)
			}
			if v := Grade(tr); len(v) > 0 {
				t.Errorf("trial %d: %v", trial, v)
			}
			woke := wokeAt(tr, "worker-a")
			if c.kill != (woke < 0) {
				t.Errorf("killed %v, woke at %v", c.kill, woke)
			}
			refused := false
			for _, e := range tr.Events {
				if isMutation(e) && e.By == "worker-a" && e.At > stoppedAt {
					t.Errorf("worker-a reached a provider after it stopped: %+v", e)
				}
				refused = refused || (e.Kind == KindRefused && e.Actor == "worker-a" && e.At >= woke)
			}
			if !c.kill && !refused {
				t.Error("the woken worker's next action was not refused")
			}
			if _, res := staleCalls(tr); len(res) > 0 {
				t.Errorf("%d stale calls through the residual window", len(res))
			}
			if t.Failed() {
				t.Log(text)
			}
		})
	}
}

// TestGradersCatchABypassThroughGateway: the graders still read a history
// made through the gateway. A broken design whose woken worker sends its
// DNS change to the provider itself — with provider credentials of its
// own, around the gateway — is caught by stale_epoch_dispatch, on the same
// trial that is clean when the worker holds none.
func TestGradersCatchABypassThroughGateway(t *testing.T) {
	_, run, first := newHopRunner(t)
	trial := first(func(p plan) bool {
		return p.stopIn == winPromoteApply && !p.kill && plain(p) && p.lookupOutage == 0
	})
	if v := Grade(run(Fenced, trial)); len(v) > 0 {
		t.Fatalf("trial %d without the bypass: %v", trial, v)
	}
	broken, runBroken, _ := newHopRunner(t) // on an etcd of its own: the trial's task starts empty
	broken.bypassOnWake = true
	tr := runBroken(Fenced, trial)
	if v := Grade(tr); !hasViolation(v, GraderStaleEpochDispatch) {
		t.Errorf("trial %d with the bypass: violations %v, want %s\n%s", trial, v, GraderStaleEpochDispatch, tr.Render(true))
	}
}
