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
	if err := os.WriteFile(p, []byte(`{`+base+`,"identities":[{"id":"spiffe://x/w","roles":["worker"],"tenants":["*"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.LoadConfig(p)
	if err != nil || len(cfg.Identities) != 1 || !cfg.Identities[0].Serves("any") {
		t.Fatalf("LoadConfig of a good file: %+v, %v", cfg, err)
	}
}
