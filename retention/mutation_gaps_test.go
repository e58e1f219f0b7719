package retention_test

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/lgtest"
	"github.com/leasegate/leasegate/retention"
)

// TestPlanKeyMustMatchItsFields: a candidate whose key is not the key its
// kind, tenant, task and operation name is invalid input and nothing is
// deleted — even when its guard would hold, as here for a live owner key
// passed off as the fence of an idle task (a surviving mutation of Apply's
// check; docs/reliability.md, "Mutation score").
func TestPlanKeyMustMatchItsFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t, embedtest.NewCluster(t))
	g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "live")
	k := f.c.Keys()
	before := lgtest.Snap(t, f.cli, "/")
	for _, c := range []retention.Candidate{
		{Kind: retention.KindFence, Key: k.Owner("t", "live"), Tenant: "t", Task: "idle", ModRevision: g.Epoch},
		{Kind: retention.KindOp, Key: k.Fence("t", "live"), Tenant: "t", Task: "live", Operation: "op", ModRevision: g.Epoch, MinStateVersion: 1},
	} {
		_, err := f.gc.Apply(lgtest.Ctx(t), retention.Plan{Candidates: []retention.Candidate{c}})
		lgtest.Want(t, err, coordinator.InvalidInput)
	}
	if d := before.Diff(lgtest.Snap(t, f.cli, "/")); d != "" {
		t.Fatalf("a refused plan wrote:\n%s", d)
	}
	if own, err := f.c.Owner(lgtest.Ctx(t), "t", "live"); err != nil || own.Epoch != g.Epoch {
		t.Fatalf("owner after the refused plans: %+v %v", own, err)
	}
}
