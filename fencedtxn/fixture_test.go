package fencedtxn_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestSeedFixture reproduces every assertion of the seed's
// fenced_task_commit.py main() on real etcd, in its order, with real lease
// expiry in place of synthetic ticks. The subtests share state, as the
// fixture does; each one is a named assertion. The fixture's last two
// assertions (a clock rolled back, a boolean clock) have no counterpart: no
// client supplies a time here, expiry is etcd's lessor on the leader.
func TestSeedFixture(t *testing.T) {
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	prefix := c.Keys().Prefix()

	// region-a's lease is not kept alive: it is a worker that paused.
	oldSession := lgtest.Session(t, c, "region-a", time.Second, coordinator.WithoutKeepAlive())
	old := lgtest.Claim(t, oldSession, "tenant-a", "task-a")
	intent := fencedtxn.Intent{Tenant: "tenant-a", Task: "task-a", Operation: "operation-a", Value: []byte("synthetic-value"), ExpectedVersion: 0}

	t.Run("expired owner refused before any regrant", func(t *testing.T) {
		lgtest.WaitOwnerGone(t, c, "tenant-a", "task-a")
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.ExpiredOwner, func() error {
			_, err := fencedtxn.Commit(ctx, c, old, intent)
			return err
		})
	})
	t.Run("renewal cannot revive an expired grant", func(t *testing.T) {
		lgtest.Want(t, c.Renew(ctx, old), coordinator.ExpiredOwner)
		ttl, err := c.Client().TimeToLive(ctx, clientLease(old))
		if err != nil || ttl.TTL != -1 {
			t.Fatalf("lease after renew: ttl %v err %v; want gone (-1)", ttl.TTL, err)
		}
	})

	// region-b runs on its own client, so that later its network can be cut.
	cliB, err := cl.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cliB.Close() })
	cB, err := coordinator.New(ctx, cliB)
	if err != nil {
		t.Fatal(err)
	}
	sessionB, err := cB.NewSession(ctx, "region-b", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var newGrant coordinator.Grant
	t.Run("regrant has a larger epoch", func(t *testing.T) {
		newGrant = lgtest.Claim(t, sessionB, "tenant-a", "task-a")
		if newGrant.Epoch <= old.Epoch {
			t.Fatalf("new epoch %d not above old %d", newGrant.Epoch, old.Epoch)
		}
	})
	t.Run("old owner refused after regrant before the new owner's first write", func(t *testing.T) {
		if st, _ := c.Client().Get(ctx, c.Keys().State("tenant-a", "task-a")); len(st.Kvs) != 0 {
			t.Fatalf("the new owner has written already: %s", st.Kvs[0].Value)
		}
		_, err := fencedtxn.Commit(ctx, c, old, intent)
		lgtest.Want(t, err, coordinator.StaleOwner)
	})
	t.Run("equal-epoch impostor refused", func(t *testing.T) {
		impostor := newGrant
		impostor.Owner = "another-owner"
		_, err := fencedtxn.Commit(ctx, c, impostor, intent)
		lgtest.Want(t, err, coordinator.StaleOwner)
		otherLease := newGrant
		otherLease.Lease = old.Lease
		_, err = fencedtxn.Commit(ctx, c, otherLease, intent)
		lgtest.Want(t, err, coordinator.StaleOwner)
	})
	t.Run("current owner renews", func(t *testing.T) {
		if err := c.Renew(ctx, newGrant); err != nil {
			t.Fatal(err)
		}
	})
	var first fencedtxn.Receipt
	t.Run("current owner commits", func(t *testing.T) {
		first, err = fencedtxn.Commit(ctx, c, newGrant, intent)
		lgtest.Holds(t, fmt.Sprintf("commit: %+v, %v", first, err), lgtest.Is("no error", err == nil),
			lgtest.Is("committed", first.Disposition == coordinator.Committed), lgtest.Is("version 1", first.CommittedVersion == 1),
			lgtest.Is("the new grant's epoch", first.Epoch == newGrant.Epoch))
	})
	t.Run("historical retry returns the original receipt", func(t *testing.T) {
		again, err := fencedtxn.Commit(ctx, c, newGrant, intent)
		if err != nil || again.Disposition != coordinator.HistoricalRetry {
			t.Fatalf("retry: %+v, %v", again, err)
		}
		again.Disposition = first.Disposition
		if again != first {
			t.Fatalf("retry receipt %+v, original %+v", again, first)
		}
	})
	t.Run("changed payload under the same operation conflicts", func(t *testing.T) {
		changed := intent
		changed.Value = []byte("different-value")
		_, err := fencedtxn.Commit(ctx, c, newGrant, changed)
		lgtest.Want(t, err, coordinator.OperationConflict)
	})
	t.Run("wrong expected version conflicts", func(t *testing.T) {
		_, err := fencedtxn.Commit(ctx, c, newGrant, fencedtxn.Intent{Tenant: "tenant-a", Task: "task-a", Operation: "operation-b", Value: []byte("synthetic-value")})
		lgtest.Want(t, err, coordinator.VersionConflict)
	})
	next := fencedtxn.Intent{Tenant: "tenant-a", Task: "task-a", Operation: "operation-b", Value: []byte("synthetic-next"), ExpectedVersion: 1}
	t.Run("unavailable authority holds with nothing written", func(t *testing.T) {
		// The snapshot after is read once the member is back.
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.AuthorityUnavailable, func() error {
			cl.Member(0).Stop(t)
			lgtest.WaitDisconnected(t, c.Client())
			short, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := fencedtxn.Commit(short, c, newGrant, next)
			cl.Member(0).Restart(t)
			return err
		})
	})
	var latest coordinator.Grant
	sessionC := lgtest.Session(t, c, "region-c", 10*time.Second)
	t.Run("held owner resumed after a newer grant is refused", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		held := make(chan error, 1)
		go func() {
			close(entered)
			<-release
			_, err := fencedtxn.Commit(ctx, c, newGrant, next)
			held <- err
		}()
		lgtest.Wait(t, entered, "the held owner to start")
		// region-b loses its network: its lease really expires.
		_ = cliB.Close()
		lgtest.WaitOwnerGone(t, c, "tenant-a", "task-a")
		lgtest.Wait(t, sessionB.Done(), "region-b's session to end")
		latest = lgtest.Claim(t, sessionC, "tenant-a", "task-a")
		close(release)
		lgtest.Want(t, <-held, coordinator.StaleOwner)
	})
	t.Run("new owner recovers the exact operation", func(t *testing.T) {
		r, err := fencedtxn.Commit(ctx, c, latest, intent)
		lgtest.Holds(t, fmt.Sprintf("recovery: %+v, %v; original %+v", r, err, first), lgtest.Is("no error", err == nil),
			lgtest.Is("historical_retry", r.Disposition == coordinator.HistoricalRetry), lgtest.Is("the original epoch", r.Epoch == first.Epoch),
			lgtest.Is("version 1", r.CommittedVersion == 1), lgtest.Is("the original revision", r.Revision == first.Revision))
	})
	t.Run("cross-task intent refused", func(t *testing.T) {
		cross := intent
		cross.Task = "other-task"
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.ScopeMismatch, func() error {
			_, err := fencedtxn.Commit(ctx, c, latest, cross)
			return err
		})
	})
	t.Run("grant from another realm refused", func(t *testing.T) {
		fresh := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/new-authority-generation"))
		if fresh.Realm() == c.Realm() {
			t.Fatal("two keyspaces share a realm")
		}
		lgtest.Claim(t, lgtest.Session(t, fresh, "region-c", 10*time.Second), "tenant-a", "task-a")
		_, err := fencedtxn.Commit(ctx, fresh, latest, intent)
		lgtest.Want(t, err, coordinator.GenerationMismatch)
	})
	t.Run("same owner reclaims after expiry with a newer epoch", func(t *testing.T) {
		short := lgtest.Session(t, c, "region-c", time.Second, coordinator.WithoutKeepAlive())
		sameOwner := lgtest.Claim(t, short, "tenant-a", "task-b")
		lgtest.WaitOwnerGone(t, c, "tenant-a", "task-b")
		lgtest.Want(t, c.Renew(ctx, sameOwner), coordinator.ExpiredOwner)
		reclaimed := lgtest.Claim(t, lgtest.Session(t, c, "region-c", 10*time.Second), "tenant-a", "task-b")
		if reclaimed.Epoch <= sameOwner.Epoch {
			t.Fatalf("reclaimed epoch %d not above %d", reclaimed.Epoch, sameOwner.Epoch)
		}
	})
}

func clientLease(g coordinator.Grant) clientv3.LeaseID { return clientv3.LeaseID(g.Lease) }
