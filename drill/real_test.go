package drill_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
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
// a real PostgreSQL pair and a real BIND server; LEASEGATE_REAL_TRIALS
// overrides its 3 trials per design): the fenced design scores zero on
// every grader, the naive one does not, the faults fired, and every
// fenced trial went through the servers.
func TestRealProvidersDrill(t *testing.T) {
	trials := 3
	if n, err := strconv.Atoi(os.Getenv("LEASEGATE_REAL_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	p := realProviders(t)
	cli := embedtest.NewCluster(t).Client(t)
	// Real trials take seconds each: longer than lgtest's context allows.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(trials)*2*time.Minute)
	defer cancel()
	rep, err := drill.Run(ctx, cli, drill.WithRealProviders(p), drill.WithTrials(trials), drill.WithSeed(3),
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
	if naive.TotalViolations == 0 {
		t.Errorf("the naive design has no violation on the real providers: the faults did not bite")
	}
	// Seed 3's three trials draw every real fault; each must have fired
	// (faults that never bite prove nothing).
	for _, k := range drill.RealFaultKinds {
		if k == drill.FaultPausedAfterClaim || k == drill.FaultTrafficStop {
			continue // the pause's other windows: not drawn by these trials
		}
		if fenced.Faults[k] == 0 {
			t.Errorf("fault %s never fired in the fenced trials", k)
		}
	}
	// Every fenced trial went through the servers: the standby's own log
	// shows the promote, and the trial ends on the promoted writer.
	for _, tr := range rep.Replayed {
		if tr.Design != drill.Fenced {
			continue
		}
		logged := false
		for _, e := range tr.Events {
			logged = logged || (e.Kind == drill.KindCall && e.Effect == "PromoteTarget" && e.Actor == "postgres")
		}
		if !logged || tr.FinalWriter != "db-b" {
			t.Errorf("fenced trial %d: promote in the standby's log %v, final writer %s; want the promoted db-b", tr.Trial, logged, tr.FinalWriter)
		}
	}
}
