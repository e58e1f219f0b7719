package cli_test

import (
	"net/http/httptest"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/internal/lgtest"
)

// The worker's commands through --gateway: claim, commit, get and release
// reach etcd through leasegate serve, with the certificate's identity as
// owner; a command that does not work through it, and --owner, are refused
// before any I/O.
func TestCommandsThroughTheGateway(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(dir, "test.example", "w1")
	if err != nil {
		t.Fatal(err)
	}
	co, err := coordinator.New(lgtest.Ctx(t), e.client(), coordinator.WithPrefix(e.prefix))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(co, gateway.WithSessionKey([]byte("0123456789abcdef0123456789abcdef")),
		gateway.WithIdentities(gateway.Identity{ID: certs.IDs["w1"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{"acme"}}))
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := gateway.TLSConfig(certs.ServerCert, certs.ServerKey, certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.EnableHTTP2, ts.TLS = true, tlsCfg
	ts.StartTLS()
	t.Cleanup(ts.Close)
	lg := func(args ...string) result {
		return execApp(t, call{}, append([]string{"--gateway", ts.URL, "--cacert", certs.CA, "--cert", certs.Clients["w1"].Cert,
			"--key", certs.Clients["w1"].Key, "-o", "json"}, args...)...)
	}

	r := lg("claim", "--tenant", "acme", "--task", "invoices", "--ttl", "10s")
	out := want(t, r, 0, coordinator.Granted)
	grant := e.file(t, r.stdout)
	if out["grant"].(map[string]any)["owner"] != certs.IDs["w1"] {
		t.Fatalf("grant %v: the owner is not the certificate's identity", out)
	}
	want(t, lg("commit", "--grant", grant, "--operation", "op-1", "--value", "paid", "--expected-version", "0"), 0, coordinator.Committed)
	st := want(t, lg("get", "--tenant", "acme", "--task", "invoices"), 0, coordinator.OK)
	if st["state"].(map[string]any)["version"].(float64) != 1 {
		t.Fatalf("state %v, want version 1", st)
	}
	if o, err := e.co.Owner(lgtest.Ctx(t), "acme", "invoices"); err != nil || o.Owner != certs.IDs["w1"] {
		t.Fatalf("etcd shows %+v, %v", o, err)
	}
	want(t, lg("release", "--grant", grant), 0, coordinator.Released)
	want(t, lg("commit", "--grant", grant, "--operation", "op-2", "--value", "late", "--expected-version", "1"), 1, coordinator.ExpiredOwner)
	want(t, lg("claim", "--tenant", "other", "--task", "invoices", "--ttl", "10s"), 6, coordinator.PermissionDenied)

	before := e.snap(t)
	want(t, lg("list"), 2, coordinator.InvalidInput)
	want(t, lg("claim", "--tenant", "acme", "--task", "x", "--owner", "someone-else", "--ttl", "10s"), 2, coordinator.InvalidInput)
	if d := before.Diff(e.snap(t)); d != "" {
		t.Fatalf("a refused command wrote:\n%s", d)
	}
}
