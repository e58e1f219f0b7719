package retention_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/core"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

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
	k := core.KeysOf(f.c)
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
