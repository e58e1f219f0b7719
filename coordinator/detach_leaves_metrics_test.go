package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
)

// detachedGauge reads the leasegate_sessions gauge from reg.
func detachedGauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "leasegate_sessions" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no leasegate_sessions gauge")
	return 0
}

// Detach takes the session out of this process's metrics (leasegate_sessions
// and the renewal age), without revoking its lease: a gateway detaches each
// worker's session at once, and a detached session left counted would keep
// the gauge growing and its renewal age rising for a lease this process no
// longer watches.
func TestDetachLeavesMetrics(t *testing.T) {
	cl := embedtest.NewCluster(t)
	cli := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	c, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/detachmetrics"), coordinator.WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession(ctx, "worker", 10*time.Second, coordinator.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if n := detachedGauge(t, reg); n != 1 {
		t.Fatalf("leasegate_sessions = %v before Detach, want 1", n)
	}
	s.Detach()
	if n := detachedGauge(t, reg); n != 0 {
		t.Fatalf("leasegate_sessions = %v after Detach, want 0", n)
	}
	// The lease is etcd's still: Detach neither revoked it.
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(s.Lease()))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL <= 0 {
		t.Fatalf("lease %d has TTL %d after Detach, want it alive", s.Lease(), ttl.TTL)
	}
}
