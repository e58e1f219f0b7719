package coordinator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestReleaseLeavesSiblingTasksHeld: releasing task job deletes its owner
// key alone. Tasks whose names start with job's (job-1, job/x escaped as
// job%2Fx), held by another session or by the same one, stay held at their
// epochs, and so does job of a tenant whose name starts with the tenant's.
func TestReleaseLeavesSiblingTasksHeld(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	other := lgtest.Session(t, c, "other", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "job")
	siblings := []struct{ tenant, task string }{{"t", "job-1"}, {"t", "job/x"}, {"t2", "job"}}
	epochs := map[string]int64{}
	for i, sib := range siblings {
		holder := s
		if i%2 == 1 {
			holder = other
		}
		epochs[sib.tenant+"/"+sib.task] = lgtest.Claim(t, holder, sib.tenant, sib.task).Epoch
	}
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	own, err := c.Owner(ctx, "t", "job")
	if err != nil || own.Owned() || own.Fence != g.Epoch {
		t.Fatalf("released task: %+v %v; want nobody, fence %d", own, err, g.Epoch)
	}
	for _, sib := range siblings {
		own, err := c.Owner(ctx, sib.tenant, sib.task)
		want := epochs[sib.tenant+"/"+sib.task]
		lgtest.Holds(t, fmt.Sprintf("%s/%s after job's release: %+v %v", sib.tenant, sib.task, own, err),
			lgtest.Is("no error", err == nil), lgtest.Is("still held", own.Owned()), lgtest.Is("at its claim's epoch", own.Epoch == want))
	}
}
