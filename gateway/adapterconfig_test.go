package gateway_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// secrets writes the credential files of a good configuration (private,
// 0600) and the bad ones the cases name.
type secrets struct{ dir string }

func (s secrets) file(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

// goodAdapters is one adapter of each reference type, every setting
// valid, their files written under dir.
func goodAdapters(t *testing.T, s secrets, certs gateway.DevCerts) []map[string]any {
	t.Helper()
	pw := s.file(t, "pg.password", "hunter2\n", 0o600)
	tsig := s.file(t, "tsig.secret", "c2VjcmV0LXNlY3JldC1zZWNyZXQ=\n", 0o640)
	token := s.file(t, "idem.token", "tok-123\n", 0o600)
	return []map[string]any{
		{"type": "pgpromote", "pgpromote": map[string]any{
			"nodes": []map[string]string{
				{"name": "db-a", "conn": "host=127.0.0.1 port=5432 dbname=postgres user=leasegate"},
				{"name": "db-b", "conn": "host=127.0.0.1 port=5433 dbname=postgres user=leasegate"}},
			"password_file": pw, "promote_wait": "30s", "dial_timeout": "3s"}},
		{"type": "dnsupdate", "dnsupdate": map[string]any{
			"server": "127.0.0.1:53", "zone": "example.test.", "tsig_key_name": "leasegate-update.",
			"tsig_algorithm": "hmac-sha256", "tsig_secret_file": tsig, "timeout": "2s"}},
		{"type": "httpidem", "kind": "traffic.set", "httpidem": map[string]any{
			"url": "https://127.0.0.1:8443/v1/records", "lookup": "https://127.0.0.1:8443/v1/changes?key={key}",
			"key_retention": "24h", "token_file": token, "ca_file": certs.CA,
			"client_cert_file": certs.Clients["provider-client"].Cert, "client_key_file": certs.Clients["provider-client"].Key}},
	}
}

// configWith is a whole server configuration file around adapters.
func configWith(t *testing.T, dir string, adapters any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"tls":              map[string]string{"cert": "s.pem", "key": "k.pem", "client_ca": "ca.pem"},
		"etcd":             map[string]any{"endpoints": []string{"127.0.0.1:2379"}},
		"session_key_file": "session.key",
		"adapters":         adapters,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "gateway.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// set is a copy of the adapters with one setting changed: path is
// "index.member.field" ("0.pgpromote.password_file"), "index.field" for
// the adapter's own ("1.kind"); value nil deletes it.
func set(adapters []map[string]any, path string, value any) []map[string]any {
	out := make([]map[string]any, len(adapters))
	for i, a := range adapters {
		out[i] = map[string]any{}
		for k, v := range a {
			if m, ok := v.(map[string]any); ok {
				c := map[string]any{}
				for mk, mv := range m {
					c[mk] = mv
				}
				v = c
			}
			out[i][k] = v
		}
	}
	var i int
	parts := strings.Split(path, ".")
	fmt.Sscan(parts[0], &i)
	m := out[i]
	if len(parts) == 3 {
		m = m[parts[1]].(map[string]any)
	}
	if value == nil {
		delete(m, parts[len(parts)-1])
	} else {
		m[parts[len(parts)-1]] = value
	}
	return out
}

// Every adapter setting is checked when the server starts — by
// LoadConfig what needs no file, by NewAdapters (the adapters'
// constructors) the files and addresses — each refusal invalid input
// naming the field at fault, never quoting a secret. Each case goes green
// only while its check is there.
func TestAdapterConfigRefusedNamingTheField(t *testing.T) {
	dir := t.TempDir()
	s := secrets{dir}
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "certs"), trustDomain, "provider-client")
	if err != nil {
		t.Fatal(err)
	}
	good := goodAdapters(t, s, certs)
	worldReadable := s.file(t, "open.secret", "hunter2\n", 0o644)
	shortSecret := s.file(t, "short.secret", "c2hvcnQ=\n", 0o600)
	bindKey := s.file(t, "update.key", `key "k." { algorithm hmac-sha256; secret "c2VjcmV0LXNlY3JldC1zZWNyZXQ="; };`, 0o600)
	openKey := s.file(t, "open-key.pem", "not a key", 0o644)
	absent := filepath.Join(dir, "absent")

	for _, c := range []struct {
		name     string
		adapters any
		says     []string // all in the one line
	}{
		// Read from the file alone (LoadConfig).
		{"an unknown setting", set(good, "0.pgpromote.pasword_file", "x"), []string{"adapters[0]", `unknown field "pasword_file"`}},
		{"an unknown adapter field", set(good, "1.settings", "x"), []string{"adapters[1]", `unknown field "settings"`}},
		{"an unknown type", set(good, "2.type", "route53"), []string{"adapters[2].type", "route53", "pgpromote, dnsupdate, httpidem"}},
		{"another type's settings", set(good, "0.dnsupdate", map[string]any{"zone": "x."}), []string{"adapters[0].dnsupdate", "type pgpromote takes no dnsupdate settings"}},
		{"no settings", set(good, "1.dnsupdate", nil), []string{"adapters[1].dnsupdate", "needs its settings"}},
		{"a kind served twice", append(slices.Clone(good), map[string]any{"type": "dev-topology"}), []string{"adapters[3].kind", `"db.promote" served twice`, "adapters[0]"}},
		{"a kind set twice", set(good, "2.kind", "dns.upsert"), []string{"adapters[2].kind", `"dns.upsert" served twice`, "adapters[1]"}},
		{"a kind that is no label", set(good, "0.kind", "db promote"), []string{"adapters[0].kind"}},
		{"a dev type's other kind", []map[string]any{{"type": "dev-dns", "kind": "dns.other"}}, []string{"adapters[0].kind", "dev-dns serves kind dns.upsert only"}},
		{"a bad duration", set(good, "0.pgpromote.promote_wait", "soon"), []string{"adapters[0].pgpromote.promote_wait", `"soon"`}},
		{"a negative duration", set(good, "2.httpidem.key_retention", "-1h"), []string{"adapters[2].httpidem.key_retention", "positive"}},

		// Checked by the adapters' constructors (NewAdapters).
		{"one node", set(good, "0.pgpromote.nodes", []map[string]string{{"name": "db-a", "conn": "host=127.0.0.1"}}), []string{"adapters[0].pgpromote.nodes", "at least two"}},
		{"a node name twice", set(good, "0.pgpromote.nodes", []map[string]string{{"name": "db-a", "conn": "host=127.0.0.1"}, {"name": "db-a", "conn": "host=127.0.0.1"}}), []string{"adapters[0].pgpromote.nodes[1].name", "twice"}},
		{"a bad address", set(good, "0.pgpromote.nodes", []map[string]string{{"name": "db-a", "conn": "host=127.0.0.1"}, {"name": "db-b", "conn": "host=db-b.invalid port=5432"}}), []string{"adapters[0].pgpromote.nodes[1].conn", "does not resolve"}},
		{"a bad port", set(good, "0.pgpromote.nodes", []map[string]string{{"name": "db-a", "conn": "host=127.0.0.1"}, {"name": "db-b", "conn": "host=127.0.0.1 port=99999"}}), []string{"adapters[0].pgpromote.nodes[1].conn", "does not parse"}},
		{"a password in the config's text", set(good, "0.pgpromote.nodes", []map[string]string{{"name": "db-a", "conn": "host=127.0.0.1"}, {"name": "db-b", "conn": "host=127.0.0.1 password=hunter2"}}), []string{"adapters[0].pgpromote.nodes[1].conn", "put it in the password file"}},
		{"no password file", set(good, "0.pgpromote.password_file", nil), []string{"adapters[0].pgpromote.password_file", "no password file"}},
		{"a missing password file", set(good, "0.pgpromote.password_file", absent), []string{"adapters[0].pgpromote.password_file", "no such file"}},
		{"an unreadable password file", set(good, "0.pgpromote.password_file", dir), []string{"adapters[0].pgpromote.password_file", "is a directory"}},
		{"a password file others may read", set(good, "0.pgpromote.password_file", worldReadable), []string{"adapters[0].pgpromote.password_file", "mode 0644", "others may read"}},
		{"a promote wait in fractions", set(good, "0.pgpromote.promote_wait", "1500ms"), []string{"adapters[0].pgpromote.promote_wait", "whole seconds"}},
		{"a server without a port", set(good, "1.dnsupdate.server", "127.0.0.1"), []string{"adapters[1].dnsupdate.server", "host:port"}},
		{"a server that does not resolve", set(good, "1.dnsupdate.server", "ns1.invalid:53"), []string{"adapters[1].dnsupdate.server", "does not resolve"}},
		{"a zone that is no name", set(good, "1.dnsupdate.zone", "exa mple..test"), []string{"adapters[1].dnsupdate.zone", "not a domain name"}},
		{"a TSIG key name that is no name", set(good, "1.dnsupdate.tsig_key_name", "bad key..name"), []string{"adapters[1].dnsupdate.tsig_key_name"}},
		{"an unknown TSIG algorithm", set(good, "1.dnsupdate.tsig_algorithm", "hmac-md5"), []string{"adapters[1].dnsupdate.tsig_algorithm", "hmac-md5"}},
		{"a missing TSIG secret file", set(good, "1.dnsupdate.tsig_secret_file", absent), []string{"adapters[1].dnsupdate.tsig_secret_file", "no such file"}},
		{"a TSIG secret others may read", set(good, "1.dnsupdate.tsig_secret_file", worldReadable), []string{"adapters[1].dnsupdate.tsig_secret_file", "others may read"}},
		{"a short TSIG secret", set(good, "1.dnsupdate.tsig_secret_file", shortSecret), []string{"adapters[1].dnsupdate.tsig_secret_file", "at least 16 bytes"}},
		{"no TSIG key", set(set(set(good, "1.dnsupdate.tsig_secret_file", nil), "1.dnsupdate.tsig_key_name", nil), "1.dnsupdate.tsig_algorithm", nil), []string{"adapters[1].dnsupdate.tsig_secret_file", "no TSIG key"}},
		{"two TSIG keys", set(good, "1.dnsupdate.tsig_key_file", bindKey), []string{"adapters[1].dnsupdate.tsig_key_file", "not both"}},
		{"a URL that is not http", set(good, "2.httpidem.url", "ftp://x/y"), []string{"adapters[2].httpidem.url", "not an http(s) URL"}},
		{"a URL whose host does not resolve", set(good, "2.httpidem.url", "https://svc.invalid/v1"), []string{"adapters[2].httpidem.url", "does not resolve"}},
		{"a lookup without {key}", set(good, "2.httpidem.lookup", "https://127.0.0.1/v1/changes"), []string{"adapters[2].httpidem.lookup", "{key}"}},
		{"a token file others may read", set(good, "2.httpidem.token_file", worldReadable), []string{"adapters[2].httpidem.token_file", "others may read"}},
		{"a missing token file", set(good, "2.httpidem.token_file", absent), []string{"adapters[2].httpidem.token_file", "no such file"}},
		{"a CA file without certificates", set(good, "2.httpidem.ca_file", worldReadable), []string{"adapters[2].httpidem.ca_file", "no PEM certificate"}},
		{"a client key others may read", set(good, "2.httpidem.client_key_file", openKey), []string{"adapters[2].httpidem.client_key_file", "others may read"}},
		{"a client certificate that does not load", set(good, "2.httpidem.client_cert_file", absent), []string{"adapters[2].httpidem.client_cert_file", "no such file"}},
		{"a client certificate without its key", set(good, "2.httpidem.client_key_file", nil), []string{"adapters[2].httpidem.client_cert_file", "both"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := gateway.LoadConfig(configWith(t, t.TempDir(), c.adapters))
			if err == nil {
				_, err = cfg.NewAdapters()
				lgtest.Want(t, err, coordinator.InvalidInput)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			for _, w := range c.says {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q, want it to say %q", msg, w)
				}
			}
			if strings.Contains(msg, "hunter2") || strings.Contains(msg, "c2Vj") || strings.Contains(msg, "tok-123") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: one line, and never a secret", msg)
			}
		})
	}

	cfg, err := gateway.LoadConfig(configWith(t, dir, good))
	if err != nil {
		t.Fatalf("LoadConfig of the good adapters: %v", err)
	}
	ads, err := cfg.NewAdapters()
	if err != nil {
		t.Fatalf("NewAdapters of the good adapters: %v", err)
	}
	var kinds []string
	for _, a := range ads {
		kinds = append(kinds, a.Kind())
	}
	if want := []string{"db.promote", "dns.upsert", "traffic.set"}; !slices.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	// The same key as BIND's key clause (tsig_key_file) is as good.
	bindForm := set(set(set(set(good, "1.dnsupdate.tsig_secret_file", nil), "1.dnsupdate.tsig_key_name", nil), "1.dnsupdate.tsig_algorithm", nil), "1.dnsupdate.tsig_key_file", bindKey)
	if cfg, err = gateway.LoadConfig(configWith(t, t.TempDir(), bindForm)); err == nil {
		_, err = cfg.NewAdapters()
	}
	if err != nil {
		t.Fatalf("the key as tsig_key_file: %v", err)
	}
}

// The full example of docs/gateway.md reads as a configuration: every
// field it shows is one LoadConfig knows, each adapter's settings where
// its type wants them (the files it names are not on this machine, so
// NewAdapters is not asked).
func TestTheDocumentedConfigurationLoads(t *testing.T) {
	b, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "A full example, with the three reference adapters")
	if i < 0 {
		t.Fatal("docs/gateway.md has no full example")
	}
	start := strings.Index(doc[i:], "```json\n") + i + len("```json\n")
	end := strings.Index(doc[start:], "```") + start
	p := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(p, []byte(doc[start:end]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.LoadConfig(p)
	if err != nil {
		t.Fatalf("the documented configuration: %v", err)
	}
	var types []string
	for _, a := range cfg.Adapters {
		types = append(types, a.Type)
	}
	if want := []string{"pgpromote", "dnsupdate", "httpidem"}; !slices.Equal(types, want) {
		t.Fatalf("documented adapters %v, want %v", types, want)
	}
	// Every setting of the reference adapters is in the example (but
	// tsig_key_file, the other form of the TSIG key, which the table
	// gives).
	for _, m := range []any{gateway.PGPromoteConfig{}, gateway.DNSUpdateConfig{}, gateway.HTTPIdemConfig{}} {
		rt := reflect.TypeOf(m)
		for i := range rt.NumField() {
			f, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if f != "tsig_key_file" && !strings.Contains(doc[start:end], `"`+f+`"`) {
				t.Errorf("%s's %s is not in the documented example", rt.Name(), f)
			}
			if !strings.Contains(doc, "`"+f+"`") {
				t.Errorf("%s's %s is not explained in docs/gateway.md", rt.Name(), f)
			}
		}
	}
}
