package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// progressLine is a bench progress line on stderr: what a step measured,
// then how far the run is.
var progressLine = regexp.MustCompile(`^\S.* {2}\[\d+/\d+\]$`)

// wantBench checks a bench run that finished: exit 0, on stderr nothing but
// progress lines — the plan first — and, with -o json, disposition ok and
// no interruption.
func wantBench(t *testing.T, r result) map[string]any {
	t.Helper()
	if r.code != cli.ExitDone {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "bench") || !strings.Contains(lines[0], "about") {
		t.Fatalf("stderr's first line %q is not the plan with its expected length", lines[0])
	}
	for _, l := range lines {
		if !progressLine.MatchString(l) {
			t.Fatalf("stderr line %q is not a progress line\nstderr: %s", l, r.stderr)
		}
	}
	if !strings.HasPrefix(r.stdout, "{") {
		return nil
	}
	obj := lastJSON(t, r.stdout)
	if obj["disposition"] != "ok" || obj["interrupted"] != nil {
		t.Fatalf("report %v; want ok, complete", obj)
	}
	return obj
}

// TestBenchProgressLines: not on a terminal, a bench run prints its plan
// and then a line per finished cell on stderr, as it goes.
func TestBenchProgressLines(t *testing.T) {
	t.Parallel()
	r := execApp(t, call{}, "bench", "takeover", "--unsafe-no-fsync", "--trials", "2", "--causes", "revoke",
		"--contenders", "acquire,election")
	wantBench(t, r)
	for _, w := range []string{
		`(?m)^bench takeover: 4 trials \(2 per cause and contender: revoke × acquire,election\), about \S+  \[0/4\]$`,
		`(?m)^trial 1/2, from deletion: revoke/(acquire|election) [0-9.]+ ms \(grant [0-9.]+\), revoke/(acquire|election) [0-9.]+ ms \(grant [0-9.]+\)  \[2/4\]$`,
		`(?m)^trial 2/2, from deletion: .*  \[4/4\]$`,
	} {
		if !regexp.MustCompile(w).MatchString(r.stderr) {
			t.Errorf("stderr has no line matching %s:\n%s", w, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "CAUSE") || strings.Contains(r.stdout, "INTERRUPTED") {
		t.Errorf("table:\n%s", r.stdout)
	}
}

// TestBenchInterrupted: a bench command whose context is cancelled (what
// SIGINT, SIGTERM or SIGHUP do, in main) prints what it measured, ends its
// table with why it is partial, says on stderr that it was interrupted —
// not outcome_unknown — and exits 130.
func TestBenchInterrupted(t *testing.T) {
	t.Parallel()
	sigterm := errors.New("terminated signal received")
	for _, tc := range []struct {
		name   string
		args   []string
		stopAt string // the progress line after which the "signal" comes
		done   string // how far it got
	}{
		{"takeover", []string{"bench", "takeover", "--unsafe-no-fsync", "--trials", "50", "--causes", "revoke", "--contenders", "acquire,election"},
			"trial 1/50", "after 2 of 100 trials"},
		{"cells", []string{"bench", "--unsafe-no-fsync", "--workers", "1", "--rounds", "20", "--duration", "50ms", "--variants", "commit,put"},
			"round 1/20", "of 40 cells"},
		{"scale", []string{"bench", "scale", "--unsafe-no-fsync", "--sizes", "10,20", "--commits", "2", "--ttl", "1s", "--per-lock", "-1"},
			"10 grants: owner keys gone", "of 6 steps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, format := range []string{"table", "json"} {
				ctx, cancel := context.WithCancelCause(lgtest.Ctx(t))
				defer cancel(nil)
				c := call{ctx: ctx, stdout: newSyncBuffer(), stderr: newSyncBuffer()}
				done := make(chan result, 1)
				go func() { done <- execApp(t, c, append([]string{"-o", format}, tc.args...)...) }()
				c.stderr.waitFor(t, tc.stopAt)
				cancel(sigterm)
				r := <-done
				if r.code != cli.ExitInterrupted {
					t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", format, r.code, cli.ExitInterrupted, r.stdout, r.stderr)
				}
				lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
				last := lines[len(lines)-1]
				if !strings.HasPrefix(last, "interrupted (terminated signal received) after ") || !strings.Contains(last, tc.done) ||
					!strings.HasSuffix(last, "the figures printed are what was measured until then") || strings.Contains(r.stderr, "outcome_unknown") {
					t.Fatalf("%s: stderr's last line %q; want the interrupt, its cause and how far it got\nstderr: %s", format, last, r.stderr)
				}
				for _, l := range lines[:len(lines)-1] {
					if !progressLine.MatchString(l) {
						t.Fatalf("%s: stderr line %q is neither progress nor the interrupt", format, l)
					}
				}
				if format == "table" {
					if !strings.Contains(r.stdout, "INTERRUPTED: interrupted (terminated signal received)") {
						t.Fatalf("table does not end with the interrupt:\n%s", r.stdout)
					}
					continue
				}
				var obj map[string]any
				if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil {
					t.Fatalf("json: %v\n%s", err, r.stdout)
				}
				if why, _ := obj["interrupted"].(string); !strings.Contains(why, tc.done) {
					t.Fatalf("report's interrupted %q; want how far it got\n%s", why, r.stdout)
				}
				results, _ := obj["results"].([]any)
				if sizes, _ := obj["sizes"].([]any); len(results) == 0 && len(sizes) == 0 {
					t.Fatalf("report has nothing measured:\n%s", r.stdout)
				}
			}
		})
	}
}
