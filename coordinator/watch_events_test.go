package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestWatchDoesNotReplayTheListedRevision: the watch after the initial
// listing starts after the listed revision: a claim already reported as
// owned is not reported again as claimed; the next event is the release
// (pinned for indep/watch/rev-overlap).
func TestWatchDoesNotReplayTheListedRevision(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx, cancel := context.WithCancel(lgtest.Ctx(t))
	defer cancel()
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "watched") // the newest revision: the listing's
	events, err := c.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	next := func() coordinator.OwnershipEvent {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(lgtest.Timeout):
			t.Fatal("no ownership event")
		}
		return coordinator.OwnershipEvent{}
	}
	if ev := next(); ev.Type != coordinator.EventOwned || ev.Ownership.Epoch != g.Epoch {
		t.Fatalf("first event %+v; want owned at epoch %d", ev, g.Epoch)
	}
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Type != coordinator.EventVacated {
		t.Fatalf("event after the release %+v; want vacated (the listed claim replayed?)", ev)
	}
}

// TestWatchReportsAStaleKeyOnce: an owner key cut off by a rotation is
// reported vacated at the rotation; when its lease later goes and etcd
// deletes it, nothing more is reported: the next event is the new claim
// (pinned for indep/watch/stale-delete-reported).
func TestWatchReportsAStaleKeyOnce(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx, cancel := context.WithCancel(lgtest.Ctx(t))
	defer cancel()
	old := lgtest.Session(t, c, "old", 10*time.Second)
	g := lgtest.Claim(t, old, "t", "k")
	events, err := c.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, events, coordinator.EventOwned, "k", g.Epoch)
	if _, err := c.RotateRealm(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, events); ev.Type != coordinator.EventVacated || ev.Ownership.Epoch != g.Epoch {
		t.Fatalf("after the rotation: %s %+v; want k vacated", ev.Type, ev.Ownership)
	}
	if err := c.RevokeLease(ctx, old.Lease()); err != nil { // etcd deletes the stale key
		t.Fatal(err)
	}
	g2 := lgtest.Claim(t, lgtest.Session(t, c, "new", 10*time.Second), "t", "k")
	expect(t, events, coordinator.EventClaimed, "k", g2.Epoch)
}

// TestWatchCutReportsAReclaimAsVacatedThenOwned: a task released and
// claimed again while the watch was cut (its member down, the history
// compacted meanwhile) holds the same key with a new epoch; the re-list
// reports the old owner vacated, then the new one owned (pinned for
// indep/watch/resync-ignores-epoch).
func TestWatchCutReportsAReclaimAsVacatedThenOwned(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	cl.WaitLeader(t)
	ctx, cancel := context.WithCancel(lgtest.Ctx(t))
	defer cancel()
	c := lgtest.Coordinator(t, cl)
	w := lgtest.CoordinatorOf(t, lgtest.MemberClient(t, cl, 0)) // the watcher talks to member 0 only
	g1 := lgtest.Claim(t, lgtest.Session(t, c, "first", 10*time.Second), "t", "k")
	events, err := w.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, events, coordinator.EventOwned, "k", g1.Epoch)
	cl.Member(0).Stop(t)
	if err := c.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	g2 := lgtest.Claim(t, lgtest.Session(t, c, "second", 10*time.Second), "t", "k")
	if _, err := c.Client().Compact(ctx, g2.Epoch); err != nil { // the watch cannot resume: it re-lists
		t.Fatal(err)
	}
	cl.Member(0).Restart(t)
	expect(t, events, coordinator.EventVacated, "k", g1.Epoch)
	expect(t, events, coordinator.EventOwned, "k", g2.Epoch)
}
