package ledger

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// rpcCounter counts the unary RPCs a client sends, by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (rc *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	rc.mu.Lock()
	rc.n[method]++
	rc.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the counts since the last take.
func (rc *rpcCounter) take() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := rc.n
	rc.n = map[string]int{}
	return n
}

// TestDispatchIsTwoRoundTrips pins the floor of issue 16's measured
// target: a dispatch of a record this ledger authorized is two etcd round
// trips, the claim Txn and the outcome Txn, and nothing else (the claim's
// fenced Txn is the grant check, its Else the read a stale hint needs);
// Propose and Authorize one each, so the lifecycle is four. A ledger that
// did not make the record (no hint) reads it once more. A read or a Txn
// added to the path makes this red.
func TestDispatchIsTwoRoundTrips(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	rc := &rpcCounter{n: map[string]int{}}
	cli, err := cl.NewClient(grpc.WithChainUnaryInterceptor(rc.intercept))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c, err := coordinator.New(lgtest.Ctx(t), cli)
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider("db-promote")
	l, err := New(c, WithAdapters(p))
	if err != nil {
		t.Fatal(err)
	}
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker-a", 10*time.Second, coordinator.WithoutKeepAlive()), tenant, task)
	ctx := lgtest.Ctx(t)
	txns := func(n int) map[string]int { return map[string]int{"/etcdserverpb.KV/Txn": n} }
	check := func(what string, want map[string]int) {
		t.Helper()
		if got := rc.take(); !maps.Equal(got, want) {
			t.Fatalf("%s sent %v, want %v", what, got, want)
		}
	}
	lifecycle := func(l *Ledger, operation string) {
		t.Helper()
		pre, err := p.Precondition(ctx, promote("db-b"))
		if err != nil {
			t.Fatal(err)
		}
		rc.take()
		rec, err := l.Propose(ctx, g, operation, promote("db-b"), pre)
		if err != nil {
			t.Fatal(err)
		}
		check("propose", txns(1))
		if _, err := l.Authorize(ctx, g, operation, Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
			PreconditionDigest: pre.Digest, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		check("authorize", txns(1))
	}
	dispatch := func(l *Ledger, operation string) {
		t.Helper()
		if out, err := l.Dispatch(ctx, g, operation); err != nil || out.State != Confirmed {
			t.Fatalf("dispatch: %s %v", out.State, err)
		}
	}

	lifecycle(l, "op-1")
	dispatch(l, "op-1")
	check("a dispatch of a record this ledger authorized", txns(2))

	lifecycle(l, "op-2")
	cold, err := New(c, WithAdapters(p))
	if err != nil {
		t.Fatal(err)
	}
	dispatch(cold, "op-2")
	check("a dispatch by a ledger without the record's hint", txns(3))
}
