package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestSessionEnds(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)

	t.Run("keepalive outlives the TTL", func(t *testing.T) {
		s := lgtest.Session(t, c, "worker", time.Second)
		g := lgtest.Claim(t, s, "t", "alive")
		first := s.Deadline()
		// What is tested is time passing: 2.5 TTLs, during which the
		// session must not end.
		select {
		case <-s.Done():
			t.Fatalf("session ended: %v", s.Err())
		case <-time.After(2500 * time.Millisecond):
		}
		if !s.Deadline().After(first.Add(time.Second)) {
			t.Fatalf("deadline %v did not move past %v", s.Deadline(), first)
		}
		if err := c.Renew(ctx, g); err != nil {
			t.Fatalf("renew after more than a TTL of keepalive: %v", err)
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
	})
	t.Run("lease revoked by an operator", func(t *testing.T) {
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		g := lgtest.Claim(t, s, "t", "revoked")
		if err := c.RevokeLease(ctx, s.Lease()); err != nil {
			t.Fatal(err)
		}
		lgtest.Want(t, c.RevokeLease(ctx, s.Lease()), coordinator.ExpiredOwner)
		lgtest.Want(t, c.RevokeLease(ctx, -1), coordinator.InvalidInput)
		lgtest.Wait(t, s.Done(), "the session to end")
		if !errors.Is(s.Err(), coordinator.ErrSessionLeaseLost) {
			t.Fatalf("Err() = %v, want ErrSessionLeaseLost", s.Err())
		}
		_, err := s.Claim(ctx, "t", "other")
		lgtest.Want(t, err, coordinator.ExpiredOwner)
		lgtest.Want(t, c.Renew(ctx, g), coordinator.ExpiredOwner)
	})
	t.Run("network lost: local deadline", func(t *testing.T) {
		cli, err := cl.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		lost, err := coordinator.New(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		s, err := lost.NewSession(ctx, "worker", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		g := lgtest.Claim(t, s, "t", "partitioned")
		_ = cli.Close()
		lgtest.Wait(t, s.Done(), "the session to end")
		if !errors.Is(s.Err(), coordinator.ErrSessionDeadline) {
			t.Fatalf("Err() = %v, want ErrSessionDeadline", s.Err())
		}
		// The session gave up before the authority expired the lease.
		own, err := c.Owner(ctx, "t", "partitioned")
		if err != nil || own.Epoch != g.Epoch {
			t.Fatalf("owner when the session gave up: %+v %v; want epoch %d still held", own, err, g.Epoch)
		}
		lgtest.WaitOwnerGone(t, c, "t", "partitioned")
	})
	t.Run("close revokes", func(t *testing.T) {
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		g := lgtest.Claim(t, s, "t", "closed")
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(s.Err(), coordinator.ErrSessionClosed) {
			t.Fatalf("Err() = %v", s.Err())
		}
		own, err := c.Owner(ctx, "t", "closed")
		if err != nil || own.Owned() {
			t.Fatalf("owner after close: %+v %v", own, err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatalf("second close: %v", err)
		}
		lgtest.Want(t, c.Renew(ctx, g), coordinator.ExpiredOwner)
	})
	t.Run("without keepalive: deadline", func(t *testing.T) {
		s := lgtest.Session(t, c, "worker", time.Second, coordinator.WithoutKeepAlive())
		lgtest.Wait(t, s.Done(), "the session to end")
		if !errors.Is(s.Err(), coordinator.ErrSessionDeadline) {
			t.Fatalf("Err() = %v", s.Err())
		}
		if time.Now().Before(s.Deadline()) {
			t.Fatal("Done before the deadline")
		}
		_, err := s.Claim(ctx, "t", "late")
		lgtest.Want(t, err, coordinator.ExpiredOwner)
	})
}

func TestDispositionOf(t *testing.T) {
	t.Parallel()
	if d := coordinator.DispositionOf(nil); d != coordinator.OK || d.Class() != coordinator.ClassDone {
		t.Fatalf("nil: %q, want ok (done)", d)
	}
	if d := coordinator.DispositionOf(errors.New("something else")); d != coordinator.OutcomeUnknown {
		t.Fatalf("foreign error: %q, want outcome_unknown", d)
	}
	cause := errors.New("cause")
	e := store.NewError(coordinator.StaleOwner, "commit", "", "", "", cause)
	wrapped := fmt.Errorf("outer: %w", e)
	if coordinator.DispositionOf(wrapped) != coordinator.StaleOwner || !errors.Is(wrapped, coordinator.ErrStaleOwner) || !errors.Is(wrapped, cause) {
		t.Fatalf("wrapped error lost its disposition or cause: %v", wrapped)
	}
	all := coordinator.Dispositions()
	all[0] = "changed"
	if coordinator.Dispositions()[0] != coordinator.OK {
		t.Fatal("Dispositions() shares its slice with the caller")
	}
	for _, d := range coordinator.Dispositions() {
		if d.Class() == coordinator.ClassUnknown {
			t.Fatalf("%s has no class", d)
		}
		if d.Class() != coordinator.ClassDone && d.Hint() == "" {
			t.Fatalf("%s has no hint", d)
		}
	}
	if coordinator.Disposition("").Class() != coordinator.ClassUnknown {
		t.Fatal("the zero disposition must be unknown")
	}
}

// TestSessionDeadlineCountsFromTheSend: with every byte between the
// session's client and etcd delivered late, a renewal's answer arrives at
// least a round trip after its request left. The local deadline counts
// from the send: counted from the answer, a slow answer would push it past
// the expiry etcd counts from when it received the request.
func TestSessionDeadlineCountsFromTheSend(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	lg, logs := lgtest.Observed()
	c := lgtest.CoordinatorOf(t, cp.Client(t), coordinator.WithLogger(lg))
	const ttl, delay = 6 * time.Second, 150 * time.Millisecond
	margin := ttl / 10 // the default: TestDefaultMarginIsATenthOfTheTTL
	cp.Delay(delay)    // both ways: a round trip takes at least 2*delay
	s := lgtest.Session(t, c, "worker", ttl)
	logs.WaitFor(t, "the first renewal (its new deadline)", func(e observer.LoggedEntry) bool {
		_, ok := e.ContextMap()["deadline"]
		return ok
	})
	answered := time.Now() // at or after the answer; the request left 2*delay or more before it
	if latest := answered.Add(-2 * delay).Add(ttl - margin); s.Deadline().After(latest) {
		t.Fatalf("deadline %v is %v after the latest a send-time deadline can be (%v): counted from the answer",
			s.Deadline(), s.Deadline().Sub(latest), latest)
	}
	cp.Heal()
}

// TestDefaultMarginIsATenthOfTheTTL: the default margin is the larger of a
// tenth of the TTL and the minimum (100 ms), never the smaller: a 10 s
// session's first deadline is 9 s after its grant was sent.
func TestDefaultMarginIsATenthOfTheTTL(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	const ttl = 10 * time.Second
	before := time.Now()
	s := lgtest.Session(t, c, "worker", ttl, coordinator.WithoutKeepAlive())
	after := time.Now()
	if d := s.Deadline(); d.Before(before.Add(ttl-ttl/10)) || d.After(after.Add(ttl-ttl/10)) {
		t.Fatalf("deadline %v after the send; want TTL minus a tenth of it (%v)", d.Sub(before), ttl-ttl/10)
	}
}

// TestDefaultMarginIsTheLargerOfATenthAndTheMinimum: with a 10s TTL the
// default margin is a tenth (1s), not the 100ms minimum: the local
// deadline is at most the TTL minus 1s after the grant was sent.
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
// delayed 1s; the deadline is still at most send + TTL - margin.
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
// session's cause, not when its context runs out.
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
// operator revoked has nothing left to revoke: Close is nil.
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
// would say once reachable again.
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
