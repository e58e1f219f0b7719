package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
)

// TestDrillWorkerFlags: --worker with a flag of the built-in designs, with
// an empty command, or naming a command that does not exist is invalid
// input before anything starts.
func TestDrillWorkerFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--worker", "sh -c true", "--design", "fenced"},
		{"--worker", "sh -c true", "--scenario", "incident"},
		{"--worker", "sh -c true", "--providers", "real"},
		{"--worker", "sh -c true", "--via-gateway=false"},
		{"--worker", "  "},
		{"--worker", filepath.Join(t.TempDir(), "no-such-worker")},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := execApp(t, call{}, append([]string{"drill"}, args...)...)
			if r.code != cli.ExitInvalid || !strings.HasPrefix(r.stderr, "invalid_input: ") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Fatalf("exit %d, want %d with one invalid_input line\nstdout: %s\nstderr: %s", r.code, cli.ExitInvalid, r.stdout, r.stderr)
			}
		})
	}
}

// TestDrillWorkerThatBreaksTheContract: a worker that exits 2 (it could
// not use what it was given) fails the drill — exit 1, one line naming
// the contract and carrying the worker's output — never a pass.
func TestDrillWorkerThatBreaksTheContract(t *testing.T) {
	w := filepath.Join(t.TempDir(), "worker.sh")
	if err := os.WriteFile(w, []byte("#!/bin/sh\necho 'LEASEGATE_PLAN: cannot parse' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := execApp(t, call{}, "drill", "--worker", w, "--trials", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "does not follow the drill's contract") ||
		!strings.Contains(r.stderr, "LEASEGATE_PLAN: cannot parse") || strings.Contains(r.stdout, "PASS") {
		t.Fatalf("exit %d, want 1 naming the contract and the worker's output\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}
