package coordinator_test

import (
	"context"
	"testing"
	"time"

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
