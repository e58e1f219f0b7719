package coordinator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestRestore restores one etcd snapshot through etcd's own code three
// ways. A plain restore brings back a grant that had been fenced out and
// hands out epochs again that were already issued; a revision bump alone
// stops the reuse but not the old grant; bump plus realm rotate refuses
// every grant issued before the restore. realm show's check (CheckOrigin)
// warns after each restore until the rotation.
func TestRestore(t *testing.T) {
	t.Parallel()
	a := embedtest.NewCluster(t)
	ca := lgtest.Coordinator(t, a)
	ctx := lgtest.Ctx(t)
	history(t, ca, 2*coordinator.RestoreSlack) // a keyspace with some history before the snapshot
	commit := func(c *coordinator.Coordinator, g coordinator.Grant, op string, v int64) error {
		_, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: op, Value: []byte(op), ExpectedVersion: v})
		return err
	}

	s1 := lgtest.Session(t, ca, "w1", 60*time.Second)
	g1 := lgtest.Claim(t, s1, "t", "k")
	if err := commit(ca, g1, "op-1", 0); err != nil {
		t.Fatal(err)
	}
	if chk, err := ca.CheckOrigin(ctx); err != nil || len(chk.Warnings) != 0 || chk.Origin == nil {
		t.Fatalf("check before any restore: %+v %v; want an origin and no warning", chk, err)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := a.SaveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	// After the snapshot: w1 is fenced out by w2, which commits.
	if err := ca.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	s2 := lgtest.Session(t, ca, "w2", 60*time.Second)
	g2 := lgtest.Claim(t, s2, "t", "k")
	if err := commit(ca, g2, "op-2", 1); err != nil {
		t.Fatal(err)
	}
	lgtest.Want(t, commit(ca, g1, "op-3", 1), coordinator.StaleOwner)
	last, err := ca.Client().Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	issued := last.Header.Revision // every epoch handed out so far is at or below it

	restoredCoordinator := func(t *testing.T, ro ...embedtest.Option) *coordinator.Coordinator {
		t.Helper()
		c := lgtest.Coordinator(t, embedtest.NewRestoredCluster(t, snap, ro...))
		if c.Realm() != ca.Realm() {
			t.Fatalf("restored realm %s, want the snapshot's %s", c.Realm(), ca.Realm())
		}
		return c
	}
	wantRestoreWarning := func(t *testing.T, c *coordinator.Coordinator, cluster bool) {
		t.Helper()
		chk, err := c.CheckOrigin(lgtest.Ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		var distance, clusterID bool
		for _, w := range chk.Warnings {
			distance = distance || strings.Contains(w, "past its raft index")
			clusterID = clusterID || strings.Contains(w, "minted on etcd cluster")
		}
		if !distance || clusterID != cluster {
			t.Fatalf("warnings after a restore %q (now %+v, origin %+v); want the raft-index warning, and the cluster-ID one: %v",
				chk.Warnings, chk.Now, chk.Origin, cluster)
		}
	}

	t.Run("plain restore: a fenced-out grant passes again, epochs are reused", func(t *testing.T) {
		c := restoredCoordinator(t)
		wantRestoreWarning(t, c, true)
		if err := commit(c, g1, "op-3", 1); err != nil {
			t.Fatalf("the hazard: w1's grant, fenced out after the snapshot, should pass on the restored keyspace: %v", err)
		}
		lgtest.Want(t, commit(c, g2, "op-4", 1), coordinator.StaleOwner)
		g := lgtest.Claim(t, lgtest.Session(t, c, "w3", 10*time.Second), "t", "other")
		if g.Epoch > issued {
			t.Fatalf("epoch %d after a plain restore; want one at or below %d, already issued", g.Epoch, issued)
		}
	})
	t.Run("bump without mark-compacted is ignored by etcdutl", func(t *testing.T) {
		c := restoredCoordinator(t, embedtest.WithRevisionBump(1_000_000))
		g := lgtest.Claim(t, lgtest.Session(t, c, "w3", 10*time.Second), "t", "other")
		if g.Epoch > issued {
			t.Fatalf("epoch %d: the bump applied after all", g.Epoch)
		}
	})
	t.Run("bump and rotate: every earlier grant refused", func(t *testing.T) {
		c := restoredCoordinator(t, embedtest.WithRevisionBump(1_000_000), embedtest.WithMarkCompacted())
		wantRestoreWarning(t, c, true)
		// The bump alone does not refuse grants from before the snapshot.
		if err := c.Renew(ctx, g1); err != nil {
			t.Fatalf("before rotation the snapshot's grant is current: %v", err)
		}
		if _, err := c.RotateRealm(ctx); err != nil {
			t.Fatal(err)
		}
		for _, g := range []coordinator.Grant{g1, g2} {
			lgtest.Want(t, commit(c, g, "op-5", 1), coordinator.GenerationMismatch)
		}
		g := lgtest.Claim(t, lgtest.Session(t, c, "w3", 10*time.Second), "t", "k")
		if g.Epoch <= issued {
			t.Fatalf("epoch %d after a bumped restore; want above %d", g.Epoch, issued)
		}
		if chk, err := c.CheckOrigin(ctx); err != nil || len(chk.Warnings) != 0 {
			t.Fatalf("check after rotation: %+v %v; want no warning", chk, err)
		}
	})
}

// TestRestoreInPlace restores a single member in place (same cluster ID,
// same client address) under a worker that keeps running: its session's
// lease comes back from the snapshot, its next claim gets an epoch the
// original cluster already issued — the same grant it had released — and
// that released grant passes again. realm show's check still warns.
func TestRestoreInPlace(t *testing.T) {
	t.Parallel()
	a := embedtest.NewCluster(t)
	ca := lgtest.Coordinator(t, a)
	ctx := lgtest.Ctx(t)
	history(t, ca, 2*coordinator.RestoreSlack)
	s := lgtest.Session(t, ca, "w1", 60*time.Second) // its lease is in the snapshot
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := a.SaveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	// After the snapshot: a grant, a commit under it, its release.
	g := lgtest.Claim(t, s, "t", "post")
	if _, err := fencedtxn.Commit(ctx, ca, g, fencedtxn.Intent{Tenant: "t", Task: "post", Operation: "op-1", Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := ca.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := a.Member(0).Kill(); err != nil {
		t.Fatal(err)
	}
	b := embedtest.NewRestoredCluster(t, snap, embedtest.WithRestoreAs(a.Member(0)))
	cb := lgtest.Coordinator(t, b)
	chk, err := cb.CheckOrigin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(chk.Warnings) != 1 || !strings.Contains(chk.Warnings[0], "past its raft index") {
		t.Fatalf("warnings after an in-place restore %q; want the raft-index one only (same cluster ID)", chk.Warnings)
	}
	// The worker's client reconnects to the restored member; its lease is
	// back, and its claim lands on the revision its released grant had.
	again := lgtest.Claim(t, s, "t", "post")
	if again != g {
		t.Fatalf("claim after the restore: %+v; the hazard is the released grant %+v issued again", again, g)
	}
	if _, err := fencedtxn.Commit(ctx, cb, g, fencedtxn.Intent{Tenant: "t", Task: "post", Operation: "op-2", Value: []byte("2")}); err != nil {
		t.Fatalf("the released grant should pass again after a plain restore: %v", err)
	}
}

// history writes n revisions under /history, a few at a time.
func history(t *testing.T, c *coordinator.Coordinator, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := c.Client().Put(context.Background(), fmt.Sprintf("/history/%d", i), "x"); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
