package cli_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// lease revoke and realm show print through the gateway what they print
// through --endpoints: the tasks a revoke vacated and what was left of the
// lease, the realm's recorded origin.
func TestOperatorAnswersThroughTheGatewayMatchEndpoints(t *testing.T) {
	var lose atomic.Bool
	gw := newGatewayEnvWrapped(t, loseAnswers(&lose, leasegatev1connect.OperatorServiceRevokeLeaseProcedure))
	e := gw.env

	direct := e.lg(t, "realm", "show")
	want(t, direct, 0, coordinator.OK)
	via := gw.as(t, "op1", "realm", "show")
	wantViaGateway(t, via, 0, coordinator.OK)
	if lastJSON(t, via.stdout)["origin"] == nil {
		t.Fatalf("realm show through the gateway has no origin: %s", via.stdout)
	}
	sameJSON(t, direct, via)

	// Two leases of the same shape, one revoked each way.
	_, g1 := e.claim(t, "acme", "a", "w1", "30s")
	_, g2 := e.claim(t, "acme", "b", "w1", "30s")
	direct = e.lg(t, "lease", "revoke", "--grant", g1)
	want(t, direct, 0, coordinator.OK)
	via = gw.as(t, "op1", "lease", "revoke", "--grant", g2)
	wantViaGateway(t, via, 0, coordinator.OK)
	if v := lastJSON(t, via.stdout)["vacated"].([]any); len(v) != 1 || v[0].(map[string]any)["task"] != "b" {
		t.Fatalf("revoke through the gateway vacated %v, want acme/b", v)
	}
	if left := lastJSON(t, via.stdout)["ttl_left_seconds"].(float64); left <= 0 {
		t.Fatalf("revoke through the gateway: %v seconds left", left)
	}
	direct.stdout = strings.Replace(direct.stdout, `"task":"a"`, `"task":"b"`, 1)
	sameJSON(t, direct, via, "lease", "ttl_left_seconds")

	// The table says the same.
	_, g3 := e.claim(t, "acme", "c", "w1", "30s")
	r := execApp(t, call{}, append(gw.gatewayArgs("op1", gw.url), "-o", "table", "lease", "revoke", "--grant", g3)...)
	if r.code != 0 || !strings.Contains(r.stdout, "acme/c") || !strings.Contains(r.stdout, "were left") {
		t.Fatalf("table: %+v", r)
	}

	// An unreachable gateway is a hold; a revoke whose answer was lost may
	// have applied (outcome_unknown), and revoking again tells.
	for _, args := range [][]string{{"realm", "show"}, {"lease", "revoke", "--grant", g3}} {
		wantViaGateway(t, execApp(t, call{}, append(gw.gatewayArgs("op1", "https://127.0.0.1:1"), args...)...), cli.ExitUnavailable, coordinator.AuthorityUnavailable)
	}
	_, g4 := e.claim(t, "acme", "d", "w1", "30s")
	lose.Store(true)
	wantViaGateway(t, gw.as(t, "op1", "lease", "revoke", "--grant", g4), cli.ExitOutcomeUnknown, coordinator.OutcomeUnknown)
	lose.Store(false)
	wantOperatorAdvice(t, gw.as(t, "op1", "lease", "revoke", "--grant", g4), cli.ExitRefused, coordinator.ExpiredOwner, "etcd no longer knows this lease")
}
