package cli_test

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestGet: the protected state as the last commit left it — value,
// version, operation and epoch of that commit, its revision — in JSON
// (value in base64), as a table, and as raw bytes with --value-only.
func TestGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, grant := e.claim(t, "acme", "invoices", "worker-1", "30s")
	want(t, e.lg(t, "commit", "--grant", grant, "--operation", "op-1", "--value", "draft", "--expected-version", "0"),
		cli.ExitDone, coordinator.Committed)
	r := e.lg(t, "commit", "--grant", grant, "--operation", "op-2", "--value", "paid", "--expected-version", "1")
	want(t, r, cli.ExitDone, coordinator.Committed)
	var receipt struct {
		Revision int64 `json:"revision"`
	}
	decode(t, r, &receipt)

	r = e.lg(t, "get", "--tenant", "acme", "--task", "invoices")
	obj := want(t, r, cli.ExitDone, "ok")
	st, _ := obj["state"].(map[string]any)
	if st["value"] != base64.StdEncoding.EncodeToString([]byte("paid")) || st["version"] != 2.0 || st["operation"] != "op-2" ||
		st["epoch"] != float64(g.Epoch) || st["revision"] != float64(receipt.Revision) {
		t.Fatalf("get: %s (receipt revision %d, epoch %d)", r.stdout, receipt.Revision, g.Epoch)
	}
	r = e.lg(t, "get", "--tenant", "acme", "--task", "invoices", "-o", "table")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	wantFields(t, lines[1], "acme", "invoices", "2", "op-2", strconv.FormatInt(g.Epoch, 10), strconv.FormatInt(receipt.Revision, 10), `"paid"`)
	if r := e.lg(t, "get", "--tenant", "acme", "--task", "invoices", "--value-only"); r.code != 0 || r.stdout != "paid" {
		t.Fatalf("--value-only: exit %d, %q", r.code, r.stdout)
	}

	t.Run("binary", func(t *testing.T) {
		_, grant := e.claim(t, "acme", "blob", "worker-1", "30s")
		r := e.exec(t, call{args: []string{"commit", "--grant", grant, "--operation", "op-1", "--value-file", "-", "--expected-version", "0"},
			stdin: "\x00\xff\x01binary"})
		want(t, r, cli.ExitDone, coordinator.Committed)
		if r := e.lg(t, "get", "--tenant", "acme", "--task", "blob", "--value-only"); r.code != 0 || r.stdout != "\x00\xff\x01binary" {
			t.Fatalf("--value-only: exit %d, %q", r.code, r.stdout)
		}
		r = e.lg(t, "get", "--tenant", "acme", "--task", "blob", "-o", "table")
		if !strings.Contains(r.stdout, "(9 bytes, binary") {
			t.Fatalf("table of a binary value:\n%s", r.stdout)
		}
	})
	t.Run("never committed", func(t *testing.T) {
		r := e.lg(t, "get", "--tenant", "acme", "--task", "nothing")
		obj := want(t, r, cli.ExitDone, "ok")
		if st, _ := obj["state"].(map[string]any); st["version"] != 0.0 || st["value"] != nil || st["revision"] != 0.0 {
			t.Fatalf("get of a task never committed: %s", r.stdout)
		}
	})
}
