package store_test

import (
	"reflect"
	"testing"
	"time"

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
