package cli_test

import (
	"encoding/json"
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
