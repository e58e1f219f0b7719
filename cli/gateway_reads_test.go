package cli_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// renew, list, lease list and lease show through the gateway print what
// they print through --endpoints; the gateway's roles decide who may (a
// worker lists its tenants' tasks and renews its own grants; lease list
// needs an operator of every tenant, lease show one of the lease's
// tenants); gc is refused naming --endpoints. Bad input is refused before
// any I/O, an unreachable gateway is a hold, a renew whose answer was lost
// is outcome_unknown and a read's is a hold.
func TestRenewListAndLeasesThroughTheGatewayMatchEndpoints(t *testing.T) {
	lost := []string{leasegatev1connect.WorkerServiceRenewGrantProcedure, leasegatev1connect.WorkerServiceListTasksProcedure}
	var lose atomic.Bool
	gw := newGatewayEnvWrapped(t, loseAnswers(&lose, lost...))
	e := gw.env
	w1 := gw.certs.IDs["w1"]
	g1, f1 := e.claim(t, "acme", "a", w1, "30s")
	_, f2 := e.claim(t, "acme", "b", "someone-else", "30s")
	_, fo := e.claim(t, "other", "x", "w-other", "30s")
	lease := coordinator.FormatLeaseID(g1.Lease)

	for _, tc := range []struct {
		name   string
		who    string
		args   []string
		code   int
		d      coordinator.Disposition
		ignore []string // fields that may differ between the two runs
	}{
		{"renew", "w1", []string{"renew", "--grant", f1}, 0, coordinator.Renewed, nil},
		{"list of a tenant", "w1", []string{"list", "--tenant", "acme"}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
		{"list of every tenant", "op1", []string{"list"}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
		{"lease list", "op1", []string{"lease", "list"}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
		{"lease show", "op1", []string{"lease", "show", lease}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
		{"lease show by an operator of the lease's tenant", "op2", []string{"lease", "show", "--grant", f1}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct, via := e.lg(t, tc.args...), gw.as(t, tc.who, tc.args...)
			want(t, direct, tc.code, tc.d)
			wantViaGateway(t, via, tc.code, tc.d)
			sameJSON(t, direct, via, tc.ignore...)
		})
	}

	// Refused by the gateway's roles, or before any I/O; nothing written.
	e.writesNothing(t, "a refused command", func() {
		for _, tc := range []struct {
			name string
			who  string
			args []string
			code int
			d    coordinator.Disposition
		}{
			{"renew of another identity's grant", "w1", []string{"renew", "--grant", f2}, cli.ExitDenied, coordinator.PermissionDenied},
			{"list of another tenant", "w1", []string{"list", "--tenant", "other"}, cli.ExitDenied, coordinator.PermissionDenied},
			{"list of every tenant by a worker of one", "w1", []string{"list"}, cli.ExitInvalid, coordinator.InvalidInput},
			{"lease list by a worker", "w1", []string{"lease", "list"}, cli.ExitDenied, coordinator.PermissionDenied},
			{"lease list by an operator of one tenant", "op2", []string{"lease", "list"}, cli.ExitDenied, coordinator.PermissionDenied},
			{"lease show of another tenant's lease", "op2", []string{"lease", "show", "--grant", fo}, cli.ExitDenied, coordinator.PermissionDenied},
			{"lease show of a malformed ID", "op1", []string{"lease", "show", "xyz"}, cli.ExitInvalid, coordinator.InvalidInput},
			{"gc", "op1", []string{"gc"}, cli.ExitInvalid, coordinator.InvalidInput},
			{"gc --apply", "op1", []string{"gc", "--apply"}, cli.ExitInvalid, coordinator.InvalidInput},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := gw.as(t, tc.who, tc.args...)
				wantViaGateway(t, r, tc.code, tc.d)
				if tc.args[0] == "gc" && !strings.Contains(r.stderr, "--endpoints") {
					t.Fatalf("gc's refusal does not name --endpoints: %s", r.stderr)
				}
			})
		}
	})

	// A lease etcd no longer knows: expired_owner, with the operator's advice, both ways.
	want(t, e.lg(t, "lease", "revoke", "--grant", f1), 0, coordinator.OK)
	advice := "etcd no longer knows this lease"
	wantOperatorAdvice(t, e.lg(t, "lease", "show", lease), cli.ExitRefused, coordinator.ExpiredOwner, advice)
	wantOperatorAdvice(t, gw.as(t, "op1", "lease", "show", lease), cli.ExitRefused, coordinator.ExpiredOwner, advice)
	want(t, e.lg(t, "renew", "--grant", f1), cli.ExitRefused, coordinator.ExpiredOwner)
	wantViaGateway(t, gw.as(t, "w1", "renew", "--grant", f1), cli.ExitRefused, coordinator.ExpiredOwner)

	// An unreachable gateway is a hold for every one of them.
	down := execApp(t, call{}, append(gw.gatewayArgs("w1", "https://127.0.0.1:1"), "renew", "--grant", f1)...)
	wantViaGateway(t, down, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
	for _, args := range [][]string{{"list", "--tenant", "acme"}, {"lease", "list"}, {"lease", "show", lease}} {
		wantViaGateway(t, execApp(t, call{}, append(gw.gatewayArgs("op1", "https://127.0.0.1:1"), args...)...), cli.ExitUnavailable, coordinator.AuthorityUnavailable)
	}

	// A renew whose answer was lost may have applied: outcome_unknown; a
	// read whose answer was lost changed nothing: a hold.
	_, f3 := e.claim(t, "acme", "c", w1, "30s")
	lose.Store(true)
	wantViaGateway(t, gw.as(t, "w1", "renew", "--grant", f3), cli.ExitOutcomeUnknown, coordinator.OutcomeUnknown)
	wantViaGateway(t, gw.as(t, "w1", "list", "--tenant", "acme"), cli.ExitUnavailable, coordinator.AuthorityUnavailable)
}
