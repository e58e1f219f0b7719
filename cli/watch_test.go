package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestWatch streams owned, claimed and vacated events, then ends cleanly
// when interrupted.
func TestWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, first := e.claim(t, "acme", "a", "w1", "30s")
	b := e.start(t, "watch", "--tenant", "acme")
	b.stdout.waitFor(t, `"type":"owned"`)
	second, _ := e.claim(t, "acme", "b", "w2", "30s")
	e.claim(t, "elsewhere", "c", "w3", "30s") // another tenant: not shown
	b.stdout.waitFor(t, `"type":"claimed"`)
	want(t, e.lg(t, "release", "--grant", first), cli.ExitDone, coordinator.Released)
	out := b.stdout.waitFor(t, `"type":"vacated"`)
	b.cancel()
	if r := b.wait(t); r.code != 0 || r.stderr != "" {
		t.Fatalf("watch after interrupt: exit %d, stderr %q", r.code, r.stderr)
	}
	var events []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct {
			Disposition string                `json:"disposition"`
			Type        string                `json:"type"`
			Ownership   coordinator.Ownership `json:"ownership"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Disposition != "ok" {
			t.Fatalf("event %q: %v", line, err)
		}
		events = append(events, fmt.Sprintf("%s %s/%s %s", ev.Type, ev.Ownership.Tenant, ev.Ownership.Task, ev.Ownership.Owner))
		if ev.Type == "claimed" && ev.Ownership.Epoch != second.Epoch {
			t.Fatalf("claimed event %+v, want epoch %d", ev, second.Epoch)
		}
	}
	if got, want := strings.Join(events, "; "), "owned acme/a w1; claimed acme/b w2; vacated acme/a w1"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}

	t.Run("table", func(t *testing.T) {
		b := e.start(t, "watch", "-o", "table")
		out := b.stdout.waitFor(t, "elsewhere")
		b.cancel()
		b.wait(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		wantFields(t, lines[0], "EVENT", "TENANT", "TASK", "OWNER", "EPOCH", "LEASE", "REVISION")
		if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "owned" || f[1] != "acme" || f[2] != "b" || f[3] != "w2" {
			t.Fatalf("first event row %q", lines[1])
		}
		// Rows printed apart line up under the header, 16-digit lease IDs
		// included.
		lease, revision := strings.Index(lines[0], "LEASE"), strings.Index(lines[0], "REVISION")
		for _, row := range lines[1:] {
			f := strings.Fields(row)
			if len(f[5]) != 16 || strings.Index(row, " "+f[5]+" ")+1 != lease || !strings.HasSuffix(row, " "+f[6]) ||
				strings.LastIndex(row, " "+f[6])+1 != revision {
				t.Fatalf("row %q does not line up with the header %q", row, lines[0])
			}
		}
	})
}
