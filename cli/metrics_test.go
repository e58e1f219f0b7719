package cli_test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
)

// TestMetricsAddr: watch (which opens the keyspace read-only: operation
// "open") serves leasegate's metrics on --metrics-addr while
// it runs; an address it cannot listen on is invalid_input before any I/O.
func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claim(t, "acme", "a", "w1", "30s")
	b := e.start(t, "--log-level", "info", "watch", "--metrics-addr", "127.0.0.1:0")
	b.stdout.waitFor(t, `"type":"owned"`)
	logs := b.stderr.waitFor(t, "serving metrics")
	url := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/metrics`).FindString(logs)
	if url == "" {
		t.Fatalf("no metrics URL in the log:\n%s", logs)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	for _, s := range []string{`leasegate_txn_duration_seconds_count{operation="open"}`, "leasegate_sessions 0", "go_goroutines "} {
		if !strings.Contains(string(body), s) {
			t.Errorf("scrape lacks %q:\n%s", s, body)
		}
	}
	b.cancel()
	if r := b.wait(t); r.code != 0 {
		t.Fatalf("watch: exit %d, stderr %s", r.code, r.stderr)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("the metrics endpoint outlived the command")
	}

	for _, addr := range []string{"nonsense", "127.0.0.1:99999"} {
		for _, args := range [][]string{{"watch"}, {"drill", "--trials", "1"}, {"bench", "--workers", "1"},
			{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--", "true"}} {
			args = slices.Insert(args, 1, "--metrics-addr", addr) // before run's --
			r := e.lg(t, args...)
			want(t, r, cli.ExitInvalid, coordinator.InvalidInput)
			if !strings.Contains(r.stderr, "metrics-addr") {
				t.Errorf("%v: %s", args, r.stderr)
			}
		}
	}
}
