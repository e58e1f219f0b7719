package drill_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
)

// python3 is the interpreter the example workers run under, as the path
// of its executable (sys.executable): a version manager's shim (pyenv's
// is a shell script that runs `pyenv exec`) costs about a second of a
// core per process started, and a trial starts up to four. The tests
// that need it skip (one line) where it is absent.
func python3(tb testing.TB) string {
	tb.Helper()
	py, err := exec.LookPath("python3")
	if err != nil && os.Getenv("LEASEGATE_REQUIRE_PYTHON") != "" {
		tb.Fatal("python3 is not installed and LEASEGATE_REQUIRE_PYTHON is set: run make python")
	}
	if err != nil {
		tb.Skip("python3 is not installed: the Python example workers are not drilled (make python installs it)")
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && exe != "" {
		return exe
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
// faults never bite proves nothing) and reached the processes: seed 23's
// four trials pause the first instance after the provider acknowledged
// its promotion (the seed's sequence) and between its effects, kill it
// in its traffic dispatch, drop the promotion's answer on both hops.
func TestPythonRecoveryWorkerPasses(t *testing.T) {
	py := python3(t)
	const trials = 4
	rep, err := runWorker(t, 23, trials, py, "../examples/python/recovery_worker.py")
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Designs[drill.Worker]
	if d == nil || d.Trials != trials {
		t.Fatalf("report %+v: want %d trials of the worker", d, trials)
	}
	if !rep.Pass || d.TotalViolations != 0 {
		for _, traj := range rep.Replayed {
			if vs := drill.Grade(traj); len(vs) > 0 {
				t.Logf("%s%v", traj.Render(false), vs)
			}
		}
		t.Fatalf("the recovery worker: pass %v (%s), violations %v", rep.Pass, rep.Why, d.Violations)
	}
	for _, k := range []drill.FaultKind{drill.FaultWorkerPaused, drill.FaultWorkerKilled, drill.FaultAnswerDroppedAtWorker,
		drill.FaultResponseDropped} {
		if d.Faults[k] == 0 {
			t.Errorf("fault %s never fired in %d trials of seed 23 (it draws it): %v", k, trials, d.Faults)
		}
	}
	if len(rep.Replayed) != trials {
		t.Fatalf("%d trajectories kept, want %d", len(rep.Replayed), trials)
	}
	for _, traj := range rep.Replayed {
		checkStops(t, traj)
	}
}

// checkStops checks what the world shows of each stop of a worker
// process: a paused one was stopped for real (state T in /proc), another
// instance claimed the task before its SIGCONT, and after it the paused
// instance reached no provider; a killed one exited on the signal.
func checkStops(t *testing.T, traj *drill.Trajectory) {
	t.Helper()
	for i, e := range traj.Events {
		switch drill.FaultKind(e.Effect) {
		case drill.FaultWorkerPaused:
			if !strings.Contains(e.Detail, "state T") {
				t.Errorf("trial %d: %s paused but not stopped: %s", traj.Trial, e.Actor, e.Detail)
			}
			claimed, woke := false, -1
			for j, f := range traj.Events[i+1:] {
				if f.Kind == drill.KindClaim && f.Actor != e.Actor && woke < 0 {
					claimed = true
				}
				if f.Kind == drill.KindNote && f.Actor == e.Actor && strings.HasPrefix(f.Detail, "SIGCONT") {
					woke = i + 1 + j
				}
			}
			if !claimed || woke < 0 {
				t.Errorf("trial %d: %s paused: another instance claimed %v, SIGCONT seen %v\n%s", traj.Trial, e.Actor, claimed, woke >= 0, traj.Render(false))
				continue
			}
			for _, f := range traj.Events[woke:] {
				if f.Kind == drill.KindCall && f.By == e.Actor && (f.Effect == "PromoteTarget" || f.Effect == "ChangeResourceRecordSets") {
					t.Errorf("trial %d: %s reached the provider after it woke: %+v", traj.Trial, e.Actor, f)
				}
			}
		case drill.FaultWorkerKilled:
			exited := false
			for _, f := range traj.Events[i+1:] {
				exited = exited || (f.Actor == e.Actor && strings.Contains(f.Detail, "exited: -1"))
			}
			if !exited {
				t.Errorf("trial %d: %s killed but never exited on the signal\n%s", traj.Trial, e.Actor, traj.Render(false))
			}
		}
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

// TestPythonNaiveRecoveryWorkerFails: the incident's naive worker (a
// fresh key per attempt, no reconcile, traffic held on its cached writer)
// through the same gateway is caught: an answer it never reconciled
// (unresolved_unknown), traffic left off the writer.
func TestPythonNaiveRecoveryWorkerFails(t *testing.T) {
	py := python3(t)
	const trials = 4
	rep, err := runWorker(t, 3, trials, py, "../examples/python/naive_recovery_worker.py")
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Designs[drill.Worker]
	if rep.Pass || d.TotalViolations == 0 {
		t.Fatalf("the naive worker passed: %v", d.Violations)
	}
	if d.Violations[drill.GraderUnresolvedUnknown] == 0 {
		t.Fatalf("violations %v: want unresolved_unknown (it never reconciles a lost answer)", d.Violations)
	}
	if !strings.Contains(rep.Why, "violations") {
		t.Fatalf("why %q", rep.Why)
	}
}

// BenchmarkWorkerDrillPython measures the drill of a user's worker:
// examples/python/recovery_worker.py under the interpreter's own path (not
// a version manager's shim), 64 trials per iteration, 16 at once (a seed
// per iteration), reported as trials/s with the CPU a trial costs the
// drill's process and the worker's processes (docs/performance.md). 64
// trials keep the 16 slots full past the first wave of interpreters
// starting at once, as a long drill does.
func BenchmarkWorkerDrillPython(b *testing.B) {
	py := python3(b)
	cli := embedtest.NewCluster(b).Client(b)
	ctx := context.Background()
	trials, violations := 0, 0
	var self0, kids0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids0)
	for i := 0; b.Loop(); i++ {
		rep, err := drill.Run(ctx, cli, drill.WithTrials(64), drill.WithParallel(16), drill.WithSeed(uint64(2026+i)),
			drill.WithPrefix(fmt.Sprintf("/bench/%d", i)), drill.WithWorker(py, "../examples/python/recovery_worker.py"))
		if err != nil {
			b.Fatal(err)
		}
		d := rep.Designs[drill.Worker]
		trials += d.Trials
		violations += d.TotalViolations
		if d.TotalViolations > 0 {
			b.Logf("seed %d: violations %v (first trial of each: %v)", 2026+i, d.Violations, d.FirstViolation)
		}
	}
	var self1, kids1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids1)
	b.ReportMetric(float64(trials)/b.Elapsed().Seconds(), "trials/s")
	b.ReportMetric(float64(violations), "violations")
	// CPU per trial: the drill's process (etcd, gateway, world), and its
	// children (the worker's processes), user + system.
	b.ReportMetric((cpuSeconds(self1)-cpuSeconds(self0))/float64(trials), "drill-cpu-s/trial")
	b.ReportMetric((cpuSeconds(kids1)-cpuSeconds(kids0))/float64(trials), "worker-cpu-s/trial")
}

func cpuSeconds(r syscall.Rusage) float64 {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano()).Seconds()
}
