package retention_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/core"
	"github.com/leasegate/leasegate/retention"
	"github.com/leasegate/leasegate/testsupport/lgtest"
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
	for _, c := range []retention.Candidate{
		{Kind: retention.KindFence, Key: k.Owner("t", "live"), Tenant: "t", Task: "idle", ModRevision: g.Epoch},
		{Kind: retention.KindOp, Key: k.Fence("t", "live"), Tenant: "t", Task: "live", Operation: "op", ModRevision: g.Epoch, MinStateVersion: 1},
	} {
		lgtest.RefusedWritingNothing(t, f.cli, "/", coordinator.InvalidInput, func() error {
			_, err := f.gc.Apply(lgtest.Ctx(t), retention.Plan{Candidates: []retention.Candidate{c}})
			return err
		})
	}
	if own, err := f.c.Owner(lgtest.Ctx(t), "t", "live"); err != nil || own.Epoch != g.Epoch {
		t.Fatalf("owner after the refused plans: %+v %v", own, err)
	}
}

// TestMarkCandidateMustBeAMark: a "mark" candidate is deleted only if its
// key is a retention mark of this keyspace, as Mark writes it. A live owner
// key named as a mark (with its real ModRevision, so the guard would hold),
// the owner key of a sibling keyspace (/gcN0 is not under /gcN), the marks
// prefix itself, and a key under it that names no revision are invalid
// input, and nothing is deleted.
func TestMarkCandidateMustBeAMark(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	f := newFixture(t, cl)
	k := f.c.Keys()
	lk := core.KeysOf(f.c)
	sibling := lgtest.CoordinatorOf(t, f.cli, coordinator.WithPrefix(k.Prefix()+"0"))
	g := lgtest.Claim(t, lgtest.Session(t, f.c, "worker", 30*time.Second), "t", "live")
	sg := lgtest.Claim(t, lgtest.Session(t, sibling, "worker", 30*time.Second), "t", "live")
	if _, err := f.cli.Put(lgtest.Ctx(t), lk.RetentionMarks()+"not-a-revision", "x"); err != nil {
		t.Fatal(err)
	}
	junk, err := f.cli.Get(lgtest.Ctx(t), lk.RetentionMarks()+"not-a-revision")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []retention.Candidate{
		{Kind: retention.KindMark, Key: k.Owner("t", "live"), ModRevision: g.Epoch},
		{Kind: retention.KindMark, Key: sibling.Keys().Owner("t", "live"), ModRevision: sg.Epoch},
		{Kind: retention.KindMark, Key: lk.RetentionMarks(), ModRevision: g.Epoch},
		{Kind: retention.KindMark, Key: lk.RetentionMarks() + "not-a-revision", ModRevision: junk.Kvs[0].ModRevision},
	} {
		lgtest.RefusedWritingNothing(t, f.cli, "/", coordinator.InvalidInput, func() error {
			_, err := f.gc.Apply(lgtest.Ctx(t), retention.Plan{Candidates: []retention.Candidate{c}})
			return err
		})
	}
	for _, x := range []struct {
		c *coordinator.Coordinator
		g coordinator.Grant
	}{{f.c, g}, {sibling, sg}} {
		if err := x.c.Current(lgtest.Ctx(t), x.g); err != nil {
			t.Fatalf("grant of %s after the refused plans: %v", x.c.Keys().Prefix(), err)
		}
	}
	// A real mark, as Mark wrote it, is still collected.
	if err := f.gc.Mark(lgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	marks, err := f.cli.Get(lgtest.Ctx(t), lk.RetentionMarks()+"0", clientv3.WithPrefix())
	if err != nil || len(marks.Kvs) != 1 {
		t.Fatalf("marks: %v %v", marks, err)
	}
	m := marks.Kvs[0]
	r, err := f.gc.Apply(lgtest.Ctx(t), retention.Plan{Candidates: []retention.Candidate{{Kind: retention.KindMark, Key: string(m.Key), ModRevision: m.ModRevision}}})
	if err != nil || len(r.Deleted) != 1 {
		t.Fatalf("apply of a real mark: %+v %v", r, err)
	}
}
