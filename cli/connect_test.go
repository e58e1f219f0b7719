package cli_test

import (
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestAuth: --user and --password (or name:password, or the environment)
// reach an etcd with authentication on; a wrong password, or no
// credentials at all, is unauthenticated (exit 6: fix the credentials;
// nothing was written), never a hold.
func TestAuth(t *testing.T) {
	t.Parallel()
	// WithAuth: root with password s3cret, auth on, and a cheap password
	// hash, so that logins stay well within --dial-timeout under -race.
	cl := embedtest.NewCluster(t, embedtest.WithAuth("s3cret"))
	lgtest.CoordinatorOf(t, cl.Client(t)) // the keyspace realm show reads
	eps := strings.Join(cl.Endpoints(), ",")
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		wantD coordinator.Disposition
	}{
		{"user and password", []string{"--user", "root", "--password", "s3cret"}, cli.ExitDone, "ok"},
		{"name:password", []string{"--user", "root:s3cret"}, cli.ExitDone, "ok"},
		{"wrong password", []string{"--user", "root", "--password", "nope"}, cli.ExitDenied, coordinator.Unauthenticated},
		{"no credentials", nil, cli.ExitDenied, coordinator.Unauthenticated}, // not a hold
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--endpoints", eps, "-o", "json", "--command-timeout", "2s"}, tc.args...)
			r := execApp(t, call{}, append(args, "realm", "show")...)
			want(t, r, tc.code, tc.wantD)
		})
	}
	t.Run("endpoints, user and password from the environment", func(t *testing.T) {
		t.Parallel()
		out := asProcess(t, []string{"LEASEGATE_ENDPOINTS=" + eps, "LEASEGATE_USER=root", "LEASEGATE_PASSWORD=s3cret"}, "-o", "json", "realm", "show")
		if !strings.HasPrefix(out, `{"disposition":"ok","realm":`) {
			t.Fatalf("realm show: %q", out)
		}
	})
}

// TestNotEtcd: an endpoint that speaks HTTP/2 and gRPC but is not etcd
// answers every call with Unimplemented. Reads and acting commands alike
// are a hold (authority_unavailable, exit 3) with exactly one stderr line —
// never outcome_unknown: nothing there could have applied a write.
func TestNotEtcd(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer() // no services: every method is Unimplemented
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	e := newEnv(t)
	_, grant := e.claim(t, "tenant", "task", "owner", "30s")
	other := &env{endpoints: []string{l.Addr().String()}, prefix: e.prefix}
	for _, args := range [][]string{
		{"list"},
		{"status", "--tenant", "t", "--task", "k"},
		{"get", "--tenant", "t", "--task", "k"},
		{"realm", "show"},
		{"lease", "list"},
		{"claim", "--tenant", "t", "--task", "k", "--owner", "o"},
		{"commit", "--grant", grant, "--operation", "op", "--value", "v", "--expected-version", "0"},
		{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--", "true"},
	} {
		t.Run(strings.Join(args[:min(2, len(args))], " "), func(t *testing.T) {
			t.Parallel()
			r := other.lg(t, args...)
			want(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
		})
	}
}

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
