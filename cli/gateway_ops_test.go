package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// ops show of an UNKNOWN record (the provider call may have applied) prints
// through the gateway exactly what it prints through --endpoints, JSON and
// table, and neither claims that nothing was sent; an operation that is
// not recorded is invalid_input both ways.
func TestOpsShowOfAnUnknownRecordThroughTheGateway(t *testing.T) {
	gw := newGatewayEnv(t)
	e := gw.env
	ctx := lgtest.Ctx(t)
	g, _ := e.claim(t, "acme", "failover", gw.certs.IDs["w1"], "30s")
	p := &dbProvider{lose: true}
	l, err := ledger.New(e.co, ledger.WithAdapters(p), ledger.WithPolling(time.Millisecond, time.Millisecond, 1))
	if err != nil {
		t.Fatal(err)
	}
	pre, _ := p.Precondition(ctx, ledger.Effect{})
	rec, err := l.Propose(ctx, g, "promote", ledger.Effect{Kind: "db-promote", Target: "db-b", Policy: "p7"}, pre)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Authorize(ctx, g, "promote", ledger.Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
		PreconditionDigest: rec.Precondition.Digest}); err != nil {
		t.Fatal(err)
	}
	if rec, _ = l.Dispatch(ctx, g, "promote"); rec.State != ledger.Unknown {
		t.Fatalf("dispatch left %s, want UNKNOWN", rec.State)
	}
	for _, args := range [][]string{
		{"ops", "show", "--tenant", "acme", "--task", "failover", "promote"},
		{"-o", "table", "ops", "show", "--tenant", "acme", "--task", "failover", "promote"},
	} {
		direct, via := e.lg(t, args...), gw.as(t, "w1", args...)
		if direct.code != 0 || via != direct {
			t.Fatalf("ops show %v:\n--endpoints %+v\n--gateway   %+v", args, direct, via)
		}
		if strings.Contains(via.stdout+via.stderr, "nothing was sent") || !strings.Contains(via.stdout, "UNKNOWN") {
			t.Fatalf("ops show of an UNKNOWN record: %+v", via)
		}
	}
	args := []string{"ops", "show", "--tenant", "acme", "--task", "failover", "never-proposed"}
	direct, via := e.lg(t, args...), gw.as(t, "w1", args...)
	want(t, direct, 2, coordinator.InvalidInput)
	wantViaGateway(t, via, 2, coordinator.InvalidInput)
	if direct.stderr != via.stderr {
		t.Fatalf("not recorded:\n--endpoints %s--gateway   %s", direct.stderr, via.stderr)
	}
}
