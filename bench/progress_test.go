package bench_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/leasegate/leasegate/bench"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// progressLog records a run's progress and cancels its context, with a
// cause of its own, after the nth line that matches stopAt.
type progressLog struct {
	lines  []string
	first  bench.Progress
	stopAt *regexp.Regexp
	n      int
	cancel context.CancelCauseFunc
}

var errStop = errors.New("the test stopped it")

func (l *progressLog) progress(p bench.Progress) {
	if len(l.lines) == 0 {
		l.first = p
	}
	if p.Line != "" {
		l.lines = append(l.lines, p.Line)
		if l.stopAt.MatchString(p.Line) {
			if l.n--; l.n == 0 {
				l.cancel(errStop)
			}
		}
	}
}

func newProgressLog(t *testing.T, stopAt string, n int) (*progressLog, context.Context) {
	ctx, cancel := context.WithCancelCause(lgtest.Ctx(t))
	t.Cleanup(func() { cancel(nil) })
	return &progressLog{cancel: cancel, stopAt: regexp.MustCompile(stopAt), n: n}, ctx
}

// wantInterrupted: the run says it was interrupted, by whom, and how far
// it got — not a failure of its own, nor an unknown outcome.
func wantInterrupted(t *testing.T, err error, interrupted string, what string) {
	t.Helper()
	if !errors.Is(err, bench.ErrInterrupted) || !strings.Contains(err.Error(), errStop.Error()) || !strings.Contains(err.Error(), what) {
		t.Fatalf("error %v; want %v naming the cause and the %s done", err, bench.ErrInterrupted, what)
	}
	if interrupted != err.Error() {
		t.Fatalf("report's Interrupted %q, want %q", interrupted, err)
	}
}

// TestTakeoverProgressAndInterrupt: the plan first, with the expected
// length; a line per interleaved round; cancelled in the middle of the
// second round's acquire trial (while Acquire waits), the report holds the
// trials finished — none a failure, the one cut short left out — and the
// error says it was interrupted.
func TestTakeoverProgressAndInterrupt(t *testing.T) {
	t.Parallel()
	l, ctx := newProgressLog(t, `^$`, 1) // stopped by the logger below
	waits := 0
	lg := zap.New(hookCore(func(_ zapcore.Entry, fs []zapcore.Field) {
		if slices.ContainsFunc(fs, func(f zapcore.Field) bool { // Acquire waiting on a busy task
			return f.Key == "disposition" && f.String == string(coordinator.Busy)
		}) {
			if waits++; waits == 2 {
				l.cancel(errStop)
			}
		}
	}))
	rep, err := bench.Takeover(ctx, bench.TakeoverConfig{Etcd: bench.Etcd{Dir: t.TempDir(), NoFsync: true},
		Trials: 50, TTL: 3 * time.Second, PollInterval: 50 * time.Millisecond, Causes: []string{bench.Revoke},
		Contenders: []string{bench.Acquire, bench.Campaign, bench.WatchFromBusy}, Progress: l.progress, Logger: lg})
	// Round 2 runs election, watch-from-busy, then acquire.
	if rep == nil {
		t.Fatalf("no report, error %v; want the report of the run so far", err)
	}
	wantInterrupted(t, err, rep.Interrupted, "after 5 of 150 trials")
	if l.first.Done != 0 || l.first.Total != 150 || l.first.Expected <= 0 || !strings.Contains(l.first.Line, "150 trials") {
		t.Errorf("first progress %+v; want the plan", l.first)
	}
	if len(l.lines) != 2 || !regexp.MustCompile(`^trial 1/50, from deletion: revoke/\S+ [0-9.]+ ms`).MatchString(l.lines[1]) {
		t.Errorf("progress lines %q; want the plan and trial 1's", l.lines)
	}
	for _, r := range rep.Results {
		want := 2
		if r.Contender == bench.Acquire {
			want = 1
		}
		if r.Trials != want || r.Failures != 0 {
			t.Errorf("result %+v; want %d trials finished, no failure", r, want)
		}
		if (r.Contender == bench.WatchFromBusy) != (r.WatchStartedPast != nil) {
			t.Errorf("result %+v: watch_started_past is for %s only", r, bench.WatchFromBusy)
		}
	}
}

// hookCore is a zap core that calls f on every entry, at every level, with
// the entry's own fields.
type hookCore func(zapcore.Entry, []zapcore.Field)

func (f hookCore) Enabled(zapcore.Level) bool        { return true }
func (f hookCore) With([]zapcore.Field) zapcore.Core { return f }
func (f hookCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, f)
}
func (f hookCore) Write(e zapcore.Entry, fs []zapcore.Field) error { f(e, fs); return nil }
func (f hookCore) Sync() error                                     { return nil }

// TestRunProgressAndInterrupt: a line per cell; cancelled after the
// second, the report holds the two cells measured and their ratio.
func TestRunProgressAndInterrupt(t *testing.T) {
	t.Parallel()
	l, ctx := newProgressLog(t, `^round 1/5, 1 workers, \S+: \d+ ops/s, p50 [0-9.]+ ms, p99 [0-9.]+ ms, 0 errors, cpu (\d+|-) µs/op$`, 2)
	rep, err := bench.Run(ctx, bench.Config{Etcd: bench.Etcd{Dir: t.TempDir(), NoFsync: true}, Workers: []int{1},
		Rounds: 5, Duration: 20 * time.Millisecond, Variants: []string{bench.Commit, bench.BareCommit}, Progress: l.progress})
	if rep == nil {
		t.Fatalf("no report, error %v; want the report of the run so far", err)
	}
	wantInterrupted(t, err, rep.Interrupted, "after 2 of 10 cells")
	if !strings.Contains(l.lines[0], "about") || l.first.Expected != 10*20*time.Millisecond {
		t.Errorf("plan %+v", l.first)
	}
	if len(l.lines) != 3 {
		t.Errorf("progress lines %q; want the plan and two cells", l.lines)
	}
	if len(rep.Results) != 2 || len(rep.Ratios) != 1 || len(rep.Ratios[0].PerRound) != 1 {
		t.Fatalf("report %+v; want both variants' first round and its ratio", rep)
	}
	for _, r := range rep.Results {
		if len(r.PerRound) != 1 || r.Ops < 1 || r.Errors != 0 {
			t.Errorf("result %+v", r)
		}
	}
}

// TestScaleProgressAndInterrupt: a line per step; cancelled after the
// first size, the report holds it.
func TestScaleProgressAndInterrupt(t *testing.T) {
	t.Parallel()
	l, ctx := newProgressLog(t, `^10 grants: owner keys gone`, 1)
	rep, err := bench.Scale(ctx, bench.ScaleConfig{Etcd: bench.Etcd{Dir: t.TempDir(), NoFsync: true},
		Sizes: []int{10, 20}, Workers: 2, Commits: 2, TTL: time.Second, PerLock: -1, Progress: l.progress})
	if rep == nil {
		t.Fatalf("no report, error %v; want the report of the run so far", err)
	}
	wantInterrupted(t, err, rep.Interrupted, "after 3 of 6 steps")
	want := []string{`^bench scale: sizes \[10 20\]`, `^10 grants: claimed at \d+/s`, `^10 grants: commit p50`, `^10 grants: owner keys gone`}
	if len(l.lines) != len(want) {
		t.Fatalf("progress lines %q", l.lines)
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(l.lines[i]) {
			t.Errorf("line %d %q; want %s", i, l.lines[i], w)
		}
	}
	if len(rep.Sizes) != 1 || rep.Sizes[0].Grants != 10 {
		t.Errorf("sizes %+v; want the first", rep.Sizes)
	}
}
