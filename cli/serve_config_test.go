package cli_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
)

// serve --config checks the whole configuration — the file, the files it
// names, every adapter — before it dials etcd or listens: each fault is
// exit 2 (invalid_input) with one line naming the field, and nothing
// served. etcd is a dead endpoint here, so a check that came after the
// dial would answer authority_unavailable instead. Each case is green only
// while its check is there.
func TestServeConfigRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "pki"), "test.example", "w1")
	if err != nil {
		t.Fatal(err)
	}
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := file("session.key", strings.Repeat("k", 32), 0o600)
	openKey := file("open-session.key", strings.Repeat("k", 32), 0o644)
	shortKey := file("short-session.key", "short", 0o600)
	openTLSKey := file("open-server-key.pem", readFile(t, certs.ServerKey), 0o644)
	password := file("etcd.password", "pw\n", 0o600)
	pgPassword := file("pg.password", "pw\n", 0o600)
	listen := deadEndpoint(t)
	base := func() map[string]any {
		return map[string]any{
			"listen":           listen,
			"tls":              map[string]string{"cert": certs.ServerCert, "key": certs.ServerKey, "client_ca": certs.CA},
			"etcd":             map[string]any{"endpoints": []string{deadEndpoint(t)}},
			"session_key_file": key,
			"identities":       []map[string]any{{"id": certs.IDs["w1"], "roles": []string{"worker"}, "tenants": []string{"acme"}}},
			"adapters": []map[string]any{{"type": "pgpromote", "pgpromote": map[string]any{
				"nodes":         []map[string]string{{"name": "db-a", "conn": "host=127.0.0.1 port=5432 user=leasegate"}, {"name": "db-b", "conn": "host=127.0.0.1 port=5433 user=leasegate"}},
				"password_file": pgPassword}}},
		}
	}
	for _, c := range []struct {
		name   string
		change func(m map[string]any)
		says   string
	}{
		{"an unknown field", func(m map[string]any) { m["adapter"] = []any{} }, `unknown field "adapter"`},
		{"no session key file", func(m map[string]any) { m["session_key_file"] = filepath.Join(dir, "absent") }, "session_key_file: session key file: open"},
		{"a session key others may read", func(m map[string]any) { m["session_key_file"] = openKey }, "session_key_file: session key file " + openKey + " has mode 0644"},
		{"a short session key", func(m map[string]any) { m["session_key_file"] = shortKey }, "session_key_file: " + shortKey + " holds 5 bytes, at least 32"},
		{"a server key others may read", func(m map[string]any) { m["tls"].(map[string]string)["key"] = openTLSKey }, "tls.key: server key file " + openTLSKey + " has mode 0644"},
		{"a server certificate that does not load", func(m map[string]any) { m["tls"].(map[string]string)["cert"] = certs.CA + ".absent" }, "tls: gateway: server certificate"},
		{"an etcd password without a user", func(m map[string]any) { m["etcd"].(map[string]any)["password_file"] = password }, "etcd.password_file: a password without etcd.user"},
		{"an etcd password file missing", func(m map[string]any) {
			m["etcd"].(map[string]any)["user"] = "leasegate"
			m["etcd"].(map[string]any)["password_file"] = filepath.Join(dir, "absent")
		}, "etcd.password_file: etcd password file: open"},
		{"an etcd client key that does not load", func(m map[string]any) {
			m["etcd"].(map[string]any)["cert"] = certs.Clients["w1"].Cert
			m["etcd"].(map[string]any)["key"] = filepath.Join(dir, "absent")
		}, "etcd.key: etcd client key file: stat"},
		{"an adapter's bad credential path", func(m map[string]any) {
			m["adapters"].([]map[string]any)[0]["pgpromote"].(map[string]any)["password_file"] = filepath.Join(dir, "absent")
		}, "adapters[0].pgpromote.password_file: password file: open"},
		{"an effect kind served twice", func(m map[string]any) {
			m["adapters"] = append(m["adapters"].([]map[string]any), map[string]any{"type": "dev-topology"})
		}, `adapters[1].kind: effect kind "db.promote" served twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := base()
			c.change(m)
			b, _ := json.Marshal(m)
			path := filepath.Join(t.TempDir(), "gateway.json")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			r := execApp(t, call{}, "-o", "json", "serve", "--config", path)
			out := want(t, r, 2, coordinator.InvalidInput)
			if _, served := out["address"]; served || !strings.Contains(r.stderr, c.says) {
				t.Fatalf("stdout %q, stderr %q: want nothing served and the line to say %q", r.stdout, r.stderr, c.says)
			}
		})
	}
}

// serve --config FILE --check checks as a start does and exits: each
// adapter with its provider's probe (a provider that does not answer from
// here is NOT_SERVING and still exit 0: a start would serve), nothing
// dialled nor listened; a bad configuration is exit 2 as at a start;
// --check without --config is refused before any I/O.
func TestServeCheck(t *testing.T) {
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "pki"), "test.example", "w1")
	if err != nil {
		t.Fatal(err)
	}
	key, pw := filepath.Join(dir, "session.key"), filepath.Join(dir, "pg.password")
	for p, content := range map[string]string{key: strings.Repeat("k", 32), pw: "pw\n"} {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listen := deadEndpoint(t)
	dead := "host=127.0.0.1 port=1 user=leasegate connect_timeout=2"
	cfg := map[string]any{
		"listen":           listen,
		"tls":              map[string]string{"cert": certs.ServerCert, "key": certs.ServerKey, "client_ca": certs.CA},
		"etcd":             map[string]any{"endpoints": []string{deadEndpoint(t)}},
		"session_key_file": key,
		"adapters": []map[string]any{
			{"type": "pgpromote", "pgpromote": map[string]any{"nodes": []map[string]string{{"name": "db-a", "conn": dead}, {"name": "db-b", "conn": dead}}, "password_file": pw}},
			{"type": "dev-dns"},
		},
	}
	write := func(m map[string]any) string {
		b, _ := json.Marshal(m)
		p := filepath.Join(t.TempDir(), "gateway.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r := execApp(t, call{}, "-o", "json", "serve", "--config", write(cfg), "--check")
	out := want(t, r, 0, coordinator.OK)
	var got struct {
		Adapters []struct{ Kind, Type, Health, Error string }
	}
	b, _ := json.Marshal(out)
	_ = json.Unmarshal(b, &got)
	if len(got.Adapters) != 2 || got.Adapters[0].Kind != "db.promote" || got.Adapters[0].Health != "NOT_SERVING" ||
		!strings.Contains(got.Adapters[0].Error, "db-a: ") || got.Adapters[1].Kind != "dns.upsert" || got.Adapters[1].Health != "SERVING" {
		t.Fatalf("--check printed %s", r.stdout)
	}
	if l, err := net.Listen("tcp", listen); err != nil { // nothing took the address
		t.Fatalf("--check listened on %s: %v", listen, err)
	} else {
		l.Close()
	}

	cfg["adapters"] = append(cfg["adapters"].([]map[string]any), map[string]any{"type": "dev-topology"})
	r = execApp(t, call{}, "-o", "json", "serve", "--config", write(cfg), "--check")
	want(t, r, 2, coordinator.InvalidInput)
	if !strings.Contains(r.stderr, `adapters[2].kind: effect kind "db.promote" served twice`) {
		t.Fatalf("stderr %q", r.stderr)
	}
	want(t, execApp(t, call{}, "-o", "json", "serve", "--dev", dir, "--check"), 2, coordinator.InvalidInput)
}
