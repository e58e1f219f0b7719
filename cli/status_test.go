package cli_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestStatusAndList: the ownership views in JSON and as tables, for an
// owned task with a committed state and for a released one.
func TestStatusAndList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owned, ownedFile := e.claim(t, "acme", "invoices", "worker-1", "30s")
	want(t, e.lg(t, "commit", "--grant", ownedFile, "--operation", "op-1", "--value", "paid", "--expected-version", "0"),
		cli.ExitDone, coordinator.Committed)
	_, doneFile := e.claim(t, "acme", "payroll", "worker-2", "30s")
	want(t, e.lg(t, "release", "--grant", doneFile), cli.ExitDone, coordinator.Released)
	e.claim(t, "other", "task", "worker-3", "30s")

	t.Run("status json", func(t *testing.T) {
		var out struct {
			Disposition string                `json:"disposition"`
			Ownership   coordinator.Ownership `json:"ownership"`
		}
		decode(t, e.lg(t, "status", "--tenant", "acme", "--task", "invoices"), &out)
		o := out.Ownership
		if out.Disposition != "ok" || o.Owner != "worker-1" || o.Epoch != owned.Epoch || o.Lease != owned.Lease ||
			o.TTLLeft <= 0 || o.TTLLeft > 30 || o.StateVersion != 1 || o.LastOperation != "op-1" {
			t.Fatalf("status %+v", out)
		}
	})
	t.Run("status of a never-claimed task", func(t *testing.T) {
		r := e.lg(t, "status", "--tenant", "acme", "--task", "nothing", "-o", "table")
		if r.code != 0 || !strings.Contains(r.stdout, "acme    nothing  -      -      -      -    0") {
			t.Fatalf("exit %d\n%s", r.code, r.stdout)
		}
	})
	t.Run("list json, one tenant", func(t *testing.T) {
		var out struct {
			Disposition string                  `json:"disposition"`
			Tasks       []coordinator.Ownership `json:"tasks"`
		}
		decode(t, e.lg(t, "list", "--tenant", "acme"), &out)
		if out.Disposition != "ok" || len(out.Tasks) != 2 || out.Tasks[0].Task != "invoices" || out.Tasks[1].Task != "payroll" ||
			out.Tasks[1].Owned() || out.Tasks[1].Fence == 0 {
			t.Fatalf("list %+v", out)
		}
	})
	t.Run("list table, every tenant", func(t *testing.T) {
		r := e.lg(t, "list", "-o", "table")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 4 {
			t.Fatalf("exit %d\n%s", r.code, r.stdout)
		}
		wantFields(t, lines[0], "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "TTL", "STATE-VERSION", "LAST-OPERATION")
		f := strings.Fields(lines[1])
		if len(f) != 8 || f[0] != "acme" || f[1] != "invoices" || f[2] != "worker-1" || f[3] != strconv.FormatInt(owned.Epoch, 10) ||
			f[4] != fmt.Sprintf("%016x", owned.Lease) || !strings.HasSuffix(f[5], "s") || f[6] != "1" || f[7] != "op-1" {
			t.Fatalf("owned row %q", lines[1])
		}
		wantFields(t, lines[2], "acme", "payroll", "-", "-", "-", "-", "0", "-")
		if !strings.HasPrefix(lines[3], "other") {
			t.Fatalf("third row %q", lines[3])
		}
	})
}
