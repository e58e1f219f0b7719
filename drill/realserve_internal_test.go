package drill

import (
	"os"
	"strings"
	"testing"
)

// What drill/realserve_test.go (package drill_test) needs of the drill's
// insides: the providers' secrets, and a look at each worker process as
// it starts.

// ProviderSecrets are the real providers' credentials: the PostgreSQL
// password and the TSIG secret.
func ProviderSecrets(t testing.TB, p *RealProviders) []string {
	t.Helper()
	b, err := os.ReadFile(p.passwordFile)
	if err != nil {
		t.Fatal(err)
	}
	pw := strings.TrimSpace(string(b))
	if pw == "" || p.dns.Secret() == "" {
		t.Fatalf("the providers have no credentials to look for: password %q, TSIG secret %q", pw, p.dns.Secret())
	}
	return []string{pw, p.dns.Secret()}
}

// OnRealWorkerStarted calls f with each real-provider worker process as it
// starts, for the rest of t.
func OnRealWorkerStarted(t testing.TB, f func(d Design, pid int)) {
	realWorkerStarted = f
	t.Cleanup(func() { realWorkerStarted = nil })
}
