package cli_test

import (
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

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
