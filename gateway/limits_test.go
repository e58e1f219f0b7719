package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// wantLimit fails the test unless err is limit_exceeded naming limit
// (as limits.<what> <n>), with the code resource_exhausted.
func wantLimit(t *testing.T, err error, limit string) {
	t.Helper()
	if d := coordinator.DispositionOf(err); d != coordinator.LimitExceeded {
		t.Fatalf("got %v (%s), want limit_exceeded", err, d)
	}
	if !strings.Contains(err.Error(), limit) {
		t.Fatalf("%v: the refusal does not name the limit %q", err, limit)
	}
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() != connect.CodeResourceExhausted {
		t.Fatalf("%v: code %v, want resource_exhausted", err, ce.Code())
	}
}

// leaseIDs is every lease etcd knows.
func leaseIDs(t *testing.T, cli *clientv3.Client) []clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Leases(lgtest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]clientv3.LeaseID, 0, len(resp.Leases))
	for _, l := range resp.Leases {
		ids = append(ids, l.ID)
	}
	return ids
}

// unchanged fails the test unless etcd's keys and leases are what before
// and leases were: the refused call wrote nothing.
func unchanged(t *testing.T, w *world, before lgtest.Snapshot, leases []clientv3.LeaseID) {
	t.Helper()
	if d := before.Diff(lgtest.Snap(t, w.etcd, "/")); d != "" {
		t.Fatalf("a refused call wrote:\n%s", d)
	}
	if after := leaseIDs(t, w.etcd); len(after) != len(leases) {
		t.Fatalf("a refused call left %d leases, there were %d", len(after), len(leases))
	}
}

// waitGone waits, on a watch, until key is deleted.
func waitGone(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	ctx := lgtest.Ctx(t)
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return
	}
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut()) {
		if len(wr.Events) > 0 {
			return
		}
	}
	t.Fatalf("%s still present: %v", key, ctx.Err())
}

// A gateway given no limits holds each identity to 100 open sessions:
// 300 OpenSession calls of 24 h from one worker stop at the 101st, which
// is limit_exceeded naming limits.sessions, and writes nothing — no key,
// no lease. Another identity is not held by the first's count, and a
// closed session frees its unit.
func TestSessionsPerIdentityStopAtTheDefaultLimit(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	wa := w.client(r, "worker-a")
	var open []*client.Session
	var refused error
	for i := 0; i < 300 && refused == nil; i++ {
		before, leases := lgtest.Snap(t, w.etcd, "/"), leaseIDs(t, w.etcd)
		s, err := wa.OpenSession(ctx, 24*time.Hour)
		if err != nil {
			refused = err
			unchanged(t, w, before, leases)
			break
		}
		t.Cleanup(func() { _ = s.Close(lgtest.Ctx(t)) })
		open = append(open, s)
	}
	if len(open) != 100 {
		t.Fatalf("%d sessions opened before a refusal (%v); the default limit is 100", len(open), refused)
	}
	wantLimit(t, refused, "limits.sessions 100")
	w.session(w.client(r, "worker-b"), 24*time.Hour) // not worker-a's count

	if err := open[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	w.session(wa, 24*time.Hour)
	if _, err := wa.OpenSession(ctx, 24*time.Hour); coordinator.DispositionOf(err) != coordinator.LimitExceeded {
		t.Fatalf("the 101st open session: %v, want limit_exceeded", err)
	}
}

// The default limits are those the docs give (docs/gateway.md, "Limits").
func TestTheDefaultLimits(t *testing.T) {
	if got, want := gateway.DefaultLimits(), (gateway.Limits{Sessions: 100, Grants: 1000, Watches: 32}); got != want {
		t.Fatalf("DefaultLimits() = %+v, want %+v", got, want)
	}
}

// A session that expires frees its unit: an identity's own limit (here
// 2, on the identity) is reached, and once one session's lease expires
// the next open succeeds.
func TestAnExpiredSessionFreesItsUnit(t *testing.T) {
	w := newWorld(t)
	w.ids[0].Limits = &gateway.Limits{Sessions: 2}
	r := w.replica(gateway.WithLimits(gateway.Limits{Sessions: 50}))
	ctx := lgtest.Ctx(t)
	wa := w.client(r, "worker-a")
	short, err := wa.OpenSession(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	w.session(wa, time.Minute)
	_, err = wa.OpenSession(ctx, time.Minute)
	wantLimit(t, err, "limits.sessions 2")
	waitGone(t, w.etcd, store.Of(r.c).Keys().Limit("sessions", w.certs.IDs["worker-a"], coordinator.FormatLeaseID(short.Lease())))
	w.session(wa, time.Minute)
}

// The grants an identity holds are limited: a claim past the limit is
// limit_exceeded and writes nothing; a retried claim of a task the
// session holds takes no second unit; a release frees one, and so does
// the end of the session that held them.
func TestGrantsPerIdentityAreLimited(t *testing.T) {
	w := newWorld(t)
	r := w.replica(gateway.WithLimits(gateway.Limits{Grants: 2}))
	ctx := lgtest.Ctx(t)
	wa := w.client(r, "worker-a")
	s := w.session(wa, time.Minute)
	g1 := claim(t, s, tenant, "task-1")
	claim(t, s, tenant, "task-2")
	if again := claim(t, s, tenant, "task-1"); again != g1 {
		t.Fatalf("a retried claim got %+v, want the same grant %+v", again, g1)
	}
	before, leases := lgtest.Snap(t, w.etcd, "/"), leaseIDs(t, w.etcd)
	_, err := s.Claim(ctx, tenant, "task-3")
	wantLimit(t, err, "limits.grants 2")
	unchanged(t, w, before, leases)
	// Another session of the same identity counts against the same limit.
	_, err = w.session(wa, time.Minute).Claim(ctx, tenant, "task-3")
	wantLimit(t, err, "limits.grants 2")

	if err := wa.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	claim(t, s, tenant, "task-3")
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := w.session(wa, time.Minute)
	claim(t, s2, tenant, "task-1")
	claim(t, s2, tenant, "task-2")
}

// A gateway given no limits holds each identity to 1,000 tasks at once:
// the 1,001st claim is limit_exceeded naming limits.grants, writing
// nothing.
func TestGrantsPerIdentityStopAtTheDefaultLimit(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	s := w.session(w.client(r, "worker-a"), time.Minute)
	for i := range 1000 {
		if _, err := s.Claim(lgtest.Ctx(t), tenant, fmt.Sprintf("task-%d", i)); err != nil {
			t.Fatalf("claim %d: %v (the default limit is 1000)", i+1, err)
		}
	}
	before, leases := lgtest.Snap(t, w.etcd, "/"), leaseIDs(t, w.etcd)
	_, err := s.Claim(lgtest.Ctx(t), tenant, "task-1000")
	wantLimit(t, err, "limits.grants 1000")
	unchanged(t, w, before, leases)
}

// A refused claim (another holds the task) takes no unit of the limit.
func TestARefusedClaimKeepsNoUnit(t *testing.T) {
	w := newWorld(t)
	r := w.replica(gateway.WithLimits(gateway.Limits{Grants: 1}))
	ctx := lgtest.Ctx(t)
	claim(t, w.session(w.client(r, "worker-b"), time.Minute), tenant, "task-1")
	s := w.session(w.client(r, "worker-a"), time.Minute)
	if _, err := s.Claim(ctx, tenant, "task-1"); coordinator.DispositionOf(err) != coordinator.Busy {
		t.Fatalf("claim of a held task: %v, want busy", err)
	}
	claim(t, s, tenant, "task-2")
}

// The limits are counted in etcd, so every replica counts the same units:
// sessions opened through two replicas count together.
func TestLimitsAreCountedAcrossReplicas(t *testing.T) {
	w := newWorld(t)
	lim := gateway.WithLimits(gateway.Limits{Sessions: 2})
	a, b := w.replica(lim), w.replica(lim)
	w.session(w.client(a, "worker-a"), time.Minute)
	w.session(w.client(b, "worker-a"), time.Minute)
	_, err := w.client(a, "worker-a").OpenSession(lgtest.Ctx(t), time.Minute)
	wantLimit(t, err, "limits.sessions 2")
	_, err = w.client(b, "worker-a").OpenSession(lgtest.Ctx(t), time.Minute)
	wantLimit(t, err, "limits.sessions 2")
}

// Concurrent opens of one identity never pass its limit: the count is
// checked in the Txn that takes the unit.
func TestConcurrentOpensStopAtTheLimit(t *testing.T) {
	w := newWorld(t)
	a, b := w.replica(gateway.WithLimits(gateway.Limits{Sessions: 3})), w.replica(gateway.WithLimits(gateway.Limits{Sessions: 3}))
	ctx := lgtest.Ctx(t)
	var mu sync.Mutex
	opened, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 12 {
		r := a
		if i%2 == 1 {
			r = b
		}
		c := w.client(r, "worker-a")
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.OpenSession(ctx, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch coordinator.DispositionOf(err) {
			case coordinator.OK:
				opened++
				t.Cleanup(func() { _ = s.Close(lgtest.Ctx(t)) })
			case coordinator.LimitExceeded:
				refused++
			default:
				t.Errorf("OpenSession: %v", err)
			}
		}()
	}
	wg.Wait()
	if opened != 3 || refused != 9 {
		t.Fatalf("%d opened, %d refused; want 3 and 9", opened, refused)
	}
	resp, err := w.etcd.Get(ctx, store.Of(a.c).Keys().LimitPrefix("sessions", w.certs.IDs["worker-a"]), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 3 {
		t.Fatalf("%d session units in etcd, want 3", resp.Count)
	}
}

// An identity's watch streams stop at the default limit of 32, on every
// service; an ended stream frees its unit.
func TestWatchStreamsPerIdentityStopAtTheDefaultLimit(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	op := w.clientWith(r, "operator", client.WithReadsAs("operator"))
	var cancels []context.CancelFunc
	var wg sync.WaitGroup
	t.Cleanup(func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	})
	watch := func() (context.CancelFunc, error) {
		wctx, cancel := context.WithCancel(ctx)
		synced := make(chan struct{})
		errc := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- op.Watch(wctx, "", func(coordinator.OwnershipEvent) error { return nil }, client.WithSynced(func() { close(synced) }))
		}()
		select {
		case <-synced:
			return cancel, nil
		case err := <-errc:
			cancel()
			return nil, err
		}
	}
	for i := 0; i < 32; i++ {
		cancel, err := watch()
		if err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
		cancels = append(cancels, cancel)
	}
	before := lgtest.Snap(t, w.etcd, "/")
	_, err := watch()
	wantLimit(t, err, "limits.watches 32")
	if d := before.Diff(lgtest.Snap(t, w.etcd, "/")); d != "" {
		t.Fatalf("a refused stream wrote:\n%s", d)
	}
	prefix := store.Of(r.c).Keys().LimitPrefix("watches", w.certs.IDs["operator"])
	resp, err := w.etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("no watch unit under %s: %v", prefix, err)
	}
	cancels[0]() // not knowing which stream's unit it is, wait for any deletion
	wch := w.etcd.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut())
	<-wch
	cancel, err := watch()
	if err != nil {
		t.Fatalf("a stream after one ended: %v", err)
	}
	cancels = append(cancels, cancel)
}

// A watch stream's unit is on its replica's dispatch lease: a replica that
// dies (its etcd client gone, so it can free nothing) frees its streams'
// units when that lease expires, and the identity opens a stream through
// another replica.
func TestADeadReplicasWatchStreamsAreFreed(t *testing.T) {
	w := newWorld(t)
	opts := []gateway.Option{gateway.WithDispatchLeaseTTL(2 * time.Second), gateway.WithLimits(gateway.Limits{Watches: 1})}
	a, b := w.replica(opts...), w.replica(opts...)
	ctx := lgtest.Ctx(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	synced, ended := make(chan struct{}), make(chan error, 1)
	go func() {
		ended <- w.client(a, "worker-a").Watch(wctx, tenant, func(coordinator.OwnershipEvent) error { return nil },
			client.WithSynced(func() { close(synced) }))
	}()
	lgtest.Wait(t, synced, "the stream through replica a")
	prefix := store.Of(a.c).Keys().LimitPrefix("watches", w.certs.IDs["worker-a"])
	resp, err := w.etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("watch units: %v, %v; want one", resp, err)
	}
	err = w.client(b, "worker-a").Watch(ctx, tenant, func(coordinator.OwnershipEvent) error { return nil })
	wantLimit(t, err, "limits.watches 1")

	// Replica a dies: its etcd client first, so it can free nothing.
	if err := a.etcd.Close(); err != nil {
		t.Fatal(err)
	}
	a.ts.CloseClientConnections()
	cancel()
	<-ended
	waitGone(t, w.etcd, string(resp.Kvs[0].Key))

	wctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	synced2, ended2 := make(chan struct{}), make(chan error, 1)
	go func() {
		ended2 <- w.client(b, "worker-a").Watch(wctx2, tenant, func(coordinator.OwnershipEvent) error { return nil },
			client.WithSynced(func() { close(synced2) }))
	}()
	select {
	case <-synced2:
	case err := <-ended2:
		t.Fatalf("a stream through replica b after a died: %v", err)
	}
	cancel2()
	<-ended2
}
