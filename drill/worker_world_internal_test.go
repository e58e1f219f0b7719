package drill

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestWorkerTrialSettlesPastTheWorldsLimit: a worker's trial runs on real
// time and may end after the simulated trial's limit on the world's clock
// (a loaded machine); the world still runs on until every pending change
// completes — here one due four minutes after the trial ended, as a DNS
// change left PENDING is — and nothing later than the settling horizon.
func TestWorkerTrialSettlesPastTheWorldsLimit(t *testing.T) {
	traj := &Trajectory{}
	s := newSim(rand.New(rand.NewPCG(1, 2)), traj)
	pt := &procTrial{s: s, traj: traj}
	s.now = trialLimit + 10*time.Minute
	pending, beyond := false, false
	s.at(s.now+4*time.Minute, "a DNS change goes INSYNC", func() { pending = true })
	s.at(s.now+procSettle+time.Minute, "past the horizon", func() { beyond = true })
	pt.settle()
	if !pending {
		t.Fatal("a change due 4 minutes after a trial that ended past the world's limit never completed")
	}
	if beyond {
		t.Fatal("the world ran past its settling horizon")
	}
	if !pt.done {
		t.Fatal("a settled trial serves on")
	}
}
