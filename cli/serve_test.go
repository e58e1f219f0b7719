package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/lgtest"
)

// serve --dev on an existing etcd (--endpoints) writes its certificates,
// prints its address and a curl line, serves a worker through the Go
// client, and stops cleanly on its context.
func TestServeDev(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	b := e.start(t, "serve", "--dev", dir, "--listen", "127.0.0.1:0")
	line := b.stdout.waitFor(t, "\n")
	var out struct {
		Disposition string `json:"disposition"`
		Address     string `json:"address"`
		Curl        string `json:"curl"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &out); err != nil {
		t.Fatalf("serve printed %q: %v", line, err)
	}
	if out.Disposition != "ok" || !strings.HasPrefix(out.Address, "https://127.0.0.1:") || !strings.Contains(out.Curl, out.Address) {
		t.Fatalf("serve printed %+v", out)
	}
	tlsCfg, err := client.TLSConfig(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "worker.pem"), filepath.Join(dir, "worker-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := client.New(out.Address, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ctx := lgtest.Ctx(t)
	s, err := gw.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	g, err := s.Claim(ctx, "demo", "checkout")
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if _, err := gw.Commit(ctx, g, fencedtxn.Intent{Tenant: "demo", Task: "checkout", Operation: "op-1", Value: []byte("hi")}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	// The gateway wrote under the global --prefix, on the given etcd.
	if o, err := e.co.Owner(ctx, "demo", "checkout"); err != nil || o.Owner != g.Owner || !strings.HasPrefix(g.Owner, "spiffe://") {
		t.Fatalf("owner through etcd: %+v, %v (grant %+v)", o, err, g)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b.cancel()
	if r := b.wait(t); r.code != 0 {
		t.Fatalf("serve exited %d: %s", r.code, r.stderr)
	}
}

// serve wants exactly one of --config and --dev, before any I/O.
func TestServeNeedsConfigOrDev(t *testing.T) {
	r := execApp(t, call{}, "-o", "json", "serve")
	want(t, r, 2, coordinator.InvalidInput)
}
