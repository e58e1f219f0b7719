package cli_test

import (
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestSecuredCluster: against etcd with client TLS (client certificates
// required) and auth on, --cacert/--cert/--key and --user/--password reach
// it as a user whose role has readwrite on the leasegate prefix only — the
// setup docs/operations.md gives — and every command works. Credentials
// refused are TestCredentialsRefused's.
func TestSecuredCluster(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithTLS(), embedtest.WithAuth("root-pw"))
	f := cl.TLSFiles()
	cl.AddPrefixUser(t, "worker", "worker-pw", coordinator.DefaultPrefix+"/")
	tlsFlags := []string{"--endpoints", strings.Join(cl.Endpoints(), ","), "--cacert", f.CA, "--cert", f.ClientCert, "--key", f.ClientKey}
	as := func(user, password string, args ...string) result {
		t.Helper()
		flags := append(append([]string{}, tlsFlags...), "-o", "json", "--command-timeout", "10s")
		if user != "" {
			flags = append(flags, "--user", user, "--password", password)
		}
		return execApp(t, call{}, append(flags, args...)...)
	}
	e := &env{dir: t.TempDir()}

	r := as("worker", "worker-pw", "claim", "--tenant", "acme", "--task", "invoices", "--owner", "w1", "--ttl", "30s")
	want(t, r, cli.ExitDone, coordinator.Granted)
	grant := e.file(t, r.stdout)
	want(t, as("worker", "worker-pw", "commit", "--grant", grant, "--operation", "op-1", "--value", "paid", "--expected-version", "0"),
		cli.ExitDone, coordinator.Committed)
	for _, args := range [][]string{
		{"status", "--tenant", "acme", "--task", "invoices"},
		{"list"},
		{"realm", "show"},
		{"renew", "--grant", grant},
		{"get", "--tenant", "acme", "--task", "invoices"},
		{"lease", "list"},
		{"lease", "show", "--grant", grant},
	} {
		r := as("worker", "worker-pw", args...)
		if r.code != cli.ExitDone {
			t.Fatalf("%v: exit %d, %s", args, r.code, r.stderr)
		}
	}
	want(t, as("worker", "worker-pw", "release", "--grant", grant), cli.ExitDone, coordinator.Released)

	t.Run("a mistyped prefix: 6 for the least-privilege user (the line says check --prefix first), 7 for root", func(t *testing.T) {
		r := as("worker", "worker-pw", "--prefix", "/leasegat", "list")
		want(t, r, cli.ExitDenied, coordinator.PermissionDenied)
		if !strings.Contains(r.stderr, "check --prefix first") || !strings.Contains(r.stderr, "/leasegat may be mistyped") {
			t.Fatalf("stderr %q does not say the prefix may be mistyped", r.stderr)
		}
		want(t, as(embedtest.RootUser, cl.RootPassword(), "--prefix", "/leasegat", "list"), cli.ExitNotFound, coordinator.NoKeyspace)
	})
	t.Run("a role without the prefix: permission_denied, nothing written", func(t *testing.T) {
		cl.AddPrefixUser(t, "stranger", "stranger-pw", "/other/")
		root := cl.Client(t)
		lgtest.WritesNothing(t, root, coordinator.DefaultPrefix+"/", "a denied user", func() {
			for _, args := range [][]string{
				{"claim", "--tenant", "acme", "--task", "invoices", "--owner", "w2", "--ttl", "30s"},
				{"commit", "--grant", grant, "--operation", "op-2", "--value", "v", "--expected-version", "1"},
				{"list"},
				{"realm", "rotate"},
			} {
				r := as("stranger", "stranger-pw", args...)
				want(t, r, cli.ExitDenied, coordinator.PermissionDenied)
			}
		})
	})
}
