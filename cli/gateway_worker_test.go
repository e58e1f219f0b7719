package cli_test

import (
	"testing"

	"github.com/leasegate/leasegate/coordinator"
)

// The worker's commands answer through the gateway in the shape they
// answer through --endpoints (-o json), each on a task of its own: claim,
// commit (and its retry), get, status, ops list, release, and a refusal.
func TestWorkerAnswersThroughTheGatewayMatchEndpoints(t *testing.T) {
	gw := newGatewayEnv(t)
	e := gw.env
	w1 := gw.certs.IDs["w1"]
	both := func(d coordinator.Disposition, code int, direct, via []string) {
		t.Helper()
		a, b := e.lg(t, direct...), gw.as(t, "w1", via...)
		want(t, a, code, d)
		wantViaGateway(t, b, code, d)
		sameShape(t, a, b)
	}
	a, b := e.lg(t, "claim", "--tenant", "acme", "--task", "a", "--owner", w1, "--ttl", "30s"),
		gw.as(t, "w1", "claim", "--tenant", "acme", "--task", "b", "--ttl", "30s")
	want(t, a, 0, coordinator.Granted)
	want(t, b, 0, coordinator.Granted)
	sameShape(t, a, b)
	sameJSON(t, a, b, "task", "lease", "epoch")
	ga, gb := e.file(t, a.stdout), e.file(t, b.stdout)
	commit := func(g string) []string {
		return []string{"commit", "--grant", g, "--operation", "op-1", "--value", "paid", "--expected-version", "0"}
	}
	both(coordinator.Committed, 0, commit(ga), commit(gb))
	both(coordinator.HistoricalRetry, 0, commit(ga), commit(gb))
	for _, args := range [][]string{{"get", "--tenant", "acme", "--task"}, {"status", "--tenant", "acme", "--task"}} {
		both(coordinator.OK, 0, append(args, "a"), append(args, "b"))
	}
	both(coordinator.OK, 0, []string{"ops", "list", "--tenant", "acme"}, []string{"ops", "list", "--tenant", "acme"})
	both(coordinator.Released, 0, []string{"release", "--grant", ga}, []string{"release", "--grant", gb})
	late := func(g string) []string {
		return []string{"commit", "--grant", g, "--operation", "op-2", "--value", "late", "--expected-version", "1"}
	}
	both(coordinator.ExpiredOwner, 1, late(ga), late(gb))
}
