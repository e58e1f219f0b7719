package retention_test

import (
	"fmt"

	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/core"
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
		resp, err := f.cli.Get(lgtest.Ctx(t), core.KeysOf(f.c).RetentionMarks(), clientv3.WithPrefix(), clientv3.WithCountOnly())
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
