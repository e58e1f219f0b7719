package coordinator_test

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestClaimOverStaleOwnerKeyHoldsTheTask: after a rotation an owner key of
// the old realm holds nothing and a claim replaces it; the key is then
// overwritten, not created, so it keeps its old create revision. The claim
// that replaced it holds the task all the same (the compare is on the
// key's last write, not its creation), and Session.Grants reports the
// replacing claim's epoch (its last write), not the stale key's.
func TestClaimOverStaleOwnerKeyHoldsTheTask(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.Coordinator(t, cl)
	old := lgtest.Session(t, c, "old", 10*time.Second)
	stale := lgtest.Claim(t, old, "t", "x")

	if _, err := c.RotateRealm(ctx); err != nil {
		t.Fatal(err)
	}
	s := lgtest.Session(t, c, "new", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "x") // replaces the old realm's key
	if g.Epoch <= stale.Epoch {
		t.Fatalf("claim over the stale key: epoch %d, stale %d", g.Epoch, stale.Epoch)
	}

	// The replacing claim holds the task: a third claim is busy.
	third := lgtest.Session(t, c, "third", 10*time.Second)
	_, err := third.Claim(ctx, "t", "x")
	lgtest.Want(t, err, coordinator.Busy)
	if own, err := c.Owner(ctx, "t", "x"); err != nil || own.Epoch != g.Epoch {
		t.Fatalf("owner after the third claim: %+v %v; want epoch %d", own, err, g.Epoch)
	}

	// Grants reads the replacing claim's epoch back.
	grants, err := s.Grants(ctx)
	if err != nil || len(grants) != 1 || grants[0] != g {
		t.Fatalf("Grants: %+v %v; want [%+v]", grants, err, g)
	}
}
