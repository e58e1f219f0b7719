package gateway_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/grpchealth"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

func healthOf(t *testing.T, w *world, r *replica, service string) grpchealth.Status {
	t.Helper()
	res, err := grpchealth.NewClient(w.httpClient(""), r.ts.URL).Check(lgtest.Ctx(t), &grpchealth.CheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health of %q: %v", service, err)
	}
	return res.Status
}

// A provider that does not answer does not stop the gateway: it serves
// (a worker opens a session and claims), the services are SERVING, and
// the adapter's own health service is NOT_SERVING, ProbeAdapters naming
// the nodes that did not answer. A provider that answers and takes the
// credential is SERVING; one that refuses the credential (named without
// the key's secret) is NOT_SERVING though it answers.
func TestHealthShowsEachProvider(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "pg.password")
	if err := os.WriteFile(pw, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := func() string { return "host=127.0.0.1 port=1 dbname=postgres user=leasegate connect_timeout=2" }
	pg, err := pgpromote.New([]pgpromote.Node{{Name: "db-a", ConnString: dead()}, {Name: "db-b", ConnString: dead()}}, pw, pgpromote.WithKind("pg.promote"))
	if err != nil {
		t.Fatal(err)
	}
	named := realprov.NewDNSServer(t)
	secret := filepath.Join(dir, "tsig.secret")
	if err := os.WriteFile(secret, []byte(named.Secret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(dir, "wrong.secret")
	if err := os.WriteFile(wrong, []byte(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 32)))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up, err := dnsupdate.NewWithKey(named.Addr, named.Zone, dnsupdate.Key{Name: named.KeyName, Algorithm: realprov.DNSKeyAlg, SecretFile: secret}, dnsupdate.WithKind("dns.real"))
	if err != nil {
		t.Fatal(err)
	}
	badKey, err := dnsupdate.NewWithKey(named.Addr, named.Zone, dnsupdate.Key{Name: named.KeyName, Algorithm: realprov.DNSKeyAlg, SecretFile: wrong}, dnsupdate.WithKind("dns.badkey"))
	if err != nil {
		t.Fatal(err)
	}
	r := w.replica(gateway.WithAdapters(pg, up, badKey))

	for service, want := range map[string]grpchealth.Status{
		"":                           grpchealth.StatusServing,
		"leasegate.v1.WorkerService": grpchealth.StatusServing,
		gateway.AdapterHealthService("db.promote"): grpchealth.StatusServing, // the in-memory dev provider
		gateway.AdapterHealthService("pg.promote"): grpchealth.StatusNotServing,
		gateway.AdapterHealthService("dns.real"):   grpchealth.StatusServing,
		gateway.AdapterHealthService("dns.badkey"): grpchealth.StatusNotServing,
	} {
		if got := healthOf(t, w, r, service); got != want {
			t.Errorf("health of %q: %v, want %v", service, got, want)
		}
	}
	// The gateway serves all the same.
	s := w.session(w.client(r, "worker-a"), 5*time.Second)
	claim(t, s, tenant, "task-1")

	srv, err := gateway.New(lgtest.CoordinatorOf(t, w.cl.Client(t)), gateway.WithSessionKey(w.key), gateway.WithAdapters(pg, up, badKey))
	if err != nil {
		t.Fatal(err)
	}
	failed := srv.ProbeAdapters(lgtest.Ctx(t))
	if len(failed) != 2 || failed["pg.promote"] == nil || failed["dns.badkey"] == nil {
		t.Fatalf("ProbeAdapters: %v, want pg.promote and dns.badkey", failed)
	}
	if msg := fmt.Sprint(failed["pg.promote"]); !strings.Contains(msg, "db-a: ") || !strings.Contains(msg, "db-b: ") {
		t.Fatalf("pg.promote's probe %q, want both nodes named", msg)
	}
	if msg := fmt.Sprint(failed["dns.badkey"]); !strings.Contains(msg, "refused the TSIG key") {
		t.Fatalf("dns.badkey's probe %q, want the key refused", msg)
	}
}
