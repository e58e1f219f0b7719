package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestHintsSayWhatToDo: the mistakes a newcomer makes get a line that says
// how to fix them, not only what failed.
func TestHintsSayWhatToDo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A TTL far past the test's run: the busy case below needs the holder
	// alive however slow a loaded machine runs the parallel subtests.
	_, grant := e.claim(t, "tenant", "task", "owner", "10m")
	table := e.lg(t, "-o", "table", "claim", "--tenant", "tenant", "--task", "other", "--owner", "owner", "--ttl", "10s")
	if table.code != 0 {
		t.Fatalf("claim: exit %d, %s", table.code, table.stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"a table as a grant file", []string{"renew", "--grant", e.file(t, table.stdout)}, "save claim's output with -o json"},
		{"a ttl without a unit", []string{"claim", "--tenant", "t", "--task", "k", "--owner", "o", "--ttl", "10"}, "a duration needs a unit: --ttl 10s"},
		{"a kill-after without a unit", []string{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--kill-after", "5", "--", "true"}, "--kill-after 5s"},
		{"a commit without a value", []string{"commit", "--grant", grant, "--operation", "op", "--expected-version", "0"}, "--value or --value-file is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.lg(t, tc.args...)
			want(t, r, cli.ExitInvalid, coordinator.InvalidInput)
			if !strings.Contains(r.stderr, tc.says) {
				t.Fatalf("stderr %q does not say %q", r.stderr, tc.says)
			}
		})
	}
	t.Run("busy points to run --wait", func(t *testing.T) {
		t.Parallel()
		r := e.lg(t, "claim", "--tenant", "tenant", "--task", "task", "--owner", "other", "--ttl", "10s")
		want(t, r, cli.ExitRefused, coordinator.Busy)
		if !strings.Contains(r.stderr, "'leasegate run --wait'") || !strings.Contains(r.stderr, "Session.Acquire waits") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
}

// stateValue reads the task's stored protected value straight from etcd.
func (e *env) stateValue(t *testing.T, tenant, task string) []byte {
	t.Helper()
	resp, err := e.client().Get(lgtest.Ctx(t), e.co.Keys().State(tenant, task))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("state key: %v, %v", resp, err)
	}
	var st store.StateRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &st); err != nil {
		t.Fatal(err)
	}
	return st.Value
}

// TestGrantFromStdin: --grant - reads claim's output or a bare grant.
func TestGrantFromStdin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, grant := e.claim(t, "acme", "invoices", "worker-1", "30s")
	bare, _ := json.Marshal(g)
	for i, stdin := range []string{readFile(t, grant), string(bare)} {
		r := e.exec(t, call{stdin: stdin, args: []string{"commit", "--grant", "-", "--operation", "op",
			"--value", "v", "--expected-version", "0"}})
		d := coordinator.Committed
		if i > 0 {
			d = coordinator.HistoricalRetry
		}
		want(t, r, cli.ExitDone, d)
	}
}
