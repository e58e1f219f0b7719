package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func writePolicy(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The deployment's policy is the server's: a proposal is recorded under
// the policy current then (one naming another is refused, nothing
// written), an approval is given under it, and once the policy file
// changes — its rules, even under the same version — a record approved
// under the old one is not dispatched: it goes back to PROPOSED, nothing
// sent, and dispatches once approved again under the new one. Every
// journal entry names the policy it ran under.
func TestARecordApprovedUnderAPolicyNoLongerCurrentIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(t.TempDir(), "policy.json")
	writePolicy(t, path, `{"version":"v7","rules":{"promotions_per_hour":1}}`)
	p, err := gateway.LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	v7 := p.Current()
	if !strings.HasPrefix(v7, "v7@") || len(v7) != len("v7@")+16 {
		t.Fatalf("policy ID %q, want v7@ and 16 hex digits", v7)
	}
	r := w.replica(gateway.WithPolicy(p))
	ctx := lgtest.Ctx(t)
	wa, ap := w.client(r, "worker-a"), w.client(r, "approver")
	g := claim(t, w.session(wa, time.Minute), tenant, "task-1")
	effect := ledger.Effect{Kind: devprovider.KindDNS, Target: "checkout.example", Params: json.RawMessage(`{"value":"db-2"}`)}
	pre := ledger.Observation{Digest: devprovider.Digest("db-1"), At: time.Now()}

	stale := effect
	stale.Policy = "v6"
	lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.InvalidInput, func() error {
		_, err := wa.Propose(ctx, g, "op-1", stale, pre)
		return err
	})
	rec, err := wa.Propose(ctx, g, "op-1", effect, pre)
	if err != nil || rec.Effect.Policy != v7 {
		t.Fatalf("Propose with no policy: %v, recorded under %q; want %q", err, rec.Effect.Policy, v7)
	}
	approve := func() {
		t.Helper()
		a, err := ap.Authorize(ctx, tenant, "task-1", "op-1", ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest})
		if err != nil || a.State != ledger.Authorized || a.Approval.Policy != p.Current() {
			t.Fatalf("Authorize: %v, %s under %q; want AUTHORIZED under %q", err, a.State, a.Approval.Policy, p.Current())
		}
	}
	approve()

	writePolicy(t, path, `{"version":"v7","rules":{"promotions_per_hour":2}}`)
	if changed, err := p.Reload(); err != nil || !changed || p.Current() == v7 {
		t.Fatalf("Reload: %v, changed %v, policy %q", err, changed, p.Current())
	}
	got, err := wa.Dispatch(ctx, g, "op-1")
	if err != nil || got.State != ledger.Proposed {
		t.Fatalf("Dispatch under a changed policy: %v, %s; want PROPOSED again", err, got.State)
	}
	if calls := w.provider.Calls(); len(calls) != 0 {
		t.Fatalf("the provider saw %+v", calls)
	}
	approve()
	if got, err = wa.Dispatch(ctx, g, "op-1"); err != nil || got.State != ledger.Confirmed {
		t.Fatalf("Dispatch after the new approval: %v, %s", err, got.State)
	}
	_, journal, err := wa.Record(ctx, tenant, "task-1", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		to     ledger.State
		policy string
	}{{ledger.Proposed, v7}, {ledger.Authorized, v7}, {ledger.Proposed, p.Current()}, {ledger.Authorized, p.Current()},
		{ledger.Dispatching, p.Current()}, {ledger.Confirmed, p.Current()}}
	if len(journal) != len(want) {
		t.Fatalf("journal %+v", journal)
	}
	for i, j := range journal {
		if j.To != want[i].to || j.Policy != want[i].policy {
			t.Errorf("journal entry %d: %s under %q, want %s under %q", i+1, j.To, j.Policy, want[i].to, want[i].policy)
		}
	}
}

// Watch rereads the policy file when it changes; a file that no longer
// reads as a policy keeps the current one.
func TestThePolicyFollowsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.json")
	writePolicy(t, path, `{"version":"v1","rules":[]}`)
	p, err := gateway.LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	v1 := p.Current()
	ctx, cancel := context.WithCancel(lgtest.Ctx(t))
	done := make(chan struct{})
	go func() { p.Watch(ctx, 10*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitPolicy := func(changed func(string) bool) string {
		t.Helper()
		for {
			if cur := p.Current(); changed(cur) {
				return cur
			}
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				t.Fatalf("the policy stayed %q", p.Current())
			}
		}
	}
	writePolicy(t, path, `{"version":"v2","rules":[]}`)
	v2 := waitPolicy(func(cur string) bool { return cur != v1 })
	if !strings.HasPrefix(v2, "v2@") {
		t.Fatalf("policy %q after the file named v2", v2)
	}
	for _, bad := range []string{`{"version":"v3"}`, `{"version":"","rules":{}}`, `{"version":"v3","rules":{},"extra":1}`, `not json`} {
		writePolicy(t, path, bad)
		if _, err := p.Reload(); err == nil || p.Current() != v2 {
			t.Errorf("policy file %s: Reload %v, policy %q; want an error and %q kept", bad, err, p.Current(), v2)
		}
	}
	if _, err := gateway.LoadPolicy(filepath.Join(t.TempDir(), "absent.json")); err == nil {
		t.Error("LoadPolicy of a missing file: no error")
	}
}
