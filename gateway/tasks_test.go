package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// An approver of the tenant and an operator of every tenant read the
// tenant's tasks through their own services, as a worker does: the list,
// one task's owner, and a watch that sees a claim made after it began.
// (Their refusals — another tenant, another role — are rows of
// TestEveryProcedureRefusesAHostileCaller.)
func TestApproversAndOperatorsReadTasks(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	worker := w.client(r, "worker-a")
	s := w.session(worker, 10*time.Second)
	g := claim(t, s, tenant, "task-1")
	for _, c := range []struct{ caller, role string }{{"approver", "approver"}, {"operator", "operator"}} {
		t.Run(c.caller, func(t *testing.T) {
			rd, err := client.New(r.ts.URL, w.tlsOf(c.caller), client.WithReadsAs(c.role))
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			tasks, err := rd.Tasks(ctx, tenant)
			if err != nil || len(tasks) == 0 || tasks[0].Task != "task-1" || tasks[0].Owner != g.Owner || tasks[0].Epoch != g.Epoch {
				t.Fatalf("Tasks: %+v, %v; want task-1 held by %s at %d", tasks, err, g.Owner, g.Epoch)
			}
			o, err := rd.Owner(ctx, tenant, "task-1")
			if err != nil || o.Owner != g.Owner || o.Epoch != g.Epoch || o.TTLLeft < 1 {
				t.Fatalf("Owner: %+v, %v", o, err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			synced, claimed := make(chan struct{}), make(chan coordinator.Ownership, 1)
			done := make(chan error, 1)
			go func() {
				done <- rd.Watch(wctx, tenant, func(ev coordinator.OwnershipEvent) error {
					if ev.Type == coordinator.EventClaimed && ev.Ownership.Task == "task-"+c.caller {
						claimed <- ev.Ownership
					}
					return nil
				}, client.WithSynced(func() { close(synced) }))
			}()
			select {
			case <-synced:
			case err := <-done:
				t.Fatalf("Watch ended before it was established: %v", err)
			}
			g2 := claim(t, s, tenant, "task-"+c.caller)
			select {
			case o := <-claimed:
				if o.Owner != g2.Owner || o.Epoch != g2.Epoch {
					t.Errorf("watched claim %+v, want %s at %d", o, g2.Owner, g2.Epoch)
				}
			case err := <-done:
				t.Fatalf("Watch ended: %v", err)
			case <-ctx.Done():
				t.Fatal("the claim was not watched")
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Watch: %v", err)
			}
		})
	}
}
