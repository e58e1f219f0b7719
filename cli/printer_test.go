package cli_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestTableOutput: the grant commands' tables, the realm, and a refusal in
// table mode (nothing on stdout, one line on stderr).
func TestTableOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, grant := e.claim(t, "acme", "invoices", "worker-1", "30s")
	r := e.lg(t, "renew", "--grant", grant, "-o", "table")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("renew: exit %d\n%s", r.code, r.stdout)
	}
	wantFields(t, lines[0], "DISPOSITION", "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "REALM")
	wantFields(t, lines[1], "renewed", "acme", "invoices", "worker-1", strconv.FormatInt(g.Epoch, 10), fmt.Sprintf("%016x", g.Lease), g.Realm)

	r = e.lg(t, "commit", "--grant", grant, "--operation", "op-1", "--value", "v", "--expected-version", "0", "-o", "table")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	wantFields(t, lines[0], "DISPOSITION", "TENANT", "TASK", "OPERATION", "VERSION", "EPOCH", "REVISION")
	if f := strings.Fields(lines[1]); f[0] != "committed" || f[4] != "1" {
		t.Fatalf("commit row %q", lines[1])
	}

	r = e.lg(t, "realm", "show", "-o", "table")
	if r.stdout != "REALM\n"+e.co.Realm()+"\n" {
		t.Fatalf("realm show %q", r.stdout)
	}

	r = e.lg(t, "claim", "--tenant", "acme", "--task", "invoices", "--owner", "worker-2", "-o", "table")
	if r.code != cli.ExitRefused || r.stdout != "" {
		t.Fatalf("busy in table mode: exit %d, stdout %q", r.code, r.stdout)
	}
	wantRefusalLine(t, r, coordinator.Busy)
	if !strings.Contains(r.stderr, `held by "worker-1" since epoch `+strconv.FormatInt(g.Epoch, 10)) {
		t.Fatalf("busy does not name the holder: %q", r.stderr)
	}
}
