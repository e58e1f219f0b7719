package coordinator_test

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestLeasesAndStaleOwners: every lease carrying owner keys is listed with
// its owner, TTLs and tasks; a revoked lease is expired_owner; after a realm
// rotation the old owner keys are shown stale, never as owning.
func TestLeasesAndStaleOwners(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	a := lgtest.Session(t, c, "worker-a", 20*time.Second)
	b := lgtest.Session(t, c, "worker-b", 10*time.Second)
	ga1 := lgtest.Claim(t, a, "t", "one")
	ga2 := lgtest.Claim(t, a, "u", "two")
	gb := lgtest.Claim(t, b, "t", "three")
	idle := lgtest.Session(t, c, "idle", 10*time.Second) // a lease with no owner key

	leases, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]coordinator.LeaseInfo{}
	for _, l := range leases {
		byID[l.ID] = l
	}
	if len(leases) != 2 || byID[idle.Lease()].ID != 0 {
		t.Fatalf("Leases: %+v; want exactly the leases of worker-a and worker-b", leases)
	}
	la := byID[a.Lease()]
	if la.Owner != "worker-a" || la.GrantedTTL != 20 || la.TTLLeft < 1 || la.TTLLeft > 20 || len(la.Tasks) != 2 ||
		la.Tasks[0] != (coordinator.LeaseTask{Tenant: "t", Task: "one", Epoch: ga1.Epoch}) ||
		la.Tasks[1] != (coordinator.LeaseTask{Tenant: "u", Task: "two", Epoch: ga2.Epoch}) {
		t.Fatalf("lease of worker-a: %+v", la)
	}
	lb, err := c.Lease(ctx, b.Lease())
	lgtest.Holds(t, fmt.Sprintf("Lease(worker-b): %+v %v", lb, err), lgtest.Is("no error", err == nil),
		lgtest.Is("owner worker-b", lb.Owner == "worker-b"), lgtest.Is("granted TTL 10", lb.GrantedTTL == 10),
		lgtest.Is("one task, at the grant's epoch", len(lb.Tasks) == 1 && lb.Tasks[0].Epoch == gb.Epoch))
	li, err := c.Lease(ctx, idle.Lease())
	if err != nil || len(li.Tasks) != 0 || li.GrantedTTL != 10 {
		t.Fatalf("Lease(idle): %+v %v", li, err)
	}
	_, err = c.Lease(ctx, -1)
	lgtest.Want(t, err, coordinator.InvalidInput)
	if err := c.RevokeLease(ctx, b.Lease()); err != nil {
		t.Fatal(err)
	}
	_, err = c.Lease(ctx, b.Lease())
	lgtest.Want(t, err, coordinator.ExpiredOwner)

	// Rotation: worker-a's keys stay in etcd on a live lease but hold nothing.
	if _, err := c.RotateRealm(ctx); err != nil {
		t.Fatal(err)
	}
	own, err := c.Owner(ctx, "t", "one")
	if err != nil || !own.Stale || own.Owned() || own.Owner != "worker-a" || own.TTLLeft != -1 {
		t.Fatalf("Owner after rotation: %+v %v; want stale, not owned", own, err)
	}
	list, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list {
		if o.Owned() {
			t.Fatalf("List after rotation shows %+v as owning", o)
		}
	}
	la, err = c.Lease(ctx, a.Lease())
	if err != nil || len(la.Tasks) != 2 || !la.Tasks[0].Stale || !la.Tasks[1].Stale {
		t.Fatalf("Lease(worker-a) after rotation: %+v %v; want both tasks stale", la, err)
	}
	// A new claim is owned again.
	fresh := lgtest.Claim(t, lgtest.Session(t, c, "worker-c", 10*time.Second), "t", "one")
	own, err = c.Owner(ctx, "t", "one")
	lgtest.Holds(t, fmt.Sprintf("Owner after a claim in the new realm: %+v %v", own, err), lgtest.Is("no error", err == nil),
		lgtest.Is("not stale", !own.Stale), lgtest.Is("owned", own.Owned()), lgtest.Is("the new claim's epoch", own.Epoch == fresh.Epoch))
}

// TestWatchVacatesOnRotation: a watcher sees the owners of the old realm
// vacated, marked stale, when the realm is rotated.
func TestWatchVacatesOnRotation(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "k")
	events, err := c.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, events, coordinator.EventOwned, "k", g.Epoch)
	if _, err := c.RotateRealm(ctx); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, events)
	if ev.Type != coordinator.EventVacated || !ev.Ownership.Stale || ev.Ownership.Epoch != g.Epoch {
		t.Fatalf("after rotation: %s %+v; want k vacated, stale", ev.Type, ev.Ownership)
	}
	// A watch started after the rotation does not show the stale key.
	again, err := c.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	g2 := lgtest.Claim(t, s, "t", "k")
	expect(t, again, coordinator.EventClaimed, "k", g2.Epoch)
}

func nextEvent(t *testing.T, events <-chan coordinator.OwnershipEvent) coordinator.OwnershipEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(lgtest.Timeout):
		t.Fatal("no event")
	}
	return coordinator.OwnershipEvent{}
}

// TestRevokeOwnerLeaseRefusesLimitKeysAloneAndTheirSiblings: the keys a
// gateway counts a session by (under <prefix>/limits/) ride beside owner
// keys, but they do not make a lease leasegate's: a lease carrying only
// such a key is refused, and so is an owner's lease that also carries a
// key under a sibling of the limits prefix (<prefix>/limitsX/…). Each
// refusal is invalid_input and revokes nothing.
func TestRevokeOwnerLeaseRefusesLimitKeysAloneAndTheirSiblings(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	root := cl.Client(t)
	ctx := lgtest.Ctx(t)
	alive := func(lease int64) {
		t.Helper()
		ttl, err := root.TimeToLive(ctx, clientv3.LeaseID(lease))
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL <= 0 {
			t.Fatal("the refused revoke revoked the lease")
		}
	}

	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 30*time.Second), "t", "k")
	sibling := c.Keys().Prefix() + "/limitsX/sessions/worker/u"
	if _, err := root.Put(ctx, sibling, "rides", clientv3.WithLease(clientv3.LeaseID(g.Lease))); err != nil {
		t.Fatal(err)
	}
	_, err := c.RevokeOwnerLease(ctx, g.Lease)
	lgtest.Want(t, err, coordinator.InvalidInput)
	alive(g.Lease)

	lr, err := root.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, c.Keys().Prefix()+"/limits/sessions/worker/u", "", clientv3.WithLease(lr.ID)); err != nil {
		t.Fatal(err)
	}
	_, err = c.RevokeOwnerLease(ctx, int64(lr.ID))
	lgtest.Want(t, err, coordinator.InvalidInput)
	alive(int64(lr.ID))
}

// TestRevokeOwnerLeaseRefusesAKeyspaceKeyNotAnOwners: a leasegate lease
// that also carries a key of the keyspace that is not an owner key (a
// task's state key, attached by hand) is not leasegate's alone: refused as
// invalid_input, nothing revoked, the grant still held.
func TestRevokeOwnerLeaseRefusesAKeyspaceKeyNotAnOwners(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	root := cl.Client(t)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 30*time.Second), "t", "k")
	other := c.Keys().State("t", "other")
	if _, err := root.Put(ctx, other, "rides", clientv3.WithLease(clientv3.LeaseID(g.Lease))); err != nil {
		t.Fatal(err)
	}
	_, err := c.RevokeOwnerLease(ctx, g.Lease)
	lgtest.Want(t, err, coordinator.InvalidInput)
	ttl, err := root.TimeToLive(ctx, clientv3.LeaseID(g.Lease))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL <= 0 {
		t.Fatal("the refused revoke revoked the lease")
	}
}
