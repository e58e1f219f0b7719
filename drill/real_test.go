package drill_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/adapters/pgpromote"
	_ "github.com/leasegate/leasegate/cli" // the drill runs leasegate serve from its own binary
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/realprov"
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
	for _, k := range drill.RealFaultKinds() {
		if k == drill.FaultPausedAfterClaim || k == drill.FaultTrafficStop {
			continue // the pause's other windows: not drawn by these trials
		}
		if fenced.Faults[k] == 0 {
			t.Errorf("fault %s never fired in the fenced trials", k)
		}
	}
	// The pause is a real SIGSTOP of the worker's process: while it was
	// stopped the drill read state T in /proc and etcd answered ttl -1 for
	// its lease. After SIGCONT the fenced worker's next gateway action is
	// refused (stale_owner / expired_owner) — at most the call already past
	// the last fence read (the residual window) reaches a server before it,
	// none after; the naive worker goes on to the servers.
	paused := 0
	for _, tr := range rep.Replayed {
		fault := pauseFault(tr)
		if !strings.HasPrefix(fault, "paused_") && !strings.HasPrefix(fault, "stopped_") {
			continue
		}
		paused++
		stopped, woke := false, false
		var after []string // worker-a's calls and refusals after it woke
		for _, e := range tr.Events {
			switch {
			case e.Kind == drill.KindLost && e.Actor == "worker-a" && strings.Contains(e.Detail, "ttl -1") && strings.Contains(e.Detail, "(state T, then T)"):
				stopped = true
			case e.Kind == drill.KindNote && e.Actor == "worker-a" && strings.HasPrefix(e.Detail, "wakes up"):
				woke = true
			case woke && e.Kind == drill.KindRefused && e.Actor == "worker-a":
				after = append(after, "refused "+e.Detail)
			case woke && e.Kind == drill.KindCall && e.By == "worker-a":
				after = append(after, "call "+e.Effect)
			}
		}
		if !stopped || !woke {
			t.Errorf("%s trial %d: %s, but no stopped process (state T) whose lease was gone (ttl -1) before it woke (woke: %v)\n%s",
				tr.Design, tr.Trial, fault, woke, tr.Render(false))
			continue
		}
		t.Logf("%s trial %d: %s; after SIGCONT worker-a: %q", tr.Design, tr.Trial, fault, after)
		if tr.Design != drill.Fenced {
			continue
		}
		allowed := 0
		if fault == string(drill.FaultResidualPause) {
			allowed = 1
		}
		refused := slices.IndexFunc(after, func(a string) bool {
			return strings.HasPrefix(a, "refused stale_owner") || strings.HasPrefix(a, "refused expired_owner")
		})
		if refused < 0 || refused > allowed || slices.ContainsFunc(after[refused:], func(a string) bool { return strings.HasPrefix(a, "call ") }) {
			t.Errorf("fenced trial %d (%s): after SIGCONT worker-a did %q; want a stale_owner / expired_owner refusal after at most %d call, and no call after it",
				tr.Trial, fault, after, allowed)
		}
	}
	if paused == 0 {
		t.Errorf("no trial paused a worker: seed 3 draws the pause")
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
	requiresTheWriter(ctx, t, cli, "/real/trials", trials)
}

// requiresTheWriter checks, in the ledger as etcd holds it under prefix,
// every traffic change the fenced design proposed in trials 0..trials-1:
// each requires pgpromote's world (the topology) to show, as its single
// writer, the node whose address the change points the record at — so
// the gateway, which revalidates it at dispatch, sends nothing once the
// writer moved.
func requiresTheWriter(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, trials int) {
	t.Helper()
	coord, err := coordinator.New(ctx, cli, coordinator.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(coord)
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{"db-a": "10.0.0.1", "db-b": "10.0.0.2"}
	changes := 0
	for trial := range trials {
		recs, err := l.List(ctx, "drill-fenced", fmt.Sprintf("incident-%d", trial), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if rec.Effect.Kind != dnsupdate.Kind {
				continue
			}
			changes++
			var p dnsupdate.Params
			_ = json.Unmarshal(rec.Effect.Params, &p)
			if len(rec.Requires) != 1 || rec.Requires[0].Effect.Kind != pgpromote.Kind {
				t.Errorf("trial %d: traffic change %s to %s requires %+v, want the topology (%s)", trial, rec.Operation, p.Value, rec.Requires, pgpromote.Kind)
				continue
			}
			var topo pgpromote.Topology
			_ = json.Unmarshal(rec.Requires[0].Precondition.Detail, &topo)
			ws := topo.Writers()
			if len(ws) != 1 || addr[ws[0]] != p.Value || rec.Requires[0].Precondition.Digest != topo.Digest() {
				t.Errorf("trial %d: traffic change %s to %s requires writers %v (digest %s of %s), want its own target the single writer",
					trial, rec.Operation, p.Value, ws, rec.Requires[0].Precondition.Digest, topo.Digest())
			}
		}
	}
	if changes == 0 {
		t.Errorf("no traffic change in the fenced trials' ledger")
	}
}

// pauseFault is the pause fault a trial's first worker met ("" if none).
func pauseFault(tr *drill.Trajectory) string {
	for _, e := range tr.Events {
		if e.Kind == drill.KindFault && e.Actor == "worker-a" {
			return e.Effect
		}
	}
	return ""
}
