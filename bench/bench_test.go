package bench_test

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/bench"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestRunSmoke: tiny counts; every variant ran at every worker count in
// every round without a failure, and the report has every ratio. No figure
// is asserted: benchmarks are not timed tests.
func TestRunSmoke(t *testing.T) {
	t.Parallel()
	rounds, workers := 2, []int{1, 3}
	var cells int
	rep, err := bench.Run(lgtest.Ctx(t), bench.Config{Etcd: bench.Etcd{Dir: t.TempDir(), NoFsync: true}, Workers: workers,
		Rounds: rounds, Duration: 20 * time.Millisecond, Progress: func(p bench.Progress) { cells = p.Done }})
	if err != nil {
		t.Fatal(err)
	}
	if want := rounds * len(workers) * len(bench.Variants()); cells != want {
		t.Errorf("progress reported %d cells, want %d", cells, want)
	}
	if rep.Etcd != "embedded" || rep.Fsync != "off" || rep.Machine.CPUs < 1 {
		t.Errorf("report header %+v", rep)
	}
	seen := map[string]int{}
	for _, r := range rep.Results {
		seen[r.Variant]++
		if r.Ops < 1 || r.Errors != 0 || len(r.PerRound) != rounds || r.OpsPerSec <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
			t.Errorf("result %+v", r)
		}
		if r.CPUPerOpUs <= 0 || r.CPUCores <= 0 {
			t.Errorf("result %s/%d: no CPU measured (%v µs/op, %v CPUs)", r.Variant, r.Workers, r.CPUPerOpUs, r.CPUCores)
		}
	}
	bounds := map[string]int{}
	for _, b := range rep.Bounds {
		bounds[b.Name]++
		if b.Value <= 0 || b.Value >= 1 {
			t.Errorf("bound %+v: not in (0, 1)", b)
		}
	}
	for _, n := range []string{"gateway-commit / commit, http-floor", "gateway-commit / commit, grpc-floor"} {
		if bounds[n] != len(workers) {
			t.Errorf("bound %s reported %d times, want %d", n, bounds[n], len(workers))
		}
	}
	for _, v := range bench.Variants() {
		if seen[v] != len(workers) {
			t.Errorf("variant %s has %d results, want %d", v, seen[v], len(workers))
		}
	}
	names := map[string]bool{}
	for _, r := range rep.Ratios {
		names[r.Name] = true
		if len(r.PerRound) != rounds || r.Min <= 0 || r.Min > r.Median || r.Median > r.Max {
			t.Errorf("ratio %+v", r)
		}
		if (r.Target > 0) != (r.Met != nil) {
			t.Errorf("ratio %s: target %v, met %v", r.Name, r.Target, r.Met)
		}
	}
	for _, n := range []string{"commit / bare-commit", "claim-release / bare-claim-release", "claim-release / mutex",
		"gateway-commit / commit", "gateway-dispatch / ledger-dispatch"} {
		if !names[n] {
			t.Errorf("no ratio %s", n)
		}
	}
}

// TestRunPairedSmoke: in paired mode too every variant ran in every round.
func TestRunPairedSmoke(t *testing.T) {
	t.Parallel()
	rep, err := bench.Run(lgtest.Ctx(t), bench.Config{Etcd: bench.Etcd{Dir: t.TempDir(), NoFsync: true}, Workers: []int{2},
		Rounds: 2, Duration: 20 * time.Millisecond, Paired: true, Variants: []string{bench.Commit, bench.BareCommit, bench.Mutex}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Paired || len(rep.Results) != 3 || len(rep.Ratios) != 1 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Ops < 1 || r.Errors != 0 || len(r.PerRound) != 2 || r.OpsPerSec <= 0 {
			t.Errorf("result %+v", r)
		}
		if r.CPUPerOpUs != 0 { // variants share every moment: no CPU is theirs alone
			t.Errorf("paired result %s has CPU per op %v", r.Variant, r.CPUPerOpUs)
		}
	}
	if len(rep.Bounds) != 0 {
		t.Errorf("paired run reported bounds %+v", rep.Bounds)
	}
}

// TestRunWithALiveConsole: with Console, the gateway serves the console and
// a page of it stays open and live through the run: it loaded, and its
// live stream received the synced marker and the workers' claims.
func TestRunWithALiveConsole(t *testing.T) {
	t.Parallel()
	rep, err := bench.Run(lgtest.Ctx(t), bench.Config{Etcd: bench.Etcd{Dir: t.TempDir(), NoFsync: true}, Workers: []int{2},
		Rounds: 1, Duration: 20 * time.Millisecond, Paired: true, Variants: []string{bench.Commit, bench.GatewayCommit}, Console: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Console == nil {
		t.Fatalf("report's console %+v: no page held open", rep.Console)
	}
	// synced, then at least the two gateway workers' claims.
	if rep.Console.Events < 3 {
		t.Errorf("the live stream received %d events, want the synced marker and the workers' claims", rep.Console.Events)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]bench.Config{
		"no data dir":         {},
		"zero workers":        {Etcd: bench.Etcd{Dir: t.TempDir()}, Workers: []int{0}},
		"unknown variant":     {Etcd: bench.Etcd{Dir: t.TempDir()}, Variants: []string{"nope"}},
		"negative rounds":     {Etcd: bench.Etcd{Dir: t.TempDir()}, Rounds: -1},
		"no-fsync on cluster": {Etcd: bench.Etcd{Endpoints: []string{"127.0.0.1:1"}, NoFsync: true}},
	} {
		_, err := bench.Run(lgtest.Ctx(t), cfg)
		if coordinator.DispositionOf(err) != coordinator.InvalidInput {
			t.Errorf("%s: %v, want invalid_input", name, err)
		}
	}
}
