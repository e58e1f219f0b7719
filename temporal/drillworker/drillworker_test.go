package drillworker_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/temporal/drillworker"
)

// buildWorker builds cmd/drillworker (without the race detector: it is the
// drilled program, run as processes) into a temporary directory.
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "drillworker")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/drillworker")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/drillworker: %v\n%s", err, out)
	}
	return bin
}

// TestTemporalRecoveryWorkerPassesTheDrill drills cmd/drillworker with
// `leasegate drill --worker`'s machinery (drill.Run with WithWorker) on
// seed 23's four trials, one real Temporal server (in-process, SQLite)
// and its workflow worker for the run: each instance is an activity
// worker process of the trial's queue. It checks, from the world only,
// zero violations on every grader; that the faults fired and reached the
// processes (a paused instance stopped for real, another instance claiming
// before its SIGCONT); and, from Temporal's own history, that after each
// stop Temporal retried the activity and a replacement instance — another
// worker process — ran the attempt that completed it.
func TestTemporalRecoveryWorkerPassesTheDrill(t *testing.T) {
	bin := buildWorker(t)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	host := drillworker.NewHost(ts.GetDefaultClient())
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Stop)
	t.Setenv(drillworker.EnvTemporal, ts.GetFrontendHostPort())
	t.Setenv(drillworker.EnvNamespace, ts.GetDefaultNamespace())

	cli := embedtest.NewCluster(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const trials = 4
	// Two trials at a time: each runs the drill's gateway in this (race
	// detector) process and up to four worker processes on the machine's
	// two cores, beside the incident package's tests.
	rep, err := drill.Run(ctx, cli, drill.WithTrials(trials), drill.WithSeed(23), drill.WithParallel(2),
		drill.WithPrefix("/temporal-worker"), drill.WithWorker(bin))
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
		t.Fatalf("the Temporal-driven worker: pass %v (%s), violations %v", rep.Pass, rep.Why, d.Violations)
	}
	if d.Faults[drill.FaultWorkerPaused]+d.Faults[drill.FaultWorkerKilled] == 0 {
		t.Fatalf("no instance was paused or killed in %d trials of seed 23 (it draws both): %v", trials, d.Faults)
	}
	t.Logf("%d trials, faults %v", d.Trials, d.Faults)
	for _, traj := range rep.Replayed {
		checkRetriedOnAReplacement(t, ts.GetDefaultClient(), traj)
	}
}

// checkRetriedOnAReplacement: in a trial whose first instance was paused
// or killed, the instance was stopped for real (state T, or it exited on
// the signal), another instance claimed the task before a paused one's
// SIGCONT, and the trial's workflow history shows an activity that
// completed on a retried attempt (≥ 2) run by another instance than the
// first.
func checkRetriedOnAReplacement(t *testing.T, tc sdkclient.Client, traj *drill.Trajectory) {
	t.Helper()
	stopped := false
	for i, e := range traj.Events {
		switch drill.FaultKind(e.Effect) {
		case drill.FaultWorkerPaused:
			stopped = true
			if !strings.Contains(e.Detail, "state T") {
				t.Errorf("trial %d: %s paused but not stopped: %s", traj.Trial, e.Actor, e.Detail)
			}
			claimed, woke := false, false
			for _, f := range traj.Events[i+1:] {
				if f.Kind == drill.KindNote && f.Actor == e.Actor && strings.HasPrefix(f.Detail, "SIGCONT") {
					woke = true
					break
				}
				claimed = claimed || (f.Kind == drill.KindClaim && f.Actor != e.Actor)
			}
			if !claimed || !woke {
				t.Errorf("trial %d: %s paused: another instance claimed before its SIGCONT %v, SIGCONT seen %v\n%s",
					traj.Trial, e.Actor, claimed, woke, traj.Render(false))
			}
		case drill.FaultWorkerKilled:
			stopped = true
		}
	}
	if !stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := fmt.Sprintf("incident-%d", traj.Trial)
	it := tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var retried []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("trial %d: the history of workflow %s: %v", traj.Trial, id, err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() >= 2 &&
			!strings.HasPrefix(a.GetIdentity(), "drill-instance-1@") {
			retried = append(retried, fmt.Sprintf("attempt %d by %s", a.GetAttempt(), a.GetIdentity()))
		}
	}
	if len(retried) == 0 {
		t.Errorf("trial %d: its first instance was stopped, but no activity of workflow %s completed on a retried attempt run by a replacement\n%s",
			traj.Trial, id, traj.Render(false))
	} else {
		t.Logf("trial %d: workflow %s: %s", traj.Trial, id, strings.Join(retried, ", "))
	}
}

// TestAnInstanceWithoutTemporalCannotUseWhatItWasGiven: an instance whose
// environment lacks the Temporal address, or whose plan is not the
// contract's, exits 2 naming what is missing, before any call.
func TestAnInstanceWithoutTemporalCannotUseWhatItWasGiven(t *testing.T) {
	env := map[string]string{
		drillworker.EnvGateway: "https://127.0.0.1:1/t/x", drillworker.EnvCA: "ca.pem", drillworker.EnvCert: "c.pem",
		drillworker.EnvKey: "k.pem", drillworker.EnvTenant: "t", drillworker.EnvTask: "incident-1",
		drillworker.EnvPlan:     `{"promote":{"kind":"db.promote","target":"db-2","params":{"target":"db-2"}},"traffic":{"kind":"dns.upsert","record":"r"}}`,
		drillworker.EnvInstance: "1", drillworker.EnvSessionTTL: "3", drillworker.EnvHeartbeatTimeout: "2",
	}
	for _, tc := range []struct{ name, key, value, want string }{
		{"no temporal", drillworker.EnvTemporal, "", drillworker.EnvTemporal + " is not set"},
		{"bad plan", drillworker.EnvPlan, `{"promote":{}}`, "the promotion needs"},
		{"bad ttl", drillworker.EnvSessionTTL, "soon", drillworker.EnvSessionTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{drillworker.EnvTemporal: "127.0.0.1:1"}
			for k, v := range env {
				e[k] = v
			}
			e[tc.key] = tc.value
			var out strings.Builder
			if code := drillworker.Main(func(k string) string { return e[k] }, &out); code != drillworker.ExitUsage {
				t.Fatalf("exit %d (%s), want %d", code, out.String(), drillworker.ExitUsage)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("output %q: want %q", out.String(), tc.want)
			}
		})
	}
}
