package coordinator_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestSessionGrantsShowsALostClaim: a claim whose answer was lost still
// shows in Session.Grants (read from etcd) as a working grant, which
// Release lets go; a key on another lease or under another label is never
// listed.
func TestSessionGrantsShowsALostClaim(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	d := lostAnswer()
	cli := lgtest.ClientWith(t, cl, d)
	ctx := lgtest.Ctx(t)
	c := lgtest.CoordinatorOf(t, cli)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	other := lgtest.Session(t, c, "other", 10*time.Second)
	twin := lgtest.Session(t, c, "worker", 10*time.Second) // the same owner label, another lease
	held := lgtest.Claim(t, s, "t", "held")
	twinHeld := lgtest.Claim(t, twin, "t", "twin")
	theirs := lgtest.Claim(t, other, "t", "theirs")

	d.Arm()
	_, err := s.Claim(ctx, "t", "lost")
	lgtest.Want(t, err, coordinator.OutcomeUnknown)

	grants, err := s.Grants(ctx)
	if err != nil || len(grants) != 2 || grants[0] != held || grants[1].Task != "lost" || grants[1].Lease != s.Lease() ||
		grants[1].Realm != c.Realm() || grants[1].Owner != "worker" || grants[1].Epoch <= held.Epoch {
		t.Fatalf("Grants: %+v %v; want held and the lost claim", grants, err)
	}
	// The grant read back is a working grant.
	if err := c.Renew(ctx, grants[1]); err != nil {
		t.Fatalf("renew of the grant read back: %v", err)
	}

	// A key on this session's lease under another label was not written
	// by it (leasegate never does that): not one of its grants.
	forged := c.Keys().Owner("t", "forged")
	if _, err := cli.Put(ctx, forged, "intruder", clientv3.WithLease(clientv3.LeaseID(s.Lease()))); err != nil {
		t.Fatal(err)
	}
	// The lost claim, read back, is let go as any grant is.
	if err := c.Release(ctx, grants[1]); err != nil {
		t.Fatal(err)
	}
	if own, err := c.Owner(ctx, "t", "lost"); err != nil || own.Owned() {
		t.Fatalf("after Release of the grant read back: %+v %v", own, err)
	}
	grants, err = s.Grants(ctx)
	if err != nil || len(grants) != 1 || grants[0] != held {
		t.Fatalf("Grants after Release: %+v %v; want held alone", grants, err)
	}
	// The other sessions' grants are their own.
	if og, err := other.Grants(ctx); err != nil || len(og) != 1 || og[0] != theirs {
		t.Fatalf("other's Grants: %+v %v", og, err)
	}
	if tg, err := twin.Grants(ctx); err != nil || len(tg) != 1 || tg[0] != twinHeld {
		t.Fatalf("twin's Grants: %+v %v", tg, err)
	}
	// After a rotation the session's owner keys hold nothing: no grants.
	if _, err := c.RotateRealm(ctx); err != nil {
		t.Fatal(err)
	}
	if grants, err = s.Grants(ctx); err != nil || len(grants) != 0 {
		t.Fatalf("Grants after a rotation: %+v %v; want none", grants, err)
	}
}
