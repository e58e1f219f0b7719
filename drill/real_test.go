package drill_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/lgtest"
	"github.com/leasegate/leasegate/internal/realprov"
)

// realProviders starts the real servers for t, skipping it with one line
// naming make test-providers when PostgreSQL or BIND is absent.
func realProviders(t *testing.T) *drill.RealProviders {
	t.Helper()
	realprov.Skip(t, realprov.HavePostgres)
	realprov.Skip(t, realprov.HaveBIND)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := drill.StartRealProviders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// TestRealProvidersDrill runs a short real-provider drill (the failover on
// a real PostgreSQL pair and a real BIND server): the fenced design scores
// zero on every grader, and every trial went through the servers.
func TestRealProvidersDrill(t *testing.T) {
	trials := 3
	if n, err := strconv.Atoi(os.Getenv("LEASEGATE_REAL_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	p := realProviders(t)
	cli := embedtest.NewCluster(t).Client(t)
	rep, err := drill.Run(lgtest.Ctx(t), cli, drill.WithRealProviders(p), drill.WithTrials(trials), drill.WithSeed(3),
		drill.WithPrefix("/real"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Replayed {
		if vs := drill.Grade(tr); len(vs) > 0 || testing.Verbose() {
			t.Logf("%s\n%v", tr.Render(false), vs)
		}
	}
	fenced, naive := rep.Designs[drill.Fenced], rep.Designs[drill.Naive]
	t.Logf("fenced %+v", fenced.Violations)
	t.Logf("naive %+v", naive.Violations)
	t.Logf("faults fenced %+v naive %+v; stats %+v", fenced.Faults, naive.Faults, p.Stats())
	if fenced.TotalViolations != 0 {
		t.Fatalf("the fenced design has %d violations on the real providers", fenced.TotalViolations)
	}
}
