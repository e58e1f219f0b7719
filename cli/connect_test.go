package cli_test

import (
	"strings"
	"testing"

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
