package robustness_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/robustness"
)

// TestLinearizableUnderFaults records eight clients claiming, committing,
// reading and releasing three tasks while the cluster and the clients'
// networks fail, and checks the history with porcupine.
func TestLinearizableUnderFaults(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	res, err := robustness.Run(runCtx(t), cl, robustness.Scenario{
		Name:   "linearizable",
		Logf:   t.Logf,
		Faults: []string{"drop-answers", "kill-leader", "blackhole-client-past-ttl", "partition-leader"},
	})
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
	if res.Verdict != porcupine.Ok || len(res.Violations) > 0 {
		t.Fatalf("verdict %s, violations %v", res.Verdict, res.Violations)
	}
	if res.Stats.Acknowledged == 0 {
		t.Fatal("no commit was acknowledged: the run tested nothing")
	}
}

func report(t *testing.T, res robustness.Result) { reportAs(t, res, t.Name()) }

// reportAs logs res and, if it is Illegal, writes porcupine's
// visualization of it to name.html in the temporary directory.
func reportAs(t *testing.T, res robustness.Result, name string) {
	t.Helper()
	t.Logf("%s; verdict %s; violations %d", res.Stats, res.Verdict, len(res.Violations))
	if res.Verdict == porcupine.Illegal {
		path := filepath.Join(os.TempDir(), name+".html")
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if f, err := os.Create(path); err == nil {
			_ = porcupine.Visualize(robustness.Model.ToModel(), res.Info, f)
			f.Close()
			t.Logf("visualization: %s", path)
		}
	}
}

// TestCheckerCatchesUnfencedCommit proves the checker has teeth: the same
// harness, with the fence compares removed from the commit, must report a
// stale owner's write as non-linearizable; with leasegate's commit the same
// history is linearizable (the write is refused).
func TestCheckerCatchesUnfencedCommit(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	for _, tc := range []struct {
		name   string
		commit robustness.CommitFunc
		want   porcupine.CheckResult
	}{
		{"fenced", robustness.FencedCommit, porcupine.Ok},
		{"unfenced", robustness.UnfencedCommit, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := lgtest.Ctx(t)
			prefix := "/teeth/" + tc.name
			c := lgtest.Coordinator(t, cl, coordinator.WithPrefix(prefix))
			h := robustness.NewHistory()
			a := lgtest.Session(t, c, "a", 5*time.Second)
			b := lgtest.Session(t, c, "b", 5*time.Second)
			aID, bID := robustness.OwnerID("a", a.Lease()), robustness.OwnerID("b", b.Lease())

			call := h.Now()
			ga, err := a.Claim(ctx, "t", "k")
			h.Record(0, robustness.Input{Kind: robustness.Claim, Task: "k", Owner: aID}, call, grantOut(err, ga))
			call = h.Now()
			st, err := fencedtxn.Get(ctx, c, "t", "k")
			if err != nil {
				t.Fatal(err)
			}
			h.Record(0, robustness.Input{Kind: robustness.Read, Task: "k"}, call, robustness.Output{Disposition: coordinator.OK, Version: st.Version, Value: string(st.Value)})
			// a's lease is forced to expire; b takes the task over.
			if err := c.RevokeLease(ctx, a.Lease()); err != nil {
				t.Fatal(err)
			}
			call = h.Now()
			gb, err := b.Claim(ctx, "t", "k")
			h.Record(1, robustness.Input{Kind: robustness.Claim, Task: "k", Owner: bID}, call, grantOut(err, gb))
			if err != nil {
				t.Fatal(err)
			}
			// a, unaware, writes against the version it read.
			call = h.Now()
			in := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "a-1", Value: []byte("a-1"), ExpectedVersion: st.Version}
			r, err := tc.commit(ctx, c, ga, in)
			out := robustness.OutputOf(coordinator.Committed, err)
			if err == nil {
				out.Disposition, out.Version = r.Disposition, r.CommittedVersion
			}
			h.Record(0, robustness.Input{Kind: robustness.Commit, Task: "k", Owner: aID, Epoch: ga.Epoch,
				Operation: in.Operation, Value: string(in.Value), Expected: in.ExpectedVersion}, call, out)
			t.Logf("a's late commit: %s", out.Disposition)

			res := robustness.Result{Stats: h.Stats()}
			res.Verdict, res.Info = h.Check(time.Minute)
			report(t, res)
			if res.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s", res.Verdict, tc.want)
			}
		})
	}
}

func grantOut(err error, g coordinator.Grant) robustness.Output {
	out := robustness.OutputOf(coordinator.Granted, err)
	if err == nil {
		out.Epoch = g.Epoch
	}
	return out
}
