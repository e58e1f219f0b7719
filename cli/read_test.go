package cli_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestReadsNeverWrite: every command that reads (or acts only on what
// exists) against a prefix that holds no leasegate keyspace says so — one
// stderr line, {"disposition":"no_keyspace",...}, exit 7 — and creates
// nothing: the keyspace is empty before and after. An acting command
// (claim) then creates it.
func TestReadsNeverWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, grant := e.claim(t, "tenant", "task", "owner", "600s") // a live grant and lease, in another keyspace, alive past a slow run (52 s once under -race at load 24)
	e.prefix += "-wrong"
	if s := e.snap(t); len(s) != 0 {
		t.Fatalf("prefix %s not empty: %v", e.prefix, s)
	}
	e.writesNothing(t, "reads", func() {
		t.Run("group", func(t *testing.T) {
			for _, args := range [][]string{
				{"status", "--tenant", "tenant", "--task", "task"},
				{"list"},
				{"list", "--tenant", "tenant"},
				{"watch"},
				{"get", "--tenant", "tenant", "--task", "task"},
				{"realm", "show"},
				{"lease", "list"},
				{"lease", "show", coordinator.FormatLeaseID(g.Lease)},
				{"lease", "revoke", "--grant", grant},
				{"renew", "--grant", grant},
				{"release", "--grant", grant},
				{"gc"},
				{"gc", "--apply"},
			} {
				t.Run(strings.Join(args, " "), func(t *testing.T) {
					t.Parallel()
					r := e.lg(t, args...)
					obj := want(t, r, cli.ExitNotFound, coordinator.NoKeyspace)
					if d, _ := obj["detail"].(string); !strings.Contains(d, "no leasegate keyspace at prefix "+e.prefix) {
						t.Fatalf("detail %q does not name the prefix", d)
					}
				})
			}
		})
	})
	if o, err := e.co.Owner(t.Context(), "tenant", "task"); err != nil || !o.Owned() || o.Lease != g.Lease {
		t.Fatalf("the grant's lease was touched: %+v, %v", o, err)
	}
	nested := &env{endpoints: e.endpoints, prefix: strings.TrimSuffix(e.prefix, "-wrong") + "/owner"}
	want(t, nested.lg(t, "list"), cli.ExitInvalid, coordinator.InvalidInput) // inside another keyspace
	want(t, nested.lg(t, "claim", "--tenant", "t", "--task", "k", "--owner", "o"), cli.ExitInvalid, coordinator.InvalidInput)
	e.claim(t, "tenant", "task", "owner", "30s")
	if after := e.snap(t); len(after) == 0 {
		t.Fatal("claim did not create the keyspace")
	}
}

// TestStaleOwnerAfterRotation: after realm rotate, status and list show
// the pre-rotation owner as stale — not owning, no TTL — in JSON and in
// the table, until someone claims the task in the new realm.
func TestStaleOwnerAfterRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, _ := e.claim(t, "acme", "invoices", "worker-1", "30s")
	want(t, e.lg(t, "realm", "rotate"), cli.ExitDone, "ok")

	var st struct {
		Ownership coordinator.Ownership `json:"ownership"`
	}
	decode(t, e.lg(t, "status", "--tenant", "acme", "--task", "invoices"), &st)
	if o := st.Ownership; !o.Stale || o.Owned() || o.Owner != "worker-1" || o.Epoch != g.Epoch || o.TTLLeft != -1 {
		t.Fatalf("status after rotate: %+v", o)
	}
	r := e.lg(t, "list", "-o", "table")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	wantFields(t, lines[1], "acme", "invoices", "stale:worker-1", strconv.FormatInt(g.Epoch, 10), coordinator.FormatLeaseID(g.Lease), "-", "0", "-")
	r = e.lg(t, "lease", "list", "-o", "table")
	if !strings.Contains(r.stdout, "stale:acme/invoices") {
		t.Fatalf("lease list after rotate:\n%s", r.stdout)
	}

	// A claim in the new realm replaces the stale owner.
	g2, _ := e.claim(t, "acme", "invoices", "worker-2", "30s")
	decode(t, e.lg(t, "status", "--tenant", "acme", "--task", "invoices"), &st)
	if o := st.Ownership; o.Stale || !o.Owned() || o.Owner != "worker-2" || o.Epoch != g2.Epoch {
		t.Fatalf("status after the new claim: %+v", o)
	}
}
