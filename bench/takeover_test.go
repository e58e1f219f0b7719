package bench_test

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/leasegate/leasegate/bench"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestTakeoverSmoke: one trial of every cause and contender succeeds, and
// the figures are consistent (death precedes deletion precedes the write).
func TestTakeoverSmoke(t *testing.T) {
	t.Parallel()
	rep, err := bench.Takeover(lgtest.Ctx(t), bench.TakeoverConfig{Etcd: bench.Etcd{Dir: t.TempDir(), NoFsync: true},
		// A 1 s lease lost its keepalives under a loaded -race run and expired
		// before the contender waited; 3 s leaves the holder's keepalive room.
		Trials: 1, TTL: 3 * time.Second, PollInterval: 50 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}) // a failed trial says why
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(bench.Causes())*len(bench.Contenders()) {
		t.Fatalf("%d results: %+v", len(rep.Results), rep.Results)
	}
	for _, r := range rep.Results {
		// FromDeletion is timed by a separate watcher, which can be scheduled
		// after the successor's write on a fast run (a negative figure of a
		// millisecond or so); the holder's death precedes both for certain.
		if r.Trials != 1 || r.Failures != 0 || r.FromDeath.P50Ms <= 0 || r.FromDeath.P50Ms < r.FromDeletion.P50Ms {
			t.Errorf("result %+v", r)
		}
		// The time from the TTL's end is for expiry only; the lessor
		// deletes the key after it, so it is not negative beyond the
		// renewal's round trip (the Election holder's is taken at the answer).
		if r.ToGrant.MaxMs > r.FromDeletion.MaxMs { // one trial: the grant precedes the write
			t.Errorf("result %+v: granted after the write", r)
		}
		if (r.Cause == bench.Expiry) != (r.FromTTLEnd != nil) || r.FromTTLEnd != nil && r.FromTTLEnd.P50Ms < -50 {
			t.Errorf("result %+v: from_ttl_end %+v", r, r.FromTTLEnd)
		}
	}
}
