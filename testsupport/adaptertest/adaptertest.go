// Package adaptertest runs a reference adapter (adapters/...) through the
// real ledger on a real embedded etcd: one task, two workers, the
// propose → authorize → dispatch path, a takeover, and checks of the
// journal. Each adapter's tests use it against its real provider
// (testsupport/realprov).
package adaptertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// The task every test works on.
const (
	Tenant = "northstar"
	Task   = "checkout-failover"
)

// Env is a ledger on an embedded etcd with worker-a holding the task.
type Env struct {
	T   testing.TB
	Ctx context.Context
	C   *coordinator.Coordinator
	L   *ledger.Ledger
	A   *coordinator.Session // worker-a
	G   coordinator.Grant    // worker-a's grant
	Cl  *embedtest.Cluster

	offset atomic.Int64           // added to the ledger's clock (Advance)
	policy atomic.Pointer[string] // the current policy version (SetPolicy); nil: the effect's own
}

// New starts etcd, a coordinator, the ledger with adapters (and opts),
// and worker-a's grant of the task.
func New(t testing.TB, adapters []ledger.Adapter, opts ...ledger.Option) *Env {
	t.Helper()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	e := &Env{T: t, Ctx: lgtest.Ctx(t), C: c, Cl: cl}
	l, err := ledger.New(c, append([]ledger.Option{ledger.WithAdapters(adapters...),
		ledger.WithPolling(20*time.Millisecond, 200*time.Millisecond, 6),
		ledger.WithClock(e.now), ledger.WithPolicy(e.currentPolicy)}, opts...)...)
	if err != nil {
		t.Fatalf("ledger.New: %v", err)
	}
	e.L = l
	e.A = lgtest.Session(t, c, "worker-a", 10*time.Second)
	e.G = lgtest.Claim(t, e.A, Tenant, Task)
	return e
}

// now is the ledger's clock: real time, moved on by Advance.
func (e *Env) now() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) }

// Advance moves the ledger's clock on by d (an approval ages, say).
func (e *Env) Advance(d time.Duration) { e.offset.Add(int64(d)) }

// currentPolicy is the ledger's policy source: SetPolicy's version, or the
// effect's own.
func (e *Env) currentPolicy(_ context.Context, eff ledger.Effect) (string, error) {
	if p := e.policy.Load(); p != nil {
		return *p, nil
	}
	return eff.Policy, nil
}

// SetPolicy makes v the current policy version of every effect.
func (e *Env) SetPolicy(v string) { e.policy.Store(&v) }

// Authorized proposes operation with effect e under g, the world as the
// adapter sees it now, and authorizes exactly that (approver darius).
func (e *Env) Authorized(g coordinator.Grant, ad ledger.Adapter, operation string, eff ledger.Effect) ledger.Record {
	e.T.Helper()
	seen, err := ad.Precondition(e.Ctx, eff)
	if err != nil {
		e.T.Fatalf("precondition: %v", err)
	}
	rec, err := e.L.Propose(e.Ctx, g, operation, eff, seen)
	if err != nil {
		e.T.Fatalf("propose: %v", err)
	}
	rec, err = e.L.Authorize(e.Ctx, g, operation, ledger.Approval{Approver: "darius",
		ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, At: time.Now()})
	if err != nil {
		e.T.Fatalf("authorize: %v", err)
	}
	return rec
}

// Dispatch dispatches under g and fails the test on an error.
func (e *Env) Dispatch(g coordinator.Grant, operation string) ledger.Record {
	e.T.Helper()
	rec, err := e.L.Dispatch(e.Ctx, g, operation)
	if err != nil {
		e.T.Fatalf("dispatch: %v (record %+v)", err, rec)
	}
	return rec
}

// TakeOver ends worker-a's session (its lease revoked: the task is free at
// once) and gives the task to a new worker-b, whose grant it returns.
func (e *Env) TakeOver() coordinator.Grant {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.C.RevokeLease(ctx, e.A.Lease()); err != nil {
		e.T.Fatalf("revoke worker-a's lease: %v", err)
	}
	lgtest.WaitOwnerGone(e.T, e.C, Tenant, Task)
	b := lgtest.Session(e.T, e.C, "worker-b", 10*time.Second)
	g := lgtest.Claim(e.T, b, Tenant, Task)
	if g.Epoch <= e.G.Epoch {
		e.T.Fatalf("worker-b's epoch %d is not newer than %d", g.Epoch, e.G.Epoch)
	}
	return g
}

// Reconcile runs Reconcile under g and returns the operation's record.
func (e *Env) Reconcile(g coordinator.Grant, operation string) ledger.Record {
	e.T.Helper()
	if _, err := e.L.Reconcile(e.Ctx, g); err != nil {
		e.T.Fatalf("reconcile: %v", err)
	}
	rec, _ := e.Journal(operation)
	return rec
}

// Journal reads the operation's record and journal and checks the journal
// is a chain in transition order.
func (e *Env) Journal(operation string) (ledger.Record, []ledger.Transition) {
	e.T.Helper()
	rec, js, err := e.L.Record(e.Ctx, Tenant, Task, operation)
	if err != nil {
		e.T.Fatalf("record: %v", err)
	}
	var prev ledger.State
	var rev int64
	for i, j := range js {
		if j.Seq != int64(i+1) || j.From != prev || j.Revision <= rev {
			e.T.Fatalf("journal entry %d out of chain: %+v (previous to %s, rev %d)", i, j, prev, rev)
		}
		prev, rev = j.To, j.Revision
	}
	if len(js) > 0 && prev != rec.State {
		e.T.Fatalf("journal ends at %s, record is %s", prev, rec.State)
	}
	return rec, js
}

// States are the journal's states in order.
func States(js []ledger.Transition) []ledger.State {
	out := make([]ledger.State, len(js))
	for i, j := range js {
		out[i] = j.To
	}
	return out
}

// WantStates fails t unless the journal went through exactly want.
func (e *Env) WantStates(operation string, want ...ledger.State) []ledger.Transition {
	e.T.Helper()
	_, js := e.Journal(operation)
	got := States(js)
	if len(got) != len(want) {
		e.T.Fatalf("journal %v, want %v (%+v)", got, want, js)
	}
	for i := range got {
		if got[i] != want[i] {
			e.T.Fatalf("journal %v, want %v (%+v)", got, want, js)
		}
	}
	return js
}

// Counting wraps an adapter and counts its calls; Before and After, when
// set, run around the inner Apply (a fault: the world changing between
// revalidation and the call, the grant lost while it is in flight).
type Counting struct {
	ledger.Adapter
	Before, After         func()
	applies, observations atomic.Int64
}

// Apply counts and calls the inner Apply between Before and After.
func (c *Counting) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	c.applies.Add(1)
	if c.Before != nil {
		c.Before()
	}
	ev, err := c.Adapter.Apply(ctx, call)
	if c.After != nil {
		c.After()
	}
	return ev, err
}

// Observe counts and calls the inner Observe.
func (c *Counting) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	c.observations.Add(1)
	return c.Adapter.Observe(ctx, rec)
}

// Applies and Observations are the counts so far.
func (c *Counting) Applies() int { return int(c.applies.Load()) }

// Observations is how many times Observe was called.
func (c *Counting) Observations() int { return int(c.observations.Load()) }
