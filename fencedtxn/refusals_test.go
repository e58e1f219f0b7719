package fencedtxn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestRefusalsOfUnusualHistories pins how claims and commits are answered
// after histories the plain path never makes: a rotation another
// coordinator has not seen, two sessions of one owner label, an operation
// id reused, a stale owner's retry, a superseded grant after a release, the
// label length limit, and fence or owner keys changed behind leasegate's
// back. The subtests share one cluster; each uses its own tasks.
func TestRefusalsOfUnusualHistories(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	intent := func(task, op, value string, expected int64) fencedtxn.Intent {
		return fencedtxn.Intent{Tenant: "t", Task: task, Operation: op, Value: []byte(value), ExpectedVersion: expected}
	}
	commit := func(t *testing.T, c *coordinator.Coordinator, g coordinator.Grant, in fencedtxn.Intent) {
		t.Helper()
		if _, err := fencedtxn.Commit(ctx, c, g, in); err != nil {
			t.Fatalf("commit %s: %v", in.Operation, err)
		}
	}

	t.Run("a coordinator that has not seen a rotation claims a never-claimed task", func(t *testing.T) {
		// Its own prefix: a rotation touches every task of a keyspace.
		unseen := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/rotated"))
		rotator := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/rotated"))
		s := lgtest.Session(t, unseen, "worker", 10*time.Second)
		fresh, err := rotator.RotateRealm(ctx)
		if err != nil {
			t.Fatal(err)
		}
		g := lgtest.Claim(t, s, "t", "never-claimed")
		if g.Realm != fresh {
			t.Fatalf("grant realm %s; want the rotated realm %s", g.Realm, fresh)
		}
		commit(t, unseen, g, intent("never-claimed", "op", "v", 0))
	})

	t.Run("two sessions with the same owner label: the second claim is busy", func(t *testing.T) {
		first := lgtest.Session(t, c, "same-label", 10*time.Second)
		second := lgtest.Session(t, c, "same-label", 10*time.Second)
		g := lgtest.Claim(t, first, "t", "same-label")
		_, err := second.Claim(ctx, "t", "same-label")
		lgtest.Want(t, err, coordinator.Busy)
		if own, err := c.Owner(ctx, "t", "same-label"); err != nil || own.Lease != g.Lease || own.Epoch != g.Epoch {
			t.Fatalf("owner after the second claim: %+v %v", own, err)
		}
	})

	t.Run("a committed operation id reused with a new payload at the current version", func(t *testing.T) {
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "reused")
		commit(t, c, g, intent("reused", "op", "first", 0))
		refusedCommit(t, ctx, c, g, intent("reused", "op", "second", 1), coordinator.OperationConflict)
	})

	t.Run("a stale owner retrying its own committed operation", func(t *testing.T) {
		a := lgtest.Session(t, c, "a", 10*time.Second)
		ga := lgtest.Claim(t, a, "t", "retried")
		in := intent("retried", "op", "v", 0)
		commit(t, c, ga, in)
		if err := c.RevokeLease(ctx, a.Lease()); err != nil {
			t.Fatal(err)
		}
		lgtest.Claim(t, lgtest.Session(t, c, "b", 10*time.Second), "t", "retried")
		refusedCommit(t, ctx, c, ga, in, coordinator.StaleOwner) // not historical_retry: receipts go to the current owner only
	})

	t.Run("A superseded by B, B releases: A is stale, not expired", func(t *testing.T) {
		a := lgtest.Session(t, c, "a", 10*time.Second)
		ga := lgtest.Claim(t, a, "t", "superseded")
		if err := c.RevokeLease(ctx, a.Lease()); err != nil {
			t.Fatal(err)
		}
		gb := lgtest.Claim(t, lgtest.Session(t, c, "b", 10*time.Second), "t", "superseded")
		if err := c.Release(ctx, gb); err != nil {
			t.Fatal(err)
		}
		refusedCommit(t, ctx, c, ga, intent("superseded", "op", "v", 0), coordinator.StaleOwner)
		lgtest.Want(t, c.Release(ctx, ga), coordinator.StaleOwner)
	})

	t.Run("an 80-byte label is accepted, 81 refused", func(t *testing.T) {
		l80, l81 := strings.Repeat("x", 80), strings.Repeat("y", 81)
		s := lgtest.Session(t, c, l80, 10*time.Second)
		g, err := s.Claim(ctx, l80, l80)
		if err != nil {
			t.Fatal(err)
		}
		commit(t, c, g, fencedtxn.Intent{Tenant: l80, Task: l80, Operation: l80})
		for _, label := range []struct{ tenant, task, op string }{{l81, l80, l80}, {l80, l81, l80}, {l80, l80, l81}} {
			_, err := s.Claim(ctx, label.tenant, label.task)
			if label.op == l80 {
				lgtest.Want(t, err, coordinator.InvalidInput)
			}
			_, err = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: label.tenant, Task: label.task, Operation: label.op, ExpectedVersion: 1})
			lgtest.Want(t, err, coordinator.InvalidInput)
		}
		_, err = c.NewSession(ctx, l81, 10*time.Second)
		lgtest.Want(t, err, coordinator.InvalidInput)
	})

	t.Run("the fence key deleted behind leasegate's back", func(t *testing.T) {
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "fence-deleted")
		if _, err := c.Client().Delete(ctx, c.Keys().Fence("t", "fence-deleted")); err != nil {
			t.Fatal(err)
		}
		refusedCommit(t, ctx, c, g, intent("fence-deleted", "op", "v", 0), coordinator.StaleOwner)
	})

	t.Run("the owner key rewritten with the same label and lease behind leasegate's back", func(t *testing.T) {
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "owner-rewritten")
		if _, err := c.Client().Put(ctx, c.Keys().Owner("t", "owner-rewritten"), g.Owner, clientv3.WithLease(clientv3.LeaseID(g.Lease))); err != nil {
			t.Fatal(err)
		}
		refusedCommit(t, ctx, c, g, intent("owner-rewritten", "op", "v", 0), coordinator.StaleOwner)
	})
}

// TestEveryAttemptDeadlineExceededIsOutcomeUnknown: a write etcd applied
// whose every answer was DeadlineExceeded is outcome_unknown — never a hold
// — and retrying the same intent learns it applied.
func TestEveryAttemptDeadlineExceededIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	// Every Txn reaches etcd and applies; its answer is DeadlineExceeded.
	d := &lgtest.TxnAnswers{Err: status.Error(codes.DeadlineExceeded, "context deadline exceeded (answer replaced by the test)")}
	cli := lgtest.ClientWith(t, cl, d)
	ctx := lgtest.Ctx(t)
	c := lgtest.CoordinatorOf(t, cli)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "k")
	in := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v")}
	d.Arm()
	_, err := fencedtxn.Commit(ctx, c, g, in)
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
	d.Disarm()
	r, err := fencedtxn.Commit(ctx, c, g, in)
	if err != nil || r.Disposition != coordinator.HistoricalRetry {
		t.Fatalf("retry: %+v %v; want historical_retry (the first attempt applied)", r, err)
	}
}

// refusedCommit runs a commit that must be refused with want and leave
// the keyspace byte for byte unchanged.
func refusedCommit(t *testing.T, ctx context.Context, c *coordinator.Coordinator, g coordinator.Grant, in fencedtxn.Intent, want coordinator.Disposition) {
	t.Helper()
	lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), want, func() error {
		_, err := fencedtxn.Commit(ctx, c, g, in)
		return err
	})
}
