package drill_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
)

// BenchmarkDrill measures the built-in designs' throughput, trials per
// second, as make drill runs them (16 trials in parallel, embedded etcd
// with fsync off): the fenced design through the gateway (the default), in
// the fast mode (the ledger in-process, --via-gateway=false), and the naive
// design. b.N trials per run, the fixtures included; docs/performance.md
// reports it.
func BenchmarkDrill(b *testing.B) {
	cli := embedtest.NewCluster(b).Client(b)
	for _, c := range []struct {
		name   string
		design drill.Design
		via    bool
	}{
		{"fenced-gateway", drill.Fenced, true},
		{"fenced-fast", drill.Fenced, false},
		{"naive", drill.Naive, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ResetTimer()
			rep, err := drill.Run(ctx, cli, drill.WithTrials(b.N), drill.WithSeed(2026), drill.WithDesigns(c.design),
				drill.WithViaGateway(c.via), drill.WithPrefix(fmt.Sprintf("/bench-%s-%d", c.name, b.N)))
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if c.design == drill.Fenced && rep.Designs[c.design].TotalViolations != 0 {
				b.Fatalf("fenced violations: %v", rep.Designs[c.design].Violations)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "trials/s")
			if err := drill.Cleanup(ctx, cli, fmt.Sprintf("/bench-%s-%d", c.name, b.N)); err != nil {
				b.Fatal(err)
			}
		})
	}
}
