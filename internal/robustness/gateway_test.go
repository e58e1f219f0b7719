package robustness_test

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/robustness"
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
	if res.Stats.Gateway.Unknown == 0 || res.Stats.Gateway.Retried == 0 {
		t.Fatalf("through the gateway: %d unknown outcomes, %d retries answered with their receipt: the lost answers were not tested",
			res.Stats.Gateway.Unknown, res.Stats.Gateway.Retried)
	}
}
