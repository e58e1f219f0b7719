package retention_test

import (
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/core"
	"github.com/leasegate/leasegate/retention"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestMarksAndPlans pins what the collector's marks and plans promise
// (each subtest on its own prefix and clock, one cluster).
func TestMarksAndPlans(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)

	// A mark keeps its time to the nanosecond: a mark 0.5s short of one
	// window old is not old (pinned for indep/gc/mark-seconds).
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
	// older than it (pinned for indep/gc/horizon-mark-collected).
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
	// batch is deleted (pinned for indep/gc/batch-all-kept).
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

	// A scan reads every key once, across pages of a thousand (pinned for
	// indep/gc/page-overlap).
	t.Run("more marks than one page", func(t *testing.T) {
		f := newFixture(t, cl)
		ctx := lgtest.Ctx(t)
		const n = 1001
		old := f.clk.now().Format(time.RFC3339Nano)
		for from := 1; from <= n; from += 100 {
			var puts []clientv3.Op
			for i := from; i < from+100 && i <= n; i++ {
				puts = append(puts, clientv3.OpPut(core.KeysOf(f.c).RetentionMark(int64(i)), old))
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
	// after the clock was read is never under a mark of that time (pinned
	// for indep/gc/mark-clock-before-revision).
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
// is invalid_input, and nothing is deleted (pinned for
// indep/gc/prefix-no-slash, indep/gc/min-version-zero).
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
