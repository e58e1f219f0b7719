package drill_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
)

// python3 is the interpreter the example workers run under; the tests that
// need it skip (one line) where it is absent.
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python example workers are not drilled")
	}
	return py
}

// runWorker drills argv for trials trials of seed.
func runWorker(t *testing.T, seed uint64, trials int, argv ...string) (*drill.Report, error) {
	t.Helper()
	cli := embedtest.NewCluster(t).Client(t)
	// Real processes on real time: a trial takes seconds, longer on a
	// loaded machine than lgtest.Ctx allows.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return drill.Run(ctx, cli, drill.WithTrials(trials), drill.WithSeed(seed), drill.WithParallel(trials),
		drill.WithPrefix("/worker"), drill.WithWorker(argv...))
}

// TestPythonRecoveryWorkerPasses: examples/python/recovery_worker.py,
// drilled as processes against the trial's gateway under the world's
// faults, scores zero on every grader; the faults fired (a drill whose
// faults never bite proves nothing).
func TestPythonRecoveryWorkerPasses(t *testing.T) {
	py := python3(t)
	const trials = 4
	rep, err := runWorker(t, 5, trials, py, "../examples/python/recovery_worker.py")
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Designs[drill.Worker]
	if d == nil || d.Trials != trials {
		t.Fatalf("report %+v: want %d trials of the worker", d, trials)
	}
	if !rep.Pass || d.TotalViolations != 0 {
		t.Fatalf("the recovery worker: pass %v (%s), violations %v", rep.Pass, rep.Why, d.Violations)
	}
	fired := 0
	for _, n := range d.Faults {
		fired += n
	}
	if fired == 0 {
		t.Fatalf("no fault fired in %d trials: %v", trials, d.Faults)
	}
}

// TestWorkerThatBreaksTheContractIsTheDrillsError: a worker that cannot
// use what it is given (exit 2), or fails before any call to the gateway,
// is the drill's error naming the contract — never a trial's violation
// or a pass — and a command that does not exist is invalid input.
func TestWorkerThatBreaksTheContractIsTheDrillsError(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"usage", `echo "no LEASEGATE_SOMETHING" >&2; exit 2`, "exited 2"},
		{"crash", `echo "Traceback: boom" >&2; exit 1`, "before any call to the gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := runWorker(t, 1, 1, script(tc.name+".sh", tc.body))
			if err == nil || rep != nil {
				t.Fatalf("report %+v, error %v: want the drill's error", rep, err)
			}
			if !errors.Is(err, drill.ErrWorkerContract) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want the contract named and %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "no LEASEGATE_SOMETHING") && !strings.Contains(err.Error(), "Traceback: boom") {
				t.Fatalf("error %q does not carry the worker's output", err)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		err := drill.CheckOptions(drill.WithWorker(filepath.Join(dir, "no-such-worker")))
		if coordinator.DispositionOf(err) != coordinator.InvalidInput {
			t.Fatalf("a missing worker: %v, want invalid_input", err)
		}
	})
}
