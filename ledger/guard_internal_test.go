package ledger

import (
	"reflect"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/core"
	"github.com/leasegate/leasegate/internal/lgtest"
)

// TestGuardCache: a transition's guard compares and reads are exactly the
// grant's Guard and GuardReads, for grants taken in turn (no entry serves
// another grant, not even the same task's at another epoch), and a
// transition appending to or changing its slices never changes the next
// one's.
func TestGuardCache(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	s := lgtest.Session(t, c, "worker-1", 10*time.Second)
	a, b := lgtest.Claim(t, s, "t", "a"), lgtest.Claim(t, s, "t", "b")
	stale := a
	stale.Epoch-- // same task, another epoch: an entry of its own
	for range 3 {
		for _, g := range []coordinator.Grant{a, b, stale} {
			cmps, reads := l.guard(g)
			if !reflect.DeepEqual(cmps, c.Guard(g)) || !reflect.DeepEqual(reads, core.GuardReads(c, g)) {
				t.Fatalf("the cached guard of %s epoch %d differs from Guard's", g.Task, g.Epoch)
			}
			_ = append(cmps, cmps[0]) // build's append of the record's compare
			reads[0] = reads[1]       // a caller's overwrite
		}
	}
	l.guards.mu.Lock()
	l.guards.m = nil // what the bound does: entries are rebuilt
	l.guards.mu.Unlock()
	if cmps, _ := l.guard(a); !reflect.DeepEqual(cmps, c.Guard(a)) {
		t.Fatal("the guard rebuilt after clearing differs from Guard's")
	}
}
