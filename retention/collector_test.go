package retention_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/retention"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

const window = time.Hour

// clock is a settable clock: what passes is the retention window, which a
// test cannot wait out.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

var prefixes atomic.Int64

// fixture is a coordinator on its own prefix (so that marks of one test do
// not age another's records), a collector on it, and its clock.
type fixture struct {
	c   *coordinator.Coordinator
	gc  *retention.Collector
	clk *clock
	cli *clientv3.Client
}

func newFixture(t *testing.T, cl *embedtest.Cluster) fixture {
	t.Helper()
	cli := cl.Client(t)
	c := lgtest.CoordinatorOf(t, cli, coordinator.WithPrefix(fmt.Sprintf("/gc%d", prefixes.Add(1))))
	clk := newClock()
	gc, err := retention.New(c, retention.WithWindow(window), retention.WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	return fixture{c: c, gc: gc, clk: clk, cli: cli}
}

func (f fixture) run(t *testing.T) retention.Result {
	t.Helper()
	_, r, err := f.gc.Run(lgtest.Ctx(t))
	if err != nil {
		t.Fatalf("gc run: %v", err)
	}
	return r
}

func (f fixture) commit(t *testing.T, g coordinator.Grant, op string, expected int64) (fencedtxn.Receipt, error) {
	t.Helper()
	return fencedtxn.Commit(lgtest.Ctx(t), f.c, g, fencedtxn.Intent{Tenant: g.Tenant, Task: g.Task, Operation: op,
		Value: []byte("v-" + op), ExpectedVersion: expected})
}

func (f fixture) exists(t *testing.T, key string) bool {
	t.Helper()
	resp, err := f.cli.Get(lgtest.Ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Kvs) == 1
}

func (f fixture) stateVersion(t *testing.T, tenant, task string) int64 {
	t.Helper()
	resp, err := f.cli.Get(lgtest.Ctx(t), f.c.Keys().State(tenant, task))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].Version
}

func deleted(r retention.Result, key string) bool {
	for _, c := range r.Deleted {
		if c.Key == key {
			return true
		}
	}
	return false
}

func TestRetention(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)

	t.Run("receipts within the window, version_conflict past it", func(t *testing.T) {
		f := newFixture(t, cl)
		g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "window")
		if _, err := f.commit(t, g, "op-1", 0); err != nil {
			t.Fatal(err)
		}
		opKey := f.c.Keys().Op("t", "window", "op-1")
		if r := f.run(t); len(r.Deleted) != 0 { // first run: a mark, nothing old yet
			t.Fatalf("first run deleted %+v", r.Deleted)
		}
		f.clk.advance(window / 2)
		if r := f.run(t); len(r.Deleted) != 0 {
			t.Fatalf("run within the window deleted %+v", r.Deleted)
		}
		rc, err := f.commit(t, g, "op-1", 0)
		if err != nil || rc.Disposition != coordinator.HistoricalRetry {
			t.Fatalf("retry within the window: %+v %v; want historical_retry", rc, err)
		}
		// op-2 is written after the mark of that run: a window later, op-1 is
		// one window old and op-2 is not.
		if _, err := f.commit(t, g, "op-2", 1); err != nil {
			t.Fatal(err)
		}
		f.clk.advance(window)
		if r := f.run(t); !deleted(r, opKey) || deleted(r, f.c.Keys().Op("t", "window", "op-2")) {
			t.Fatalf("run past op-1's window: %+v; want op-1 collected and op-2 kept", r)
		}
		if rc, err := f.commit(t, g, "op-2", 1); err != nil || rc.Disposition != coordinator.HistoricalRetry {
			t.Fatalf("retry of op-2 within its window: %+v %v; want historical_retry", rc, err)
		}
		// The record is gone; the retry is refused by the version compare,
		// not applied a second time.
		_, err = f.commit(t, g, "op-1", 0)
		lgtest.Want(t, err, coordinator.VersionConflict)
		if v := f.stateVersion(t, "t", "window"); v != 2 {
			t.Fatalf("state version %d after the retry, want 2", v)
		}
		// Marks older than the horizon are collected too.
		f.clk.advance(2 * window)
		f.run(t)
		f.clk.advance(2 * window)
		f.run(t)
		resp, err := f.cli.Get(lgtest.Ctx(t), store.Of(f.c).Keys().RetentionMarks(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count > 2 {
			t.Fatalf("%d marks after 5 runs (%v); want at most 2", resp.Count, err)
		}
	})

	t.Run("an operation whose state was reset is kept", func(t *testing.T) {
		f := newFixture(t, cl)
		g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "reset")
		if _, err := f.commit(t, g, "op-1", 0); err != nil {
			t.Fatal(err)
		}
		// An operator deletes the state key: its version starts again at 0,
		// so only the operation record stands between a retry and a second
		// application.
		if _, err := f.cli.Delete(lgtest.Ctx(t), f.c.Keys().State("t", "reset")); err != nil {
			t.Fatal(err)
		}
		f.run(t)
		f.clk.advance(2 * window)
		r := f.run(t)
		if len(r.Kept) != 1 || r.Kept[0].Key != f.c.Keys().Op("t", "reset", "op-1") {
			t.Fatalf("result %+v; want the operation record kept by its guard", r)
		}
		rc, err := f.commit(t, g, "op-1", 0)
		if err != nil || rc.Disposition != coordinator.HistoricalRetry {
			t.Fatalf("retry: %+v %v; want historical_retry, not a second commit", rc, err)
		}
	})

	t.Run("a record rewritten after the plan is kept", func(t *testing.T) {
		f := newFixture(t, cl)
		g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "rewritten")
		if _, err := f.commit(t, g, "op-1", 0); err != nil {
			t.Fatal(err)
		}
		f.run(t)
		f.clk.advance(2 * window)
		if err := f.gc.Mark(lgtest.Ctx(t)); err != nil {
			t.Fatal(err)
		}
		p, err := f.gc.Plan(lgtest.Ctx(t))
		if err != nil || len(p.Candidates) == 0 {
			t.Fatalf("plan: %+v %v", p, err)
		}
		opKey := f.c.Keys().Op("t", "rewritten", "op-1")
		got, err := f.cli.Get(lgtest.Ctx(t), opKey)
		if err != nil || len(got.Kvs) != 1 {
			t.Fatal(err)
		}
		if _, err := f.cli.Put(lgtest.Ctx(t), opKey, string(got.Kvs[0].Value)); err != nil {
			t.Fatal(err)
		}
		r, err := f.gc.Apply(lgtest.Ctx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if deleted(r, opKey) || !f.exists(t, opKey) {
			t.Fatalf("a record rewritten after the plan was deleted: %+v", r)
		}
	})

	t.Run("idle fences go, a stale grant is still refused, owned fences stay", func(t *testing.T) {
		f := newFixture(t, cl)
		ctx := lgtest.Ctx(t)
		s := lgtest.Session(t, f.c, "worker", 30*time.Second)
		old := lgtest.Claim(t, s, "t", "idle")
		if err := f.c.Release(ctx, old); err != nil {
			t.Fatal(err)
		}
		held := lgtest.Claim(t, s, "t", "held")
		f.run(t)
		fresh := lgtest.Claim(t, s, "t", "fresh") // released after the mark: not idle for a window yet
		if err := f.c.Release(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		f.clk.advance(2 * window)
		p, r, err := f.gc.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		idleFence, heldFence := f.c.Keys().Fence("t", "idle"), f.c.Keys().Fence("t", "held")
		if !deleted(r, idleFence) || f.exists(t, idleFence) {
			t.Fatalf("idle fence not collected: %+v", r)
		}
		if !f.exists(t, heldFence) {
			t.Fatal("the fence of an owned task was collected")
		}
		if !f.exists(t, f.c.Keys().Fence("t", "fresh")) {
			t.Fatal("a fence written within the window was collected")
		}
		// The stale grant (its lease still alive) is refused without its fence.
		_, err = f.commit(t, old, "late", 0)
		lgtest.Want(t, err, coordinator.StaleOwner)
		// A new claim gets a larger epoch; the old grant stays refused.
		again := lgtest.Claim(t, s, "t", "idle")
		if again.Epoch <= old.Epoch {
			t.Fatalf("epoch %d after collection, old %d: not larger", again.Epoch, old.Epoch)
		}
		_, err = f.commit(t, old, "late", 0)
		lgtest.Want(t, err, coordinator.StaleOwner)

		// Apply does not trust a plan: a plan naming an owned task's fence
		// is refused by the owner-key compare.
		got, err := f.cli.Get(ctx, heldFence)
		if err != nil || len(got.Kvs) != 1 {
			t.Fatal(err)
		}
		forged := p
		forged.Candidates = []retention.Candidate{{Kind: retention.KindFence, Key: heldFence, Tenant: "t", Task: "held",
			ModRevision: got.Kvs[0].ModRevision}}
		r, err = f.gc.Apply(ctx, forged)
		if err != nil || len(r.Kept) != 1 || !f.exists(t, heldFence) {
			t.Fatalf("apply of an owned fence: %+v %v; want it kept", r, err)
		}
		if _, err := f.commit(t, held, "op-1", 0); err != nil {
			t.Fatalf("the holder's commit after gc: %v", err)
		}
	})

	t.Run("a bad plan is invalid input, nothing written", func(t *testing.T) {
		f := newFixture(t, cl)
		for _, c := range []retention.Candidate{
			{Kind: retention.KindMark, Key: "/elsewhere/x", ModRevision: 1},
			{Kind: retention.KindOp, Key: f.c.Keys().Op("t", "k", "op"), ModRevision: 1},
			{Kind: "state", Key: f.c.Keys().State("t", "k"), ModRevision: 1},
			{Kind: retention.KindFence, Key: f.c.Keys().Fence("t", "k")},
		} {
			lgtest.RefusedWritingNothing(t, f.cli, "/", coordinator.InvalidInput, func() error {
				_, err := f.gc.Apply(lgtest.Ctx(t), retention.Plan{Candidates: []retention.Candidate{c}})
				return err
			})
		}
		for _, o := range []retention.Option{retention.WithWindow(0), retention.WithClock(nil), retention.WithLogger(nil)} {
			_, err := retention.New(f.c, o)
			lgtest.Want(t, err, coordinator.InvalidInput)
		}
	})
}

// TestConcurrentCollectors: two collectors applying one plan at once delete
// each key once between them; the loser of each race keeps it (its guard
// fails), and neither errs.
func TestConcurrentCollectors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, embedtest.NewCluster(t))
	s := lgtest.Session(t, f.c, "worker", 30*time.Second)
	g := lgtest.Claim(t, s, "t", "busy")
	for i := 0; i < 120; i++ { // more than two batches
		if _, err := f.commit(t, g, fmt.Sprintf("op-%d", i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	f.run(t)
	f.clk.advance(2 * window)
	if err := f.gc.Mark(lgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	p, err := f.gc.Plan(lgtest.Ctx(t))
	if err != nil || len(p.Candidates) < 120 {
		t.Fatalf("plan: %d candidates, %v", len(p.Candidates), err)
	}
	results := make(chan retention.Result, 2)
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			r, err := f.gc.Apply(lgtest.Ctx(t), p)
			results <- r
			errs <- err
		}()
	}
	seen := map[string]int{}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		for _, c := range (<-results).Deleted {
			seen[c.Key]++
		}
	}
	for _, c := range p.Candidates {
		if seen[c.Key] != 1 {
			t.Fatalf("%s deleted %d times between two collectors", c.Key, seen[c.Key])
		}
	}
}

// TestMarksAndPlans pins what the collector's marks and plans promise
// (each subtest on its own prefix and clock, one cluster).
func TestMarksAndPlans(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)

	// A mark keeps its time to the nanosecond: a mark 0.5s short of one
	// window old is not old.
	t.Run("a mark just younger than the window is not old", func(t *testing.T) {
		f := newFixture(t, cl)
		ctx := lgtest.Ctx(t)
		f.clk.advance(900 * time.Millisecond)
		if err := f.gc.Mark(ctx); err != nil {
			t.Fatal(err)
		}
		f.clk.advance(window - 500*time.Millisecond)
		if p, err := f.gc.Plan(ctx); err != nil || p.Horizon != 0 {
			t.Fatalf("plan 0.5s before the mark is a window old: horizon %d %v; want 0", p.Horizon, err)
		}
	})

	// The horizon only moves forward: its own mark survives the marks
	// older than it.
	t.Run("the horizon's mark is kept", func(t *testing.T) {
		f := newFixture(t, cl)
		ctx := lgtest.Ctx(t)
		for i := 0; i < 2; i++ {
			if err := f.gc.Mark(ctx); err != nil {
				t.Fatal(err)
			}
			f.clk.advance(time.Minute)
		}
		f.clk.advance(window)
		p, err := f.gc.Plan(ctx)
		if err != nil || p.Horizon == 0 || len(p.Candidates) != 1 {
			t.Fatalf("plan: %+v %v; want a horizon and the older mark", p, err)
		}
		if _, err := f.gc.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
		if again, err := f.gc.Plan(ctx); err != nil || again.Horizon != p.Horizon {
			t.Fatalf("horizon after applying %d, %v; want it unchanged at %d", again.Horizon, err, p.Horizon)
		}
	})

	// A guard that fails keeps its own candidate only; the rest of its
	// batch is deleted.
	t.Run("one failed guard keeps one candidate", func(t *testing.T) {
		f := newFixture(t, cl)
		ctx := lgtest.Ctx(t)
		for i := 0; i < 4; i++ {
			if err := f.gc.Mark(ctx); err != nil {
				t.Fatal(err)
			}
			f.clk.advance(time.Minute)
		}
		f.clk.advance(window)
		p, err := f.gc.Plan(ctx)
		if err != nil || len(p.Candidates) != 3 {
			t.Fatalf("plan: %+v %v; want the three older marks", p, err)
		}
		moved := p.Candidates[1].Key
		resp, err := f.cli.Get(ctx, moved)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s: %v %v", moved, resp, err)
		}
		if _, err := f.cli.Put(ctx, moved, string(resp.Kvs[0].Value)); err != nil { // its ModRevision moves
			t.Fatal(err)
		}
		r, err := f.gc.Apply(ctx, p)
		if err != nil || len(r.Kept) != 1 || r.Kept[0].Key != moved || len(r.Deleted) != 2 {
			t.Fatalf("apply: %+v %v; want %s kept and the other two deleted", r, err, moved)
		}
	})

	// A scan reads every key once, across pages of a thousand.
	t.Run("more marks than one page", func(t *testing.T) {
		f := newFixture(t, cl)
		ctx := lgtest.Ctx(t)
		const n = 1001
		old := f.clk.now().Format(time.RFC3339Nano)
		for from := 1; from <= n; from += 100 {
			var puts []clientv3.Op
			for i := from; i < from+100 && i <= n; i++ {
				puts = append(puts, clientv3.OpPut(store.Of(f.c).Keys().RetentionMark(int64(i)), old))
			}
			if _, err := f.cli.Txn(ctx).Then(puts...).Commit(); err != nil {
				t.Fatal(err)
			}
		}
		f.clk.advance(2 * window)
		p, err := f.gc.Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, c := range p.Candidates {
			if seen[c.Key] {
				t.Fatalf("candidate %s listed twice", c.Key)
			}
			seen[c.Key] = true
		}
		if len(p.Candidates) != n-1 || p.Horizon != n {
			t.Fatalf("plan over %d marks: horizon %d, %d candidates; want %d and %d", n, p.Horizon, len(p.Candidates), n, n-1)
		}
	})

	// A mark's time is read after its revision is learned: a commit made
	// after the clock was read is never under a mark of that time.
	t.Run("a commit made as the mark's clock is read is not under that mark", func(t *testing.T) {
		base := newFixture(t, cl)
		ctx := lgtest.Ctx(t)
		g := lgtest.Claim(t, lgtest.Session(t, base.c, "worker", 30*time.Second), "t", "late")
		var armed atomic.Bool
		clk := func() time.Time {
			now := base.clk.now()
			if armed.CompareAndSwap(true, false) {
				// The commit lands as the clock is read, and is dated half
				// a window later than this reading.
				if _, err := base.commit(t, g, "late-op", 0); err != nil {
					t.Error(err)
				}
				base.clk.advance(window / 2)
			}
			return now
		}
		gc, err := retention.New(base.c, retention.WithWindow(window), retention.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		if err := gc.Mark(ctx); err != nil {
			t.Fatal(err)
		}
		base.clk.advance(window/2 + time.Minute) // the mark is a window old, the commit half a window
		if _, r, err := gc.Run(ctx); err != nil || deleted(r, base.c.Keys().Op("t", "late", "late-op")) {
			t.Fatalf("run: %+v %v; the commit only half a window old was collected", r, err)
		}
	})
}

// TestApplyRefusesCandidatesItCannotGuard: a hand-edited plan naming a key
// under a sibling prefix (/gcN-x beside /gcN), or an operation record
// without the version it committed (its guard would then compare nothing),
// is invalid_input, and nothing is deleted.
func TestApplyRefusesCandidatesItCannotGuard(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	f := newFixture(t, cl)
	ctx := lgtest.Ctx(t)
	sibling := f.c.Keys().Prefix() + "-x/retention/marks/00000000000000000001"
	put, err := f.cli.Put(ctx, sibling, time.Unix(0, 0).Format(time.RFC3339Nano))
	if err != nil {
		t.Fatal(err)
	}
	g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "k")
	rc, err := f.commit(t, g, "op", 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]retention.Candidate{
		"a key under a sibling prefix": {Kind: retention.KindMark, Key: sibling, ModRevision: put.Header.Revision},
		"an operation without its version": {Kind: retention.KindOp, Key: f.c.Keys().Op("t", "k", "op"), Tenant: "t", Task: "k",
			Operation: "op", ModRevision: rc.Revision},
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, f.cli, "/", coordinator.InvalidInput, func() error {
				_, err := f.gc.Apply(ctx, retention.Plan{Candidates: []retention.Candidate{c}})
				return err
			})
		})
	}
}

// TestPlanKeyMustMatchItsFields: a candidate whose key is not the key its
// kind, tenant, task and operation name is invalid input and nothing is
// deleted — even when its guard would hold, as here for a live owner key
// passed off as the fence of an idle task.
func TestPlanKeyMustMatchItsFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t, embedtest.NewCluster(t))
	g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "live")
	k := f.c.Keys()
	for _, c := range []retention.Candidate{
		{Kind: retention.KindFence, Key: k.Owner("t", "live"), Tenant: "t", Task: "idle", ModRevision: g.Epoch},
		{Kind: retention.KindOp, Key: k.Fence("t", "live"), Tenant: "t", Task: "live", Operation: "op", ModRevision: g.Epoch, MinStateVersion: 1},
	} {
		lgtest.RefusedWritingNothing(t, f.cli, "/", coordinator.InvalidInput, func() error {
			_, err := f.gc.Apply(lgtest.Ctx(t), retention.Plan{Candidates: []retention.Candidate{c}})
			return err
		})
	}
	if own, err := f.c.Owner(lgtest.Ctx(t), "t", "live"); err != nil || own.Epoch != g.Epoch {
		t.Fatalf("owner after the refused plans: %+v %v", own, err)
	}
}

// TestMarkCandidateMustBeAMark: a "mark" candidate is deleted only if its
// key is a retention mark of this keyspace, as Mark writes it. A live owner
// key named as a mark (with its real ModRevision, so the guard would hold),
// the owner key of a sibling keyspace (/gcN0 is not under /gcN), the marks
// prefix itself, and a key under it that names no revision are invalid
// input, and nothing is deleted.
func TestMarkCandidateMustBeAMark(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	f := newFixture(t, cl)
	k := f.c.Keys()
	lk := store.Of(f.c).Keys()
	sibling := lgtest.CoordinatorOf(t, f.cli, coordinator.WithPrefix(k.Prefix()+"0"))
	g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "live")
	sg := lgtest.Claim(t, lgtest.Session(t, sibling, "worker", 30*time.Second), "t", "live")
	if _, err := f.cli.Put(lgtest.Ctx(t), lk.RetentionMarks()+"not-a-revision", "x"); err != nil {
		t.Fatal(err)
	}
	junk, err := f.cli.Get(lgtest.Ctx(t), lk.RetentionMarks()+"not-a-revision")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []retention.Candidate{
		{Kind: retention.KindMark, Key: k.Owner("t", "live"), ModRevision: g.Epoch},
		{Kind: retention.KindMark, Key: sibling.Keys().Owner("t", "live"), ModRevision: sg.Epoch},
		{Kind: retention.KindMark, Key: lk.RetentionMarks(), ModRevision: g.Epoch},
		{Kind: retention.KindMark, Key: lk.RetentionMarks() + "not-a-revision", ModRevision: junk.Kvs[0].ModRevision},
	} {
		lgtest.RefusedWritingNothing(t, f.cli, "/", coordinator.InvalidInput, func() error {
			_, err := f.gc.Apply(lgtest.Ctx(t), retention.Plan{Candidates: []retention.Candidate{c}})
			return err
		})
	}
	for _, x := range []struct {
		c *coordinator.Coordinator
		g coordinator.Grant
	}{{f.c, g}, {sibling, sg}} {
		if err := x.c.Current(lgtest.Ctx(t), x.g); err != nil {
			t.Fatalf("grant of %s after the refused plans: %v", x.c.Keys().Prefix(), err)
		}
	}
	// A real mark, as Mark wrote it, is still collected.
	if err := f.gc.Mark(lgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	marks, err := f.cli.Get(lgtest.Ctx(t), lk.RetentionMarks()+"0", clientv3.WithPrefix())
	if err != nil || len(marks.Kvs) != 1 {
		t.Fatalf("marks: %v %v", marks, err)
	}
	m := marks.Kvs[0]
	r, err := f.gc.Apply(lgtest.Ctx(t), retention.Plan{Candidates: []retention.Candidate{{Kind: retention.KindMark, Key: string(m.Key), ModRevision: m.ModRevision}}})
	if err != nil || len(r.Deleted) != 1 {
		t.Fatalf("apply of a real mark: %+v %v", r, err)
	}
}

// noop is an adapter that is never dispatched to: records here are
// proposed, then rejected or left open.
type noop struct{}

func (noop) Kind() string              { return "noop" }
func (noop) Contract() ledger.Contract { return ledger.Contract{} }
func (noop) Precondition(context.Context, ledger.Effect) (ledger.Observation, error) {
	return ledger.Observation{Digest: "world", At: time.Now()}, nil
}
func (noop) Apply(context.Context, ledger.Call) (ledger.Evidence, error) {
	return ledger.Evidence{}, errors.New("noop: never applied")
}
func (noop) Observe(context.Context, ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	return ledger.Inconclusive, ledger.Evidence{}, nil
}

func TestRetentionLedger(t *testing.T) {
	t.Parallel()
	f := newFixture(t, embedtest.NewCluster(t))
	ctx := lgtest.Ctx(t)
	l, err := ledger.New(f.c, ledger.WithAdapters(noop{}))
	if err != nil {
		t.Fatal(err)
	}
	g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "effects")
	e := ledger.Effect{Kind: "noop", Target: "x", Params: []byte(`{"a":1}`), Policy: "p1"}
	pre := ledger.Observation{Digest: "world", At: time.Now()}
	for _, op := range []string{"done", "open", "late"} {
		if _, err := l.Propose(ctx, g, op, e, pre); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Reject(ctx, g, "done", "not needed"); err != nil {
		t.Fatal(err)
	}
	f.run(t)
	if _, err := l.Reject(ctx, g, "late", "resolved after the mark"); err != nil {
		t.Fatal(err)
	}
	f.clk.advance(2 * window)
	r := f.run(t)
	k := store.Of(f.c).Keys()
	if !deleted(r, k.Effect("t", "effects", "done")) {
		t.Fatalf("resolved record past the window not collected: %+v", r)
	}
	for _, op := range []string{"open", "late"} {
		if deleted(r, k.Effect("t", "effects", op)) || !f.exists(t, k.Effect("t", "effects", op)) {
			t.Fatalf("record %s collected: %+v", op, r)
		}
	}
	journal := func(op string) int64 {
		resp, err := f.cli.Get(ctx, k.JournalOperationPrefix("t", "effects", op), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if n := journal("done"); n != 0 {
		t.Fatalf("%d journal entries of a collected record remain", n)
	}
	if journal("open") != 1 || journal("late") != 2 {
		t.Fatalf("journal of kept records: open %d, late %d; want 1 and 2", journal("open"), journal("late"))
	}

	// A record that moved after the plan is kept, journal and all.
	f.clk.advance(2 * window)
	if err := f.gc.Mark(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := f.gc.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.cli.Get(ctx, k.Effect("t", "effects", "late"))
	if err != nil || len(got.Kvs) != 1 {
		t.Fatal(err)
	}
	if _, err := f.cli.Put(ctx, k.Effect("t", "effects", "late"), string(got.Kvs[0].Value)); err != nil {
		t.Fatal(err)
	}
	r, err = f.gc.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if deleted(r, k.Effect("t", "effects", "late")) || journal("late") != 2 {
		t.Fatalf("a record rewritten after the plan was collected: %+v", r)
	}
}
