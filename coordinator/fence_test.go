package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestCurrentAnswersEachRefusal: Current is nil exactly while the grant is
// the task's current one, and names each way it stops being so, with the
// holder the authority showed; it writes nothing.
func TestCurrentAnswersEachRefusal(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	prefix := c.Keys().Prefix()

	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "k")
	lgtest.WritesNothing(t, c.Client(), prefix, "Current of the current grant", func() {
		if err := c.Current(ctx, g); err != nil {
			t.Fatalf("Current of the current grant: %v", err)
		}
	})

	t.Run("invalid grant", func(t *testing.T) {
		bad := g
		bad.Epoch = 0
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.InvalidInput, func() error { return c.Current(ctx, bad) })
	})
	t.Run("another owner label at the grant's epoch", func(t *testing.T) {
		forged := g
		forged.Owner = "someone-else"
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.StaleOwner, func() error { return c.Current(ctx, forged) })
	})
	t.Run("another lease at the grant's epoch", func(t *testing.T) {
		forged := g
		forged.Lease++
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.StaleOwner, func() error { return c.Current(ctx, forged) })
	})
	t.Run("another realm", func(t *testing.T) {
		forged := g
		forged.Realm = "not-" + g.Realm
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.GenerationMismatch, func() error { return c.Current(ctx, forged) })
	})

	// Released: the fence is still g's epoch, the owner key is gone.
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.ExpiredOwner, func() error { return c.Current(ctx, g) })
	// The same epoch and owner label on another lease, with the owner key
	// gone: the fence record names another lease, so the grant was never
	// this epoch's — stale_owner, not the released grant's expired_owner
	// (design.md section 4, classification 2 before 3).
	forged := g
	forged.Lease++
	lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.StaleOwner, func() error { return c.Current(ctx, forged) })

	// A newer grant of the task: the old one is stale, the new one current.
	newer := lgtest.Claim(t, lgtest.Session(t, c, "worker-2", 10*time.Second), "t", "k")
	err := c.Current(ctx, g)
	lgtest.Want(t, err, coordinator.StaleOwner)
	var e *coordinator.Error
	if !errors.As(err, &e) || e.Holder == nil {
		t.Fatalf("stale_owner without a holder: %v", err)
	}
	lgtest.Holds(t, fmt.Sprintf("stale_owner's holder %+v", *e.Holder), lgtest.Is("owner worker-2", e.Holder.Owner == "worker-2"),
		lgtest.Is("the newer epoch", e.Holder.Epoch == newer.Epoch), lgtest.Is("fence at the newer epoch", e.Holder.Fence == newer.Epoch))
	if err := c.Current(ctx, newer); err != nil {
		t.Fatalf("Current of the newer grant: %v", err)
	}

	// The refusal says which way the fence moved, and its holder carries
	// the real TTL and state version, whichever path refused: Current,
	// Release, a commit.
	if _, err := fencedtxn.Commit(ctx, c, newer, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op-1", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	for _, refuse := range []func() error{
		func() error { return c.Current(ctx, g) },
		func() error { return c.Release(ctx, g) },
		func() error {
			_, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op-2", ExpectedVersion: 1})
			return err
		},
	} {
		err := refuse()
		lgtest.Want(t, err, coordinator.StaleOwner)
		var e *coordinator.Error
		if !errors.As(err, &e) || e.Holder == nil {
			t.Fatalf("stale_owner without a holder: %v", err)
		}
		if h := e.Holder; h.Owner != "worker-2" || h.TTLLeft < 1 || h.TTLLeft > 10 || h.StateVersion != 1 || h.LastOperation != "op-1" {
			t.Fatalf("%s: holder %+v; want worker-2 with its TTL left (1..10 s) and state version 1 (op-1)", e.Op, *h)
		}
		if !strings.Contains(e.Detail, "a newer grant owns the task") {
			t.Fatalf("%s: detail %q does not say a newer grant owns the task", e.Op, e.Detail)
		}
	}
	// A grant of an epoch the fence never reached (the authority restored
	// from before it): not "newer".
	ahead := newer
	ahead.Epoch += 1000
	err = c.Current(ctx, ahead)
	lgtest.Want(t, err, coordinator.StaleOwner)
	if !errors.As(err, &e) || strings.Contains(e.Detail, "newer") || !strings.Contains(e.Detail, "older than the grant's epoch") {
		t.Fatalf("fence older than the grant: detail %q; want it said so, not a newer grant", e.Detail)
	}
	if strings.Contains(coordinator.StaleOwner.Hint(), "newer") {
		t.Fatalf("stale_owner's hint %q claims a newer grant, which is untrue after a restore", coordinator.StaleOwner.Hint())
	}

	// The lease expires: expired_owner.
	short := lgtest.Session(t, c, "worker-3", time.Second, coordinator.WithoutKeepAlive())
	gone := lgtest.Claim(t, short, "t", "short")
	lgtest.WaitOwnerGone(t, c, "t", "short")
	lgtest.Want(t, c.Current(ctx, gone), coordinator.ExpiredOwner)

	// The realm rotates: every grant of the old realm is refused.
	if _, err := c.RotateRealm(ctx); err != nil {
		t.Fatal(err)
	}
	lgtest.Want(t, c.Current(ctx, newer), coordinator.GenerationMismatch)
}

// TestCurrentIsAHoldWhenEtcdCannotAnswer: a question etcd did not answer is
// authority_unavailable, never outcome_unknown nor a refusal — also when
// the read reached etcd and its answer was lost.
func TestCurrentIsAHoldWhenEtcdCannotAnswer(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	lost := lostAnswer()
	cli := lgtest.ClientWith(t, cl, lost)
	c := lgtest.CoordinatorOf(t, cli)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "k")

	lost.Arm()
	lgtest.Want(t, c.Current(ctx, g), coordinator.AuthorityUnavailable)
	if err := c.Current(ctx, g); err != nil {
		t.Fatalf("Current once the answer came through again: %v", err)
	}

	cl.Member(0).Stop(t)
	lgtest.WaitDisconnected(t, cli)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	lgtest.Want(t, c.Current(short, g), coordinator.AuthorityUnavailable)
}
