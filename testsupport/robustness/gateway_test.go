package robustness_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/robustness"
)

// TestLinearizableThroughTheGateway runs in-process clients beside clients
// that reach etcd only through two gateway replicas (real servers on
// loopback mTLS, the Go client), while the worker↔gateway hops lose
// answers, stall past the TTL and are cut, a replica crashes and restarts
// (its workers fail over to the other), and a replica's own path to etcd
// loses answers; clients act on their grants past their local deadlines,
// so stale writes reach the gateway. One history, one porcupine check, one revision check
// (Workload.Verify) cover both kinds of client.
func TestLinearizableThroughTheGateway(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	res, err := robustness.Run(runCtx(t), cl, robustness.Scenario{
		Name:           "gateway",
		Logf:           t.Logf,
		Clients:        4,
		GatewayClients: 4,
		// Clients act past their local deadline, as a paused process does
		// when it wakes: the stale writes that follow a stall past the TTL
		// reach the authority, which alone must refuse them.
		IgnoreDeadline: true,
		Faults: []string{"lose-gateway-commit-answer", "drop-gateway-answers", "stall-gateway-hop-past-ttl", "kill-gateway-replica",
			"lose-gateway-commit-answer", "cut-gateway-hop", "drop-answers"},
	})
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
	if res.Verdict != porcupine.Ok || len(res.Violations) > 0 {
		t.Fatalf("verdict %s, violations %v", res.Verdict, res.Violations)
	}
	if res.Stats.Gateway.Acknowledged == 0 || res.Stats.Acknowledged == res.Stats.Gateway.Acknowledged {
		t.Fatalf("acknowledged commits: %d, %d of them through the gateway: the run did not test both paths",
			res.Stats.Acknowledged, res.Stats.Gateway.Acknowledged)
	}
	if res.Stats.FailedOver == 0 {
		t.Fatal("no call failed over to another replica while one was down")
	}
	// A lost answer's retry answered with its receipt is left to chance
	// here (the retry may find the grant gone: 0 of 8 in one CI run at load
	// 24); TestLostAnswersAndHoldsThroughTheGateway pins it on one hop.
	if res.Stats.Gateway.Unknown == 0 {
		t.Fatalf("through the gateway: no unknown outcome: the lost answers were not tested")
	}
	t.Logf("through the gateway: %d unknown outcomes, %d retries answered with their receipt", res.Stats.Gateway.Unknown, res.Stats.Gateway.Retried)
}

// TestLostAnswersAndHoldsThroughTheGateway pins, on one real hop, the two
// outcomes a worker behind the gateway must keep apart, and the checker's
// handling of each: a commit whose answer is lost after it applied is
// outcome_unknown (and its retry with the same operation id gets the
// original receipt back), a commit that never left (its hop cut) is a
// hold. Recorded as the client reported them, the history is
// linearizable; recorded otherwise — the lost answer as a hold or as a
// refusal, the hold as a commit, the retry with a receipt of another
// version — porcupine must find it illegal.
func TestLostAnswersAndHoldsThroughTheGateway(t *testing.T) {
	t.Parallel()
	ctx := lgtest.Ctx(t)
	cl := embedtest.NewCluster(t)
	g, err := robustness.NewGateways(ctx, cl, "/robustness/lost-and-held", "t", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	hop, err := g.Hop(0)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := g.Client(0, hop)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gc.Close)
	s, err := gc.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(lgtest.Ctx(t)) })
	me := robustness.OwnerID(s.Owner(), s.Lease())

	h := robustness.NewHistory()
	var gr coordinator.Grant
	commit := func(op string, expected int64) robustness.Output {
		t.Helper()
		in := robustness.Input{Kind: robustness.Commit, Task: "k", Owner: me, Epoch: gr.Epoch, Operation: op, Value: op, Expected: expected}
		call := h.Now()
		r, err := gc.Commit(ctx, gr, intent("k", op, expected))
		out := robustness.OutputOf(coordinator.Committed, err)
		if err == nil {
			out.Disposition, out.Version, out.Epoch, out.Revision = r.Disposition, r.CommittedVersion, r.Epoch, r.Revision
		}
		h.Record(0, in, call, out)
		return out
	}
	read := func() {
		t.Helper()
		call := h.Now()
		st, err := gc.Get(ctx, "t", "k")
		if err != nil {
			t.Fatal(err)
		}
		h.Record(0, robustness.Input{Kind: robustness.Read, Task: "k"}, call, robustness.Output{Disposition: coordinator.OK, Version: st.Version, Value: string(st.Value)})
	}

	call := h.Now()
	gr, err = s.Claim(ctx, "t", "k")
	if err != nil {
		t.Fatal(err)
	}
	h.Record(0, robustness.Input{Kind: robustness.Claim, Task: "k", Owner: me}, call, robustness.Output{Disposition: coordinator.Granted, Epoch: gr.Epoch})
	read()

	lost, disarm := g.LoseNextCommitAnswer(0)
	defer disarm()
	if out := commit("op-1", 0); !out.Unknown {
		t.Fatalf("a commit whose answer was lost: %s, want outcome_unknown", out.Disposition)
	}
	lgtest.Wait(t, lost, "the gateway serving the commit whose answer it lost")
	hop.Cut()
	// The client's connection through the hop is gone; it must not pick it
	// up again before it has noticed (a request written to a connection the
	// peer has just closed is reported outcome_unknown: it may have left).
	gc.Close()
	if out := commit("op-2", 1); out.Disposition != coordinator.AuthorityUnavailable {
		t.Fatalf("a commit that could not leave: %s, want authority_unavailable", out.Disposition)
	}
	hop.Heal()
	if out := commit("op-1", 0); out.Disposition != coordinator.HistoricalRetry || out.Version != 1 {
		t.Fatalf("the lost commit retried: %s v%d, want historical_retry v1 (the original receipt)", out.Disposition, out.Version)
	}
	read()

	ops := h.Operations()
	check := func(name string, ops []porcupine.Operation, want porcupine.CheckResult) {
		t.Helper()
		if got, _ := porcupine.CheckOperationsVerbose(robustness.Model.ToModel(), ops, time.Minute); got != want {
			t.Errorf("%s: verdict %s, want %s", name, got, want)
		}
	}
	check("as the client reported", ops, porcupine.Ok)
	// with is the history with operation i's answer replaced (returning
	// when the next operation is called).
	with := func(i int, out robustness.Output) []porcupine.Operation {
		c := append([]porcupine.Operation(nil), ops...)
		c[i].Output, c[i].Return = out, c[i+1].Call
		return c
	}
	check("the lost answer recorded as a hold", with(2, robustness.Output{Disposition: coordinator.AuthorityUnavailable}), porcupine.Illegal)
	check("the lost answer recorded as a refusal", with(2, robustness.Output{Disposition: coordinator.VersionConflict}), porcupine.Illegal)
	check("the hold recorded as a commit", with(3, robustness.Output{Disposition: coordinator.Committed, Version: 2}), porcupine.Illegal)
	check("the retry answered with another receipt", with(4, robustness.Output{Disposition: coordinator.HistoricalRetry, Version: 2}), porcupine.Illegal)
}
