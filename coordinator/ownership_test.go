package coordinator_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestOwnerAndList(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "k")
	lgtest.Claim(t, s, "t", "idle")
	for i, op := range []string{"first", "second"} {
		if _, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: op, Value: []byte(op), ExpectedVersion: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	own, err := c.Owner(ctx, "t", "k")
	if err != nil {
		t.Fatal(err)
	}
	lgtest.Holds(t, fmt.Sprintf("Owner: %+v for grant %+v", own, g),
		lgtest.Is("owner worker", own.Owner == "worker"), lgtest.Is("the grant's epoch", own.Epoch == g.Epoch),
		lgtest.Is("the grant's lease", own.Lease == g.Lease), lgtest.Is("fence at the grant's epoch", own.Fence == g.Epoch),
		lgtest.Is("state version 2", own.StateVersion == 2), lgtest.Is("last operation second", own.LastOperation == "second"),
		lgtest.Is("TTL left", own.TTLLeft >= 1), lgtest.Is("read after the claim", own.Revision > g.Epoch))
	none, err := c.Owner(ctx, "t", "never")
	lgtest.Holds(t, fmt.Sprintf("unclaimed task: %+v %v", none, err), lgtest.Is("no error", err == nil),
		lgtest.Is("not owned", !none.Owned()), lgtest.Is("no fence", none.Fence == 0), lgtest.Is("TTL unknown (-1)", none.TTLLeft == -1))
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	list, err := c.List(ctx, "t")
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %+v %v", list, err)
	}
	l := list[1]
	lgtest.Holds(t, fmt.Sprintf("released task in list: %+v", l), lgtest.Is("task k", l.Task == "k"), lgtest.Is("not owned", !l.Owned()),
		lgtest.Is("fence at the released epoch", l.Fence == g.Epoch), lgtest.Is("state version 2", l.StateVersion == 2),
		lgtest.Is("last operation second", l.LastOperation == "second"))
	if l := list[0]; l.Task != "idle" || l.Owner != "worker" || l.TTLLeft < 1 {
		t.Fatalf("held task in list: %+v", l)
	}
}

func TestWatch(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	pre := lgtest.Claim(t, s, "t", "before")
	lgtest.Claim(t, s, "other-tenant", "ignored")
	events, err := c.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, events, coordinator.EventOwned, "before", pre.Epoch)
	g := lgtest.Claim(t, s, "t", "k")
	expect(t, events, coordinator.EventClaimed, "k", g.Epoch)
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	expect(t, events, coordinator.EventVacated, "k", g.Epoch)
}

// TestWatchSurvivesCompaction cuts a watcher off from the cluster, changes
// ownership and compacts the history it missed, then lets it back with its
// listings failing at first: it must retry the listing until one answers,
// and report what changed.
func TestWatchSurvivesCompaction(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	cl.WaitLeader(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.Coordinator(t, cl)
	// The watcher talks to member 0 only.
	lost := &lgtest.TxnAnswers{Err: status.Error(codes.Unavailable, "answer lost (test)")}
	wcli := memberClientWith(t, cl, 0, lost)
	w := lgtest.CoordinatorOf(t, wcli)
	events, err := w.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	gone := lgtest.Claim(t, s, "t", "gone")
	expect(t, events, coordinator.EventClaimed, "gone", gone.Epoch)

	cl.Member(0).Stop(t)
	if err := c.Release(ctx, gone); err != nil {
		t.Fatal(err)
	}
	fresh := lgtest.Claim(t, s, "t", "fresh")
	if _, err := c.Client().Compact(ctx, fresh.Epoch); err != nil {
		t.Fatal(err)
	}
	lost.Arm()
	cl.Member(0).Restart(t)
	lgtest.Wait(t, lost.Replaced(), "a failed re-listing (its answer lost)")
	lost.Disarm()

	expect(t, events, coordinator.EventVacated, "gone", gone.Epoch)
	expect(t, events, coordinator.EventOwned, "fresh", fresh.Epoch)
}

func expect(t *testing.T, events <-chan coordinator.OwnershipEvent, typ coordinator.EventType, task string, epoch int64) {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("watch closed")
		}
		if ev.Type != typ || ev.Ownership.Task != task || ev.Ownership.Epoch != epoch {
			t.Fatalf("event %s %+v; want %s of %s at epoch %d", ev.Type, ev.Ownership, typ, task, epoch)
		}
	case <-time.After(lgtest.Timeout):
		t.Fatalf("no %s event for %s", typ, task)
	}
}

// TestATaskNobodyHoldsIsNeitherStaleNorTimed: a task released, whose fence
// stays, reads in Owner and List as held by nobody, not stale (there is no
// owner key to be older than the realm) and with its TTL unknown (-1, not
// 0 seconds left), before a realm rotation and after it; the owner key the
// rotation cut off is the one that reads stale.
func TestATaskNobodyHoldsIsNeitherStaleNorTimed(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "free")
	lgtest.Claim(t, s, "t", "held")
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	for _, rotated := range []bool{false, true} {
		if rotated {
			if _, err := c.RotateRealm(ctx); err != nil {
				t.Fatal(err)
			}
		}
		own, err := c.Owner(ctx, "t", "free")
		lgtest.Holds(t, fmt.Sprintf("Owner of the released task (rotated %v): %+v %v", rotated, own, err),
			lgtest.Is("no error", err == nil), lgtest.Is("nobody", own.Owner == ""), lgtest.Is("fence at the released epoch", own.Fence == g.Epoch),
			lgtest.Is("not stale", !own.Stale), lgtest.Is("TTL unknown (-1)", own.TTLLeft == -1))
		list, err := c.List(ctx, "t")
		if err != nil || len(list) != 2 {
			t.Fatalf("List (rotated %v): %+v %v; want the two tasks", rotated, list, err)
		}
		free, held := list[0], list[1]
		lgtest.Holds(t, fmt.Sprintf("List's released task (rotated %v): %+v", rotated, free),
			lgtest.Is("task free", free.Task == "free"), lgtest.Is("nobody", free.Owner == ""),
			lgtest.Is("fence at the released epoch", free.Fence == g.Epoch),
			lgtest.Is("not stale", !free.Stale), lgtest.Is("TTL unknown (-1)", free.TTLLeft == -1))
		lgtest.Holds(t, fmt.Sprintf("List's held task (rotated %v): %+v", rotated, held),
			lgtest.Is("task held", held.Task == "held"), lgtest.Is("worker's key", held.Owner == "worker"),
			lgtest.Is("stale only after the rotation", held.Stale == rotated), lgtest.Is("owned only before it", held.Owned() == !rotated),
			lgtest.Is("TTL read only while owned", (held.TTLLeft >= 1) == !rotated && (held.TTLLeft == -1) == rotated))
	}
}

// TestOwnerReadsNoSiblingTask: Owner of a task reads that task's keys
// alone. A task never claimed, or released, whose name starts another
// task's (job of job-1), shows nobody, and its own fence (none, or its
// released epoch), never the held sibling's holder or fence.
func TestOwnerReadsNoSiblingTask(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	sib := lgtest.Claim(t, s, "t", "job-1")
	own, err := c.Owner(ctx, "t", "job")
	lgtest.Holds(t, fmt.Sprintf("Owner of job, never claimed, beside job-1 held: %+v %v", own, err),
		lgtest.Is("no error", err == nil), lgtest.Is("nobody", own.Owner == "" && own.Epoch == 0 && own.Lease == 0),
		lgtest.Is("no fence", own.Fence == 0), lgtest.Is("TTL unknown (-1)", own.TTLLeft == -1))
	g := lgtest.Claim(t, s, "t", "job")
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	own, err = c.Owner(ctx, "t", "job")
	lgtest.Holds(t, fmt.Sprintf("Owner of job, released, beside job-1 held: %+v %v", own, err),
		lgtest.Is("no error", err == nil), lgtest.Is("nobody", own.Owner == "" && own.Epoch == 0),
		lgtest.Is("its own fence", own.Fence == g.Epoch))
	own, err = c.Owner(ctx, "t", "job-1")
	lgtest.Holds(t, fmt.Sprintf("Owner of job-1: %+v %v", own, err),
		lgtest.Is("no error", err == nil), lgtest.Is("held at its epoch", own.Owned() && own.Epoch == sib.Epoch && own.Fence == sib.Epoch))
}
