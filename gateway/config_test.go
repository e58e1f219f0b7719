package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/gateway"
)

// A configuration is checked whole when it is read: a misspelt field, an
// identity that cannot be an owner label, an unknown role, an identity with
// no tenant, a worker that is also an approver (it could approve its own
// effects) are each refused, naming what is wrong.
func TestLoadConfigRefusesWhatItCannotUse(t *testing.T) {
	base := `"tls":{"cert":"s.pem","key":"k.pem","client_ca":"ca.pem"},"etcd":{"endpoints":["127.0.0.1:2379"]},"session_key_file":"key"`
	for _, c := range []struct{ name, json, says string }{
		{"a misspelt field", `{` + base + `,"identites":[]}`, "unknown field"},
		{"an identity with a space", `{` + base + `,"identities":[{"id":"worker one","roles":["worker"],"tenants":["t"]}]}`, "owner label"},
		{"an unknown role", `{` + base + `,"identities":[{"id":"w","roles":["admin"],"tenants":["t"]}]}`, "roles are worker, approver, operator"},
		{"no tenant", `{` + base + `,"identities":[{"id":"w","roles":["worker"]}]}`, "no tenant"},
		{"no client CA", `{"tls":{"cert":"s","key":"k"},"etcd":{"endpoints":["e"]},"session_key_file":"key"}`, "client_ca"},
		{"a worker that is an approver", `{` + base + `,"identities":[{"id":"w","roles":["worker","approver"],"tenants":["t"]}]}`, "could approve the effects it proposes"},
		{"a negative limit", `{` + base + `,"limits":{"sessions":-1}}`, "limits.sessions is -1"},
		{"an identity's negative limit", `{` + base + `,"identities":[{"id":"w","roles":["worker"],"tenants":["t"],"limits":{"grants":-5}}]}`, `"w": limits.grants is -5`},
		{"a misspelt limit", `{` + base + `,"limits":{"session":10}}`, "unknown field"},
		{"an identity twice", `{` + base + `,"identities":[{"id":"w","roles":["worker"],"tenants":["t"]},{"id":"w","roles":["approver"],"tenants":["t"]}]}`, "twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "gateway.json")
			if err := os.WriteFile(p, []byte(c.json), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := gateway.LoadConfig(p)
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("LoadConfig: %v, want an error saying %q", err, c.says)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(p, []byte(`{`+base+`,"limits":{"sessions":10,"watches":4},`+
		`"identities":[{"id":"spiffe://x/w","roles":["worker"],"tenants":["*"],"limits":{"grants":5}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.LoadConfig(p)
	if err != nil || len(cfg.Identities) != 1 || !cfg.Identities[0].Serves("any") {
		t.Fatalf("LoadConfig of a good file: %+v, %v", cfg, err)
	}
	if want := (gateway.Limits{Sessions: 10, Watches: 4}); cfg.Limits != want || cfg.Identities[0].Limits == nil ||
		*cfg.Identities[0].Limits != (gateway.Limits{Grants: 5}) {
		t.Fatalf("limits read %+v and %+v, want %+v and grants 5", cfg.Limits, cfg.Identities[0].Limits, want)
	}
}
