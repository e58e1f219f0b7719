package drill_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
)

// BenchmarkDrill measures the built-in designs' throughput as make drill
// runs them (16 trials in parallel, embedded etcd with fsync off): the
// fenced design through the gateway (the default), in the fast mode (the
// ledger in-process, --via-gateway=false), and the naive design, each
// alone; then make drill's whole run, both designs, in each mode. b.N
// trials per design, the fixtures included. Each reports trials/s, s/1200
// — the seconds 1,200 trials per design take at that rate, what `make
// drill` runs — and cpu-s/1200, the CPU (user + system) of this process,
// etcd embedded in it, for as many: the steadier figure on a shared
// machine. docs/performance.md reports it:
//
//	go test -run '^$' -bench '^BenchmarkDrill$/make-drill' -benchtime 1200x ./drill
func BenchmarkDrill(b *testing.B) {
	cli := embedtest.NewCluster(b).Client(b)
	for _, c := range []struct {
		name    string
		designs []drill.Design
		via     bool
	}{
		{"fenced-gateway", []drill.Design{drill.Fenced}, true},
		{"fenced-fast", []drill.Design{drill.Fenced}, false},
		{"naive", []drill.Design{drill.Naive}, true},
		{"make-drill", []drill.Design{drill.Fenced, drill.Naive}, true},
		{"make-drill-fast", []drill.Design{drill.Fenced, drill.Naive}, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			prefix := fmt.Sprintf("/bench-%s-%d", c.name, b.N)
			cpu0 := cpuTime(b)
			b.ResetTimer()
			rep, err := drill.Run(ctx, cli, drill.WithTrials(b.N), drill.WithSeed(2026), drill.WithDesigns(c.designs...),
				drill.WithViaGateway(c.via), drill.WithPrefix(prefix))
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cpu := cpuTime(b) - cpu0
			if f, ok := rep.Designs[drill.Fenced]; ok && f.TotalViolations != 0 {
				b.Fatalf("fenced violations: %v", f.Violations)
			}
			b.ReportMetric(float64(b.N*len(c.designs))/b.Elapsed().Seconds(), "trials/s")
			b.ReportMetric(b.Elapsed().Seconds()*1200/float64(b.N), "s/1200")
			b.ReportMetric(cpu.Seconds()*1200/float64(b.N), "cpu-s/1200")
			if err := drill.Cleanup(ctx, cli, prefix); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
