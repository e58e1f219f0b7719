package fencedtxn_test

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestIntentForAnotherTenantsTaskIsScopeMismatch: a grant is for one
// tenant's task; an intent naming a task of the same name under another
// tenant is scope_mismatch, and nothing is written (issue 13; pinned for
// indep/commit/scope-task-only).
func TestIntentForAnotherTenantsTaskIsScopeMismatch(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "acme", "billing")
	for name, in := range map[string]fencedtxn.Intent{
		"another tenant, same task": {Tenant: "globex", Task: "billing", Operation: "op", Value: []byte("v")},
		"same tenant, another task": {Tenant: "acme", Task: "payroll", Operation: "op", Value: []byte("v")},
	} {
		t.Run(name, func(t *testing.T) {
			refusedCommit(t, ctx, c, g, in, coordinator.ScopeMismatch)
		})
	}
}
