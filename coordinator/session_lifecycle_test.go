package coordinator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestDefaultMarginIsTheLargerOfATenthAndTheMinimum: with a 10s TTL the
// default margin is a tenth (1s), not the 100ms minimum: the local
// deadline is at most the TTL minus 1s after the grant was sent (pinned for
// indep/session/margin-min; issue 13).
func TestDefaultMarginIsTheLargerOfATenthAndTheMinimum(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	const ttl = 10 * time.Second
	s := lgtest.Session(t, c, "worker", ttl, coordinator.WithoutKeepAlive())
	after := time.Now() // the grant was sent before this
	if latest := after.Add(ttl - ttl/10); s.Deadline().After(latest) {
		t.Fatalf("deadline %v is %v past the send time + TTL - TTL/10: the margin is under a tenth of the TTL",
			s.Deadline().Format(time.RFC3339Nano), s.Deadline().Sub(latest))
	}
}

// TestFirstDeadlineCountsFromTheGrantsSend: the lease's TTL runs from when
// etcd granted it, which is before its answer arrives; a slow answer must
// not push the local deadline past etcd's expiry. The grant's answer is
// delayed 1s; the deadline is still at most send + TTL - margin (pinned for
// indep/session/grant-deadline-from-answer; issue 13).
func TestFirstDeadlineCountsFromTheGrantsSend(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	c := lgtest.CoordinatorOf(t, cp.Client(t))
	const ttl, margin, slow = 10 * time.Second, time.Second, time.Second
	cp.Delay(slow)
	before := time.Now()
	s := lgtest.Session(t, c, "worker", ttl, coordinator.WithoutKeepAlive(), coordinator.WithMargin(margin))
	if took := time.Since(before); took < slow {
		t.Fatalf("the grant took %v, under the injected delay of %v: the delay did not apply", took, slow)
	}
	// The request left at most half the delay after before (the delay is
	// on the way there and back): the deadline is at most that + TTL - margin.
	if latest := before.Add(slow/2 + ttl - margin); s.Deadline().After(latest) {
		t.Fatalf("deadline %v past send + TTL - margin by %v: it counts from the answer",
			s.Deadline().Format(time.RFC3339Nano), s.Deadline().Sub(latest))
	}
}

// TestAcquireReturnsWhenItsSessionEnds: an Acquire waiting on a busy task
// returns once its own session can no longer act (closed here), with the
// session's cause, not when its context runs out (pinned for
// indep/acquire/session-end-ignored).
func TestAcquireReturnsWhenItsSessionEnds(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	lg, logs := lgtest.Observed()
	c := lgtest.Coordinator(t, cl, coordinator.WithLogger(lg))
	ctx := lgtest.Ctx(t)
	lgtest.Claim(t, lgtest.Session(t, c, "holder", 10*time.Second), "t", "held")
	waiter := lgtest.Session(t, c, "waiter", 10*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx, "t", "held")
		done <- err
	}()
	logs.WaitFor(t, "Acquire waiting on busy", lgtest.Field("disposition", string(coordinator.Busy)))
	if err := waiter.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if !errors.Is(err, coordinator.ErrSessionClosed) {
			t.Fatalf("Acquire after its session closed: %v; want ErrSessionClosed", err)
		}
	case <-wctx.Done():
		t.Fatal("Acquire still waiting 5s after its session closed")
	}
}

// TestCloseAfterTheLeaseIsGoneIsNotAnError: a session whose lease an
// operator revoked has nothing left to revoke: Close is nil (pinned for
// indep/session/close-expired-error).
func TestCloseAfterTheLeaseIsGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s, err := c.NewSession(ctx, "worker", 10*time.Second, coordinator.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeLease(ctx, s.Lease()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close after the lease was revoked: %v; want nil", err)
	}
}

// TestClosedSessionNeverClaims: a session closed while etcd could not be
// reached still holds its lease in etcd (the revoke did not get through),
// but it can no longer act: a claim on it is expired_owner, whatever etcd
// would say once reachable again (pinned for indep/session/usable-ignores-end).
func TestClosedSessionNeverClaims(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	cli := cp.Client(t)
	c := lgtest.CoordinatorOf(t, cli)
	ctx := lgtest.Ctx(t)
	s, err := c.NewSession(ctx, "worker", 10*time.Second, coordinator.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	direct := lgtest.Coordinator(t, cl) // not through the proxy
	t.Cleanup(func() { _ = direct.RevokeLease(context.Background(), s.Lease()) })
	cp.Cut()
	lgtest.WaitDisconnected(t, cli)
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.Close(cctx); err == nil {
		t.Fatal("Close with etcd unreachable: nil; want the revoke's hold")
	}
	cp.Heal()
	if _, err := direct.Lease(ctx, s.Lease()); err != nil {
		t.Fatalf("the closed session's lease: %v; want it still alive in etcd", err)
	}
	lgtest.RefusedWritingNothing(t, direct.Client(), c.Keys().Prefix(), coordinator.ExpiredOwner, func() error {
		_, err := s.Claim(ctx, "t", "after-close")
		return err
	})
}
