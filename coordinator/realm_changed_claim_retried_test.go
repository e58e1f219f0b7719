package coordinator_test

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestRealmKeyChangedBehindTheCoordinator pins the claim's and the guard's
// handling of a realm key changed out of band, branches that survived the
// mutation tool (tools/mutate; docs/reliability.md, "Mutation score").
// Each subtest has its own prefix.
func TestRealmKeyChangedBehindTheCoordinator(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	ctx := lgtest.Ctx(t)

	t.Run("keyspace wiped: a claim and a held grant are generation mismatches, nothing written", func(t *testing.T) {
		c := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/wiped"))
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		g := lgtest.Claim(t, s, "t", "held")
		if _, err := c.Client().Delete(ctx, c.Keys().Realm()); err != nil {
			t.Fatal(err)
		}
		lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.GenerationMismatch, func() error {
			_, err := s.Claim(ctx, "t", "new")
			return err
		})
		lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.GenerationMismatch, func() error { return c.Release(ctx, g) })
	})

	t.Run("realm rewritten with its own value: a claim adopts its revision", func(t *testing.T) {
		c := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/rewritten"))
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		if _, err := c.Client().Put(ctx, c.Keys().Realm(), c.Realm()); err != nil {
			t.Fatal(err)
		}
		g := lgtest.Claim(t, s, "t", "k")
		if g.Realm != c.Realm() {
			t.Fatalf("grant realm %s; want %s", g.Realm, c.Realm())
		}
		if err := c.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
	})
}

// TestClaimRetriedAfterOtherWrites: a claim retried after its answer was
// lost returns the epoch the lost claim was granted, even when other writes
// moved etcd's revision in between (without them, the retry's own revision
// equals that epoch, which hid a retry that returned the wrong one).
func TestClaimRetriedAfterOtherWrites(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	d := lostAnswer()
	c := lgtest.CoordinatorOf(t, lgtest.ClientWith(t, cl, d))
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	d.Arm()
	_, err := s.Claim(ctx, "t", "k")
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
	own, err := c.Owner(ctx, "t", "k")
	if err != nil || own.Owner != "worker" {
		t.Fatalf("the lost claim did not apply: %+v %v", own, err)
	}
	lgtest.Claim(t, lgtest.Session(t, c, "other", 10*time.Second), "t", "other-task")
	g := lgtest.Claim(t, s, "t", "k")
	if g.Epoch != own.Epoch {
		t.Fatalf("retried claim: epoch %d; want the lost claim's %d", g.Epoch, own.Epoch)
	}
	if _, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op"}); err != nil {
		t.Fatalf("commit under the retried grant: %v", err)
	}
}
