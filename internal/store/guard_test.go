package store_test

import (
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestGuardCache: the guard compares and reads a commit or a transition
// gets are exactly the grant's Guard and GuardReads, for grants taken in
// turn (no entry serves another grant, not even the same task's at another
// epoch, nor another coordinator's), and a caller appending to or changing
// its slices never changes the next one's.
func TestGuardCache(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	other := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/other"))
	s := lgtest.Session(t, c, "worker-1", 10*time.Second)
	a, b := lgtest.Claim(t, s, "t", "a"), lgtest.Claim(t, s, "t", "b")
	stale := a
	stale.Epoch-- // same task, another epoch: an entry of its own
	for range 3 {
		for _, co := range []*coordinator.Coordinator{c, other} {
			for _, g := range []coordinator.Grant{a, b, stale} {
				cmps, reads := store.Of(co).Guarded(g, 2)
				if !reflect.DeepEqual(cmps, co.Guard(g)) || !reflect.DeepEqual(reads, store.Of(co).GuardReads(g)) {
					t.Fatalf("the cached guard of %s epoch %d differs from Guard's", g.Task, g.Epoch)
				}
				_ = append(cmps, cmps[0]) // a caller's append
				reads[0] = reads[1]       // a caller's overwrite
			}
		}
	}
	store.Of(c).ClearGuards() // what the bound does: entries are rebuilt
	if cmps, _ := store.Of(c).Guarded(a, 0); !reflect.DeepEqual(cmps, c.Guard(a)) {
		t.Fatal("the guard rebuilt after clearing differs from Guard's")
	}
}

// TestGuardCacheIsBounded: however many grants a store guards, its cache
// never holds more than its bound, and it still answers every grant with
// that grant's own guard.
func TestGuardCacheIsBounded(t *testing.T) {
	t.Parallel()
	s := store.New(nil, store.NewKeys("/lg"), store.Limits{}, zap.NewNop(), nil)
	g := store.Grant{Realm: "r", Tenant: "t", Task: "a", Owner: "w", Lease: 1}
	for epoch := int64(1); epoch <= 2*store.MaxGuards+1; epoch++ {
		g.Epoch = epoch
		if cmps, _ := s.Guarded(g, 0); !reflect.DeepEqual(cmps, s.Guard(g)) {
			t.Fatalf("the cached guard of epoch %d differs from Guard's", epoch)
		}
		if n := s.GuardsHeld(); n > store.MaxGuards {
			t.Fatalf("the guard cache holds %d grants after %d, over its bound %d", n, epoch, store.MaxGuards)
		}
	}
}

// TestCheckGuardNamesAnImpostorOfAReleasedEpochStale: once a grant is
// released its owner key is gone, but the fence record still says whose
// epoch it was. The grant itself is expired_owner; a grant of that epoch
// naming another lease or another owner never held the task, and is
// stale_owner.
func TestCheckGuardNamesAnImpostorOfAReleasedEpochStale(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker-1", 10*time.Second)
	other := lgtest.Session(t, c, "worker-2", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "a")
	lgtest.Want(t, c.Current(ctx, g), coordinator.OK)
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	otherLease, otherOwner := g, g
	otherLease.Lease = other.Lease()
	otherOwner.Owner = other.Owner()
	for _, tc := range []struct {
		name string
		g    coordinator.Grant
		want coordinator.Disposition
	}{
		{"the released grant", g, coordinator.ExpiredOwner},
		{"its epoch on another lease", otherLease, coordinator.StaleOwner},
		{"its epoch under another owner", otherOwner, coordinator.StaleOwner},
	} {
		t.Run(tc.name, func(t *testing.T) { lgtest.Want(t, c.Current(ctx, tc.g), tc.want) })
	}
}
