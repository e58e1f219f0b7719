package robustness_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/robustness"
)

// soakRun is how long one randomized run lasts before its history is
// checked: porcupine's search grows with the history.
const soakRun = 20 * time.Second

// The soak's clients: in-process ones, and ones through two gateway
// replicas (each behind its own hop), all in one history.
const (
	soakClients        = 6
	soakGatewayClients = 4
)

// TestSoak runs randomized fault scenarios for SOAK_TIME (make soak; skipped
// without it) and prints the counts: the cluster's and the clients' faults
// and the gateway's (its hops, a replica killed), with clients in-process
// and through the gateway. Every run must be linearizable with
// no violation. A last, short run with the unfenced commit shows the
// checker still bites.
func TestSoak(t *testing.T) {
	d := os.Getenv("SOAK_TIME")
	if d == "" {
		t.Skip("SOAK_TIME not set; run make soak")
	}
	total, err := time.ParseDuration(d)
	if err != nil || total <= 0 {
		t.Fatalf("SOAK_TIME=%q: want a positive duration such as 5m", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), total+10*time.Minute)
	defer cancel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	var sum robustness.Stats
	sum.Faults = map[string]int{}
	verdicts := map[porcupine.CheckResult]int{}
	violations := 0
	runs := 0
	for end := time.Now().Add(total); time.Now().Before(end); runs++ {
		res, err := robustness.Run(ctx, cl, robustness.Scenario{Name: "soak", Random: min(soakRun, time.Until(end)),
			Clients: soakClients, GatewayClients: soakGatewayClients, GatewayReplicas: 2,
			// Every other run, clients act past their local deadline: stale
			// writes reach the authority, which alone must refuse them.
			IgnoreDeadline: runs%2 == 1})
		if err != nil {
			t.Fatalf("run %d: %v", runs, err)
		}
		t.Logf("run %d (seed %d): %s; verdict %s; violations %v", runs, res.Seed, res.Stats, res.Verdict, res.Violations)
		sum.Add(res.Stats)
		verdicts[res.Verdict]++
		violations += len(res.Violations)
		if res.Verdict == porcupine.Illegal {
			violations++
			reportAs(t, res, fmt.Sprintf("%s-run-%d", t.Name(), runs))
		}
	}
	teeth, err := robustness.Run(ctx, cl, robustness.Scenario{Name: "soak-unfenced", Commit: robustness.UnfencedCommit,
		OpTimeout: 10 * time.Second, IgnoreDeadline: true, Faults: []string{"stall-client-past-ttl", "stall-client-past-ttl",
			"stall-client-past-ttl", "stall-client-past-ttl", "stall-client-past-ttl", "stall-client-past-ttl"}})
	if err != nil {
		t.Fatalf("unfenced run: %v", err)
	}
	t.Logf("SOAK: %v, runs=%d %s linearizability=%v violations=%d; unfenced control run: %s verdict %s",
		total, runs, sum, verdicts, violations, teeth.Stats, teeth.Verdict)
	if violations > 0 {
		t.Fatalf("%d violations", violations)
	}
}
