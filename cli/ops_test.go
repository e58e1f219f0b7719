package cli_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// dbProvider is a minimal fake provider: Apply applies and, when lose is
// set, loses the answer; Observe cannot tell.
type dbProvider struct {
	mu   sync.Mutex
	lose bool
}

func (p *dbProvider) Kind() string              { return "db-promote" }
func (p *dbProvider) Contract() ledger.Contract { return ledger.Contract{} }
func (p *dbProvider) Precondition(context.Context, ledger.Effect) (ledger.Observation, error) {
	return ledger.Observation{Digest: "writer=db-a", At: time.Now()}, nil
}
func (p *dbProvider) Apply(_ context.Context, call ledger.Call) (ledger.Evidence, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lose {
		return ledger.Evidence{}, ledger.Ambiguous(context.DeadlineExceeded)
	}
	return ledger.Evidence{ProviderIDs: []string{"req-" + call.Operation}}, nil
}
func (p *dbProvider) Observe(context.Context, ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	return ledger.Inconclusive, ledger.Evidence{}, nil
}

type opsShowOut struct {
	Disposition string              `json:"disposition"`
	Record      ledger.Record       `json:"record"`
	Journal     []ledger.Transition `json:"journal"`
}

type opsListOut struct {
	Disposition string          `json:"disposition"`
	Records     []ledger.Record `json:"records"`
}

func TestOps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := lgtest.Ctx(t)
	g, grantFile := e.claim(t, "acme", "failover", "worker-a", "30s")
	p := &dbProvider{}
	l, err := ledger.New(e.co, ledger.WithAdapters(p), ledger.WithPolling(time.Millisecond, time.Millisecond, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"promote", "dns/1"} {
		pre, _ := p.Precondition(ctx, ledger.Effect{})
		rec, err := l.Propose(ctx, g, op, ledger.Effect{Kind: "db-promote", Target: "db-b", Policy: "p7"}, pre)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Authorize(ctx, g, op, ledger.Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
			PreconditionDigest: rec.Precondition.Digest}); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		p.lose = op != "promote"
		p.mu.Unlock()
		if _, err := l.Dispatch(ctx, g, op); err != nil {
			t.Fatal(err)
		}
	}
	if recs, err := l.Reconcile(ctx, g); err != nil || len(recs) != 1 || recs[0].State != ledger.ManualReview {
		t.Fatalf("reconcile: %+v %v", recs, err)
	}

	t.Run("list", func(t *testing.T) {
		var all, review opsListOut
		decode(t, e.lg(t, "ops", "list", "--tenant", "acme"), &all)
		r := e.lg(t, "ops", "list", "--tenant", "acme", "--task", "failover", "--state", "manual_review")
		want(t, r, cli.ExitDone, "ok")
		decode(t, r, &review)
		if len(all.Records) != 2 || len(review.Records) != 1 || review.Records[0].Operation != "dns/1" {
			t.Fatalf("all %+v\nmanual review %+v", all, review)
		}
		want(t, e.lg(t, "ops", "list", "--task", "failover"), cli.ExitInvalid, coordinator.InvalidInput)
		want(t, e.lg(t, "ops", "list", "--state", "DONE"), cli.ExitInvalid, coordinator.InvalidInput)
		r = e.exec(t, call{args: []string{"-o", "table", "ops", "list"}})
		if r.code != 0 || !strings.Contains(r.stdout, "MANUAL_REVIEW") || !strings.Contains(r.stdout, "dns/1") {
			t.Fatalf("table: %+v", r)
		}
	})

	t.Run("show", func(t *testing.T) {
		var out opsShowOut
		r := e.lg(t, "ops", "show", "promote", "--tenant", "acme", "--task", "failover") // flags after the operation
		want(t, r, cli.ExitDone, "ok")
		decode(t, r, &out)
		var to []ledger.State
		for _, j := range out.Journal {
			to = append(to, j.To)
		}
		if out.Record.State != ledger.Confirmed || len(to) != 4 || to[3] != ledger.Confirmed || out.Journal[3].Revision != out.Record.Revision {
			t.Fatalf("show: %+v", out)
		}
		r = e.lg(t, "ops", "show", "--tenant", "acme", "--task", "failover", "-o", "table", "--operation", "promote")
		if r.code != 0 || !strings.Contains(r.stdout, "req-promote") || strings.Count(r.stdout, "CONFIRMED") != 2 {
			t.Fatalf("table: %+v", r)
		}
		want(t, e.lg(t, "ops", "show", "nope", "--tenant", "acme", "--task", "failover"), cli.ExitInvalid, coordinator.InvalidInput)
		want(t, e.lg(t, "ops", "show", "--tenant", "acme", "--task", "failover"), cli.ExitInvalid, coordinator.InvalidInput)
		want(t, e.lg(t, "ops", "show", "promote", "--tenant", "acme", "--task", "failover", "extra"), cli.ExitInvalid, coordinator.InvalidInput)
	})

	t.Run("resolve", func(t *testing.T) {
		base := []string{"ops", "resolve", "--grant", grantFile, "--operation", "dns/1", "--approver", "imani"}
		e.writesNothing(t, "refused resolves", func() {
			want(t, e.lg(t, append(base, "--to", "CONFIRMED", "--why", "seen")...), cli.ExitInvalid, coordinator.InvalidInput)      // no evidence
			want(t, e.lg(t, append(base, "--to", "CONFIRMED", "--provider-id", "x")...), cli.ExitInvalid, coordinator.InvalidInput) // no why
			want(t, e.lg(t, append(base, "--to", "CONFIRMED", "--evidence", "{", "--why", "w")...), cli.ExitInvalid, coordinator.InvalidInput)
			want(t, e.lg(t, append(base, "--to", "DISPATCHING", "--why", "retry")...), cli.ExitRefused, coordinator.IllegalTransition)
		})
		var out opsShowOut
		r := e.lg(t, append(base, "--to", "confirmed", "--provider-id", "change-C-184", "--evidence", `{"status":"INSYNC"}`,
			"--why", "Route 53 shows the change INSYNC")...)
		want(t, r, cli.ExitDone, "ok")
		decode(t, r, &out)
		if out.Record.State != ledger.Confirmed || out.Record.Evidence == nil || out.Record.Evidence.ProviderIDs[0] != "change-C-184" {
			t.Fatalf("resolve: %+v", out)
		}
		decode(t, e.lg(t, "ops", "show", "dns/1", "--tenant", "acme", "--task", "failover"), &out)
		last := out.Journal[len(out.Journal)-1]
		if last.Approver != "imani" || last.By != ledger.StepResolve || !strings.Contains(last.Reason, "INSYNC") {
			t.Fatalf("journal entry %+v", last)
		}
		want(t, e.lg(t, append(base, "--to", "FAILED", "--provider-id", "x", "--why", "again")...), cli.ExitRefused, coordinator.IllegalTransition)
	})
}

func TestOpsReadsNeverCreateTheRealm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	empty := e.prefix + "-empty"
	for _, args := range [][]string{{"ops", "list"}, {"ops", "show", "op", "--tenant", "a", "--task", "b"}} {
		r := execApp(t, call{}, append([]string{"--endpoints", strings.Join(e.endpoints, ","), "--prefix", empty, "-o", "json"}, args...)...)
		want(t, r, cli.ExitNotFound, coordinator.NoKeyspace)
	}
	if s := lgtest.Snap(t, e.client(), empty+"/"); len(s) != 0 {
		t.Fatalf("a read wrote %v", s)
	}
}
