package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// The gateway renews a worker's lease with RenewLease and re-creates the
// worker's session with Attach on every call; these pin what it relies on.

// TestRenewLeaseCountsFromTheSend: with every byte delivered late, the
// answer arrives at least a round trip after the request left; the time
// RenewLease returns (the one a worker's deadline is counted from) is the
// send's, not the answer's.
func TestRenewLeaseCountsFromTheSend(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	c := lgtest.CoordinatorOf(t, cp.Client(t))
	s := lgtest.Session(t, c, "worker", 10*time.Second, coordinator.WithoutKeepAlive())
	const delay = 150 * time.Millisecond
	cp.Delay(delay) // both ways: a round trip takes at least 2*delay
	ttl, sent, err := store.Of(c).RenewLease(lgtest.Ctx(t), s.Lease())
	answered := time.Now()
	cp.Heal()
	if err != nil || ttl <= 0 {
		t.Fatalf("RenewLease: ttl %v, %v", ttl, err)
	}
	if latest := answered.Add(-2 * delay); sent.After(latest) {
		t.Fatalf("sent %v is %v after the latest the request can have left (%v): counted from the answer", sent, sent.Sub(latest), latest)
	}
}

// TestRenewLeaseWithItsAnswerLostIsOutcomeUnknown: a renewal that left and
// whose answer was lost may have renewed: outcome_unknown, not a hold.
func TestRenewLeaseWithItsAnswerLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	lost := &lostKeepAliveAnswer{}
	cli, err := cl.NewClient(grpc.WithChainStreamInterceptor(lost.intercept))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c := lgtest.CoordinatorOf(t, cli)
	s := lgtest.Session(t, c, "worker", 10*time.Second, coordinator.WithoutKeepAlive())
	lost.armed.Store(true)
	short, cancel := context.WithTimeout(lgtest.Ctx(t), 2*time.Second)
	defer cancel()
	_, _, err = store.Of(c).RenewLease(short, s.Lease())
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
}

// TestRenewLeaseOfAGoneLeaseIsExpiredOwner: etcd answers a keepalive of a
// lease it no longer knows with TTL 0, and the client turns that answer
// into ErrLeaseNotFound: RenewLease of a revoked lease is expired_owner,
// never a renewal.
func TestRenewLeaseOfAGoneLeaseIsExpiredOwner(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.CoordinatorOf(t, cl.Client(t))
	ctx := lgtest.Ctx(t)
	resp, err := c.Client().Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().Revoke(ctx, resp.ID); err != nil {
		t.Fatal(err)
	}
	ttl, _, err := store.Of(c).RenewLease(ctx, int64(resp.ID))
	lgtest.Want(t, err, coordinator.ExpiredOwner)
	if ttl != 0 {
		t.Fatalf("RenewLease of a revoked lease: ttl %v, want 0", ttl)
	}
}

// TestAttachKeepsTheGivenDeadline: an attached session may act only until
// the deadline its last renewal earned, never a fresh TTL from now.
func TestAttachKeepsTheGivenDeadline(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.CoordinatorOf(t, cl.Client(t))
	s := lgtest.Session(t, c, "worker", 10*time.Second, coordinator.WithoutKeepAlive())
	d := time.Now().Add(2 * time.Second)
	a, err := c.Attach("worker", s.Lease(), 10*time.Second, d)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Deadline().Equal(d) {
		t.Fatalf("attached session's deadline %v, want the given %v", a.Deadline(), d)
	}
}

// Attach of lease 0 (etcd's NoLease, which no grant returns) is
// invalid_input, as a negative lease is: a session over it would put owner
// keys with no lease at all, so they would never expire.
func TestAttachZeroLeaseIsInvalid(t *testing.T) {
	cl := embedtest.NewCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := coordinator.New(ctx, cl.Client(t), coordinator.WithPrefix("/attachzero"))
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range []int64{0, -1} {
		s, err := c.Attach("worker", lease, 10*time.Second, time.Now().Add(5*time.Second))
		if d := coordinator.DispositionOf(err); d != coordinator.InvalidInput || s != nil {
			t.Errorf("Attach(lease %d): session %t, err %v (%s), want no session, invalid_input", lease, s != nil, err, d)
		}
	}
	// A TTL the coordinator would refuse to open a session with is refused
	// here too: the session's keepalive interval and deadline come from it.
	for _, ttl := range []time.Duration{0, -time.Second} {
		s, err := c.Attach("worker", 1, ttl, time.Now().Add(5*time.Second))
		if d := coordinator.DispositionOf(err); d != coordinator.InvalidInput || s != nil {
			t.Errorf("Attach(ttl %v): session %t, err %v (%s), want no session, invalid_input", ttl, s != nil, err, d)
		}
	}
	// And a positive lease is accepted: the refusal is of the value, not of Attach.
	if _, err := c.Attach("worker", 1, 10*time.Second, time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("Attach(lease 1): %v", err)
	}
}

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
