package fencedtxn_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestStaleNotExpiredAndInvalidCallerOps pins that a grant outlived by a
// newer epoch is stale_owner (not expired_owner) even when its owner
// identity matches, that caller ops inside leasegate's prefix or over a
// range are invalid input writing nothing, and that another tenant's task
// of the same name is scope_mismatch. The subtests share one cluster; each
// uses its own task.
func TestStaleNotExpiredAndInvalidCallerOps(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	prefix := c.Keys().Prefix()

	t.Run("the same session re-claims and releases: its first grant is stale, not expired", func(t *testing.T) {
		// Fence record and owner identity match the first grant; only the
		// fence's epoch tells that a newer grant was published since.
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		first := lgtest.Claim(t, s, "t", "reclaimed")
		if err := c.Release(ctx, first); err != nil {
			t.Fatal(err)
		}
		second := lgtest.Claim(t, s, "t", "reclaimed")
		if err := c.Release(ctx, second); err != nil {
			t.Fatal(err)
		}
		in := fencedtxn.Intent{Tenant: "t", Task: "reclaimed", Operation: "op"}
		refusedCommit(t, ctx, c, first, in, coordinator.StaleOwner)
		refusedCommit(t, ctx, c, second, in, coordinator.ExpiredOwner)
	})

	t.Run("an impostor of a released grant's epoch is stale, not expired", func(t *testing.T) {
		// The owner key is gone and the fence still at the epoch: only the
		// fence record's owner and lease tell that the grant is not the one
		// published at that epoch.
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		g := lgtest.Claim(t, s, "t", "impostor")
		if err := c.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
		in := fencedtxn.Intent{Tenant: "t", Task: "impostor", Operation: "op"}
		otherOwner, otherLease := g, g
		otherOwner.Owner = "impostor"
		otherLease.Lease = lgtest.Session(t, c, "worker", 10*time.Second).Lease()
		refusedCommit(t, ctx, c, otherOwner, in, coordinator.StaleOwner)
		refusedCommit(t, ctx, c, otherLease, in, coordinator.StaleOwner)
		refusedCommit(t, ctx, c, g, in, coordinator.ExpiredOwner)
	})

	t.Run("caller ops inside leasegate's prefix are invalid input, nothing written", func(t *testing.T) {
		// Keys the commit itself does not write, so etcd's duplicate-key
		// refusal cannot stand in for the prefix check.
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "smuggler")
		victim := lgtest.Claim(t, lgtest.Session(t, c, "victim", 10*time.Second), "t", "victim")
		in := fencedtxn.Intent{Tenant: "t", Task: "smuggler", Operation: "op"}
		for _, op := range []clientv3.Op{
			clientv3.OpPut(c.Keys().Fence("t", "victim"), "{}"),
			clientv3.OpDelete(c.Keys().Owner("t", "victim")),
			clientv3.OpPut(c.Keys().Realm(), "another-realm"),
		} {
			lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.InvalidInput, func() error {
				_, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(op))
				return err
			})
		}
		if own, err := c.Owner(ctx, "t", "victim"); err != nil || own.Epoch != victim.Epoch || !own.Owned() {
			t.Fatalf("victim after the refused commits: %+v %v", own, err)
		}
	})

	t.Run("a caller op that is a range is invalid input, nothing written", func(t *testing.T) {
		// Each range starts outside leasegate's prefix, so the key check
		// alone lets it through, and ends before the ops and state keys the
		// commit puts, so etcd's overlap refusal cannot stand in either:
		// applied, the first would delete every fence of the keyspace.
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "ranger")
		victim := lgtest.Claim(t, lgtest.Session(t, c, "victim", 10*time.Second), "t", "range-victim")
		in := fencedtxn.Intent{Tenant: "t", Task: "ranger", Operation: "op"}
		for _, op := range []clientv3.Op{
			clientv3.OpDelete("/a", clientv3.WithRange(prefix+"/ops")),
			clientv3.OpDelete("/", clientv3.WithFromKey()),
			clientv3.OpDelete("/a", clientv3.WithPrefix()),
		} {
			lgtest.RefusedWritingNothing(t, c.Client(), "/", coordinator.InvalidInput, func() error {
				_, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(op))
				return err
			})
		}
		if err := c.Current(ctx, victim); err != nil {
			t.Fatalf("victim after the refused commits: %v", err)
		}
	})

	t.Run("an intent for another tenant's task of the same name is scope_mismatch", func(t *testing.T) {
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "tenant-a", "shared-name")
		lgtest.Claim(t, lgtest.Session(t, c, "other", 10*time.Second), "tenant-b", "shared-name")
		in := fencedtxn.Intent{Tenant: "tenant-b", Task: "shared-name", Operation: "op"}
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.ScopeMismatch, func() error {
			_, err := fencedtxn.Commit(ctx, c, g, in)
			return err
		})
	})
}
