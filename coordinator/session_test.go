package coordinator_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
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
	e := &coordinator.Error{Disposition: coordinator.StaleOwner, Op: "commit", Err: cause}
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
