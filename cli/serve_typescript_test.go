package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// startTypeScriptWorker runs clients/typescript's example worker
// (dist/examples/worker.js, built by make typescript) under Node against
// the gateway at address, with serve --dev's certificates in dir. It
// skips, naming make typescript, where Node or the built client is absent,
// unless LEASEGATE_REQUIRE_NODE is set (CI sets it): then it fails.
func startTypeScriptWorker(t *testing.T, address, dir, task string, ttl time.Duration) *lgtest.Process {
	t.Helper()
	script, err := filepath.Abs("../clients/typescript/dist/examples/worker.js")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(script)
	}
	if err != nil {
		if os.Getenv("LEASEGATE_REQUIRE_NODE") != "" {
			t.Fatalf("the TypeScript client is required (LEASEGATE_REQUIRE_NODE) but cannot run: %v; run make typescript", err)
		}
		t.Skipf("the TypeScript client is not built (%v): run make typescript", err)
	}
	return lgtest.StartProcess(t, "node", exec.Command(node, script, "--gateway", address, "--dir", dir, "--tenant", "demo", "--task", task,
		"--ttl", fmt.Sprint(int(ttl/time.Second))))
}

// serveDev starts serve --dev on the env's etcd with its certificates in
// a new directory, and returns the gateway's address and the directory.
func serveDev(t *testing.T, e *env) (address, dir string) {
	t.Helper()
	dir = t.TempDir()
	b := e.start(t, "serve", "--dev", dir, "--listen", "127.0.0.1:0")
	line := b.stdout.waitFor(t, "\n")
	var out struct{ Address string }
	if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &out); err != nil {
		t.Fatalf("serve printed %q: %v", line, err)
	}
	return out.Address, dir
}

// The TypeScript client, generated from the API with protoc-gen-es and run
// under Node against serve --dev: a real session kept alive, a claim, a
// commit, a precondition observed through the gateway, a proposal
// authorized with the approver's certificate and dispatched to the dev
// provider; then, SIGSTOPped past its TTL while another worker claims the
// task, its dispatch of an authorized change is refused stale_owner, and
// the change never leaves AUTHORIZED.
func TestTheTypeScriptWorker(t *testing.T) {
	e := newEnv(t)
	address, dir := serveDev(t, e)
	const task = "ts-checkout"
	ts := startTypeScriptWorker(t, address, dir, task, 2*time.Second)
	grant := ts.Next("claimed")["grant"].(map[string]any)
	ctx := lgtest.Ctx(t)
	if o, err := e.co.Owner(ctx, "demo", task); err != nil || o.Owner != grant["owner"] || fmt.Sprint(o.Epoch) != grant["epoch"] {
		t.Fatalf("etcd shows %+v (%v), the worker claimed %v", o, err, grant)
	}
	if rc := ts.Next("committed")["receipt"].(map[string]any); rc["disposition"] != string(coordinator.Committed) {
		t.Fatalf("commit receipt %v", rc)
	}
	if p := ts.Next("proposed"); p["state"] != string(ledger.Proposed) || p["precondition"] != devprovider.Digest("db-1") {
		t.Fatalf("proposed %v, want PROPOSED on the dev world's %q", p, devprovider.Digest("db-1"))
	}
	if a := ts.Next("authorized"); a["state"] != string(ledger.Authorized) {
		t.Fatalf("authorized %v", a)
	}
	if d := ts.Next("dispatched"); d["state"] != string(ledger.Confirmed) || len(d["providerIds"].([]any)) == 0 {
		t.Fatalf("dispatched %v, want CONFIRMED with the provider's id", d)
	}
	ts.Next("ready")

	// Paused past its TTL: its keepalive stops, etcd expires the lease, and
	// another worker claims the task through the gateway.
	ts.Signal(syscall.SIGSTOP)
	lgtest.WaitOwnerGone(t, e.co, "demo", task)
	tlsCfg, err := client.TLSConfig(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "worker-2.pem"), filepath.Join(dir, "worker-2-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := client.New(address, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	s, err := gw.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	g2, err := s.Claim(ctx, "demo", task)
	if err != nil {
		t.Fatalf("the replacement's claim: %v", err)
	}
	ts.Signal(syscall.SIGCONT)
	ts.Send("go")
	r := ts.Next("refused")
	if r["disposition"] != string(coordinator.StaleOwner) || r["code"] != "failed_precondition" {
		t.Fatalf("the woken worker's dispatch: %v, want stale_owner (failed_precondition)", r)
	}
	rec, journal, err := gw.Record(ctx, "demo", task, "dns-2")
	if err != nil || rec.State != ledger.Authorized {
		t.Fatalf("dns-2 is %s (%v), want AUTHORIZED for the new owner (epoch %d)", rec.State, err, g2.Epoch)
	}
	for _, tr := range journal {
		if tr.To == ledger.Dispatching {
			t.Fatalf("dns-2 was claimed for dispatch: %+v", tr)
		}
	}
	ts.Next("closed")
}
