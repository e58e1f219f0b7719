package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/term"

	"github.com/leasegate/leasegate/bench"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure leasegate side by side with bare etcd and etcd's own primitives",
		Description: example(`Runs, in interleaved rounds on the same etcd, a plain Put, a bare Txn of
exactly the protected commit's shape, fencedtxn.Commit, concurrency.Mutex
lock+unlock, concurrency.Election campaign+resign, leasegate claim+release,
the same two Txns bare, a ledger dispatch of an authorized record (claim,
revalidate, apply, confirm, with a provider that applies at once; the record
is proposed and authorized untimed), the whole ledger lifecycle (propose,
authorize, dispatch), and the commit and the dispatch again through the
gateway (gateway-commit, gateway-dispatch: a leasegate serve server started in
this process on loopback TLS with an etcd client of its own, each worker
calling it with the Go client and a certificate of its own) — at each worker
count — and prints ops/s, p50, p99 and the ratios (each taken round by round,
every round's printed; the minimum is what a target is checked against) with
the latency the numerator adds at p50 and p99 (for the gateway's: the hop).
With --console the gateway also serves the web console, and a console page is
held open and live (its event stream read) for the whole run.
Unless --endpoints is given on the command line it starts an embedded etcd
with fsync on in a temporary directory (--unsafe-no-fsync turns fsync off):
an exported LEASEGATE_ENDPOINTS does not count, so that the load a bench
writes never reaches a real cluster through the environment (the same holds
for bench takeover and bench scale). With --endpoints on the command line it
writes under a fresh prefix of the cluster and deletes it afterwards; the TLS
and auth flags apply, to its sessions' keepalives too (each member asked with
the same TLS and login when the client's connection cannot renew).
It states the plan and its expected length on stderr first, then draws a progress
bar there when stderr is a terminal, else prints a line per finished cell.
Interrupted (Ctrl-C, SIGTERM), it prints what it measured until then, says on
stderr that it was interrupted, and exits 130.`,
			"leasegate bench",
			"leasegate bench --workers 1,16,64 --rounds 5 --duration 2s -o json > bench.json",
			"leasegate bench --unsafe-no-fsync --variants commit,bare-commit",
			"leasegate bench --paired --variants commit,gateway-commit,ledger-dispatch,gateway-dispatch --workers 16,64 --rounds 5",
			"leasegate bench --paired --variants commit,gateway-commit --console   # the same with a live console page open (docs/console.md)",
			"leasegate bench --variants commit,gateway-commit,http-floor,grpc-floor --workers 16,64 --rounds 5 --duration 2s   # CPU per op, and the bound the floors set",
			"leasegate bench --variants claim-release --workers 64 --rounds 1 --duration 20s --cpuprofile claim.pprof   # then: go tool pprof -top claim.pprof",
			"leasegate --endpoints 10.0.0.1:2379 bench --rounds 3"),
		Flags: append(etcdFlags(),
			&cli.StringFlag{Name: "workers", Usage: "worker counts, comma-separated", Value: "1,16,64"},
			&cli.IntFlag{Name: "rounds", Usage: "interleaved rounds", Value: 3},
			&cli.DurationFlag{Name: "duration", Usage: "how long each cell (one variant at one worker count in one round) runs", Value: time.Second},
			&cli.StringFlag{Name: "variants", Usage: "variants to run, comma-separated: " + strings.Join(bench.Variants(), ",") + " (default all), and " + bench.BareCommitControl + " (bare-commit again on another task: the run's noise floor)"},
			metricsAddrFlag(),
			&cli.BoolFlag{Name: "paired", Usage: "interleave the variants operation by operation instead of cell by cell (each variant's ops/s is then workers / its mean latency)"},
			&cli.BoolFlag{Name: "console", Usage: "serve the web console on the bench's gateway and keep a console page open and live (its event stream read) for the whole run: its cost shows in the gateway variants"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the whole run (client and embedded etcd) to `FILE`", TakesFile: true},
			// bench has subcommands, so app.go's prepare gives it no -o.
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output format: table or json (overrides the global -o)"},
		),
		Before:      commandOutput,
		Action:      benchRun,
		Subcommands: []*cli.Command{benchTakeoverCommand(), benchScaleCommand()},
	}
}

// benchOutput is bench's result with -o json.
type benchOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	*bench.Report
}

func benchRun(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	op := c.Command.FullName()
	cfg := bench.Config{Rounds: c.Int("rounds"), Duration: c.Duration("duration"), Paired: c.Bool("paired"), Console: c.Bool("console")}
	if cfg.Rounds < 1 || cfg.Duration <= 0 {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--rounds %d and --duration %v must be positive", cfg.Rounds, cfg.Duration), nil)
	}
	for _, f := range strings.Split(c.String("workers"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--workers %q: want comma-separated counts", c.String("workers")), nil)
		}
		cfg.Workers = append(cfg.Workers, n)
	}
	cfg.Variants = commaList(c.String("variants"))
	g := globalsOf(c)
	cfg.Logger = g.lg
	etcd, closeEtcd, err := benchEtcd(c)
	if err != nil {
		return err
	}
	defer closeEtcd()
	cfg.Etcd = etcd
	metrics, stopMetrics, err := serveMetrics(c)
	if err != nil {
		return err
	}
	defer stopMetrics()
	cfg.Registerer = metrics
	var endProgress func()
	cfg.Progress, endProgress = progress(c)
	if path := c.String("cpuprofile"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--cpuprofile: %v", err), nil)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--cpuprofile: %v", err), nil)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench.Run(c.Context, cfg)
	endProgress()
	if rep == nil {
		return err
	}
	if perr := g.out.result(benchOutput{Disposition: ok, Report: rep}, benchTable(rep)); perr != nil {
		return perr
	}
	return interruptedOrNot(err)
}

// interrupted is a bench run stopped by a signal (or its context) after it
// printed what it had measured: ExitInterrupted, and its line on stderr.
type interrupted struct{ err error }

func (e *interrupted) Error() string {
	return e.err.Error() + "; the figures printed are what was measured until then"
}
func (e *interrupted) Unwrap() error { return e.err }

// interruptedOrNot is err as interrupted if the run was, else err.
func interruptedOrNot(err error) error {
	if errors.Is(err, bench.ErrInterrupted) {
		return &interrupted{err}
	}
	return err
}

// benchEtcd is the etcd a bench command measures: the cluster at
// --endpoints when given on the command line (endpointsOnCommandLine: a
// bench writes load, and LEASEGATE_ENDPOINTS alone never sends it to a
// cluster), else an embedded member in --data-dir or a temporary directory
// (removed by the returned func).
func benchEtcd(c *cli.Context) (bench.Etcd, func(), error) {
	op := c.Command.FullName()
	nofsync := c.Bool("unsafe-no-fsync")
	if endpointsOnCommandLine(c) {
		if c.IsSet("data-dir") {
			return bench.Etcd{}, nil, store.NewError(store.InvalidInput, op, "", "", "--data-dir is for the embedded etcd; drop it or --endpoints", nil)
		}
		if nofsync {
			return bench.Etcd{}, nil, store.NewError(store.InvalidInput, op, "", "", "--unsafe-no-fsync is for the embedded etcd; a cluster's fsync is its own", nil)
		}
		g := globalsOf(c)
		cfg := clientConfig(g)
		return bench.Etcd{Label: strings.Join(g.endpoints, ","), Dial: func() (*clientv3.Client, error) { return dialReady(c) },
			ClientConfig: &cfg}, func() {}, nil
	}
	ignoringEndpointsEnv(globalsOf(c).lg, "leasegate "+op)
	if dir := c.String("data-dir"); dir != "" {
		return bench.Etcd{Dir: dir, NoFsync: nofsync}, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "leasegate-bench-")
	if err != nil {
		return bench.Etcd{}, nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("temporary directory: %v", err), nil)
	}
	return bench.Etcd{Dir: tmp, NoFsync: nofsync}, func() { _ = os.RemoveAll(tmp) }, nil
}

// etcdFlags select the etcd of a bench command.
func etcdFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "unsafe-no-fsync", Usage: "embedded etcd only: do not fsync (faster, loses writes on a crash)"},
		&cli.StringFlag{Name: "data-dir", Usage: "embedded etcd's data directory (default: a temporary directory, removed afterwards)", TakesFile: true},
	}
}

// progress reports a bench run's progress on stderr: the plan and its
// expected length first, then a bar when stderr is a terminal, else each
// finished cell's line. end ends the bar's line if the run stopped early.
func progress(c *cli.Context) (report func(bench.Progress), end func()) {
	w := c.App.ErrWriter
	f, isFile := w.(*os.File)
	if !isFile || !term.IsTerminal(int(f.Fd())) {
		return func(p bench.Progress) {
			if p.Line != "" {
				fmt.Fprintf(w, "%s  [%d/%d]\n", p.Line, p.Done, p.Total)
			}
		}, func() {}
	}
	var bar *progressbar.ProgressBar
	end = func() {
		if bar != nil && !bar.IsFinished() {
			fmt.Fprintln(w)
		}
	}
	return func(p bench.Progress) {
		if bar == nil {
			fmt.Fprintln(w, p.Line)
			bar = progressbar.NewOptions(max(p.Total, 1), progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(c.Command.FullName()),
				progressbar.OptionShowCount(), progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionClearOnFinish())
			return
		}
		_ = bar.Set(p.Done)
		if p.Done == p.Total {
			_ = bar.Finish()
		}
	}, end
}

func benchTable(r *bench.Report) table {
	t := table{header: []string{"VARIANT", "WORKERS", "OPS/S", "P50-MS", "P99-MS", "OPS", "ERRORS", "SENT-B/OP", "RECV-B/OP", "CPU-US/OP", "CPUS"}}
	for _, x := range r.Results {
		cpu, cores := "-", "-"
		if x.CPUPerOpUs > 0 {
			cpu, cores = fmt.Sprintf("%.0f", x.CPUPerOpUs), fmt.Sprintf("%.2f", x.CPUCores)
		}
		t.rows = append(t.rows, []string{x.Variant, strconv.Itoa(x.Workers), fmt.Sprintf("%.0f", x.OpsPerSec),
			fmt.Sprintf("%.3f", x.P50Ms), fmt.Sprintf("%.3f", x.P99Ms), strconv.Itoa(x.Ops), strconv.Itoa(x.Errors),
			fmt.Sprintf("%.0f", x.SentBytes), fmt.Sprintf("%.0f", x.RecvBytes), cpu, cores})
	}
	t.rows = append(t.rows, []string{""}, []string{"RATIO", "WORKERS", "MIN", "MEDIAN", "MAX", "TARGET", "MET", "+P50-MS", "+P99-MS", "PER-ROUND"})
	for _, x := range r.Ratios {
		target, met := "-", "-"
		if x.Target > 0 {
			target = fmt.Sprintf("%.2f", x.Target)
			met = strconv.FormatBool(*x.Met)
		}
		rounds := make([]string, len(x.PerRound))
		for i, v := range x.PerRound {
			rounds[i] = fmt.Sprintf("%.3f", v)
		}
		t.rows = append(t.rows, []string{x.Name, strconv.Itoa(x.Workers), fmt.Sprintf("%.3f", x.Min),
			fmt.Sprintf("%.3f", x.Median), fmt.Sprintf("%.3f", x.Max), target, met,
			fmt.Sprintf("%+.3f", x.AddedP50Ms), fmt.Sprintf("%+.3f", x.AddedP99Ms), strings.Join(rounds, " ")})
	}
	if len(r.Bounds) > 0 {
		t.rows = append(t.rows, []string{""}, []string{"BOUND (CPU)", "WORKERS", "VALUE"})
		for _, x := range r.Bounds {
			t.rows = append(t.rows, []string{x.Name, strconv.Itoa(x.Workers), fmt.Sprintf("%.3f", x.Value)})
		}
	}
	mode := "cells"
	if r.Paired {
		mode = "paired (variants interleaved per operation)"
	}
	t.rows = append(t.rows, []string{""}, []string{fmt.Sprintf("etcd %s, fsync %s, %d CPUs, %s, load %s → %s; %d rounds of %d ms per variant, %s",
		r.Etcd, r.Fsync, r.Machine.CPUs, r.Machine.Go, r.Machine.LoadStart, r.Machine.LoadEnd, r.Rounds, r.CellMs, mode)})
	if r.Console != nil {
		t.rows = append(t.rows, []string{fmt.Sprintf("console: a page open and live on the gateway for the whole run (loaded in %d ms; %d live events received)",
			r.Console.PageMs, r.Console.Events)})
	}
	return withInterrupted(t, r.Interrupted)
}

// withInterrupted ends a partial report's table with why it is partial.
func withInterrupted(t table, why string) table {
	if why != "" {
		t.rows = append(t.rows, []string{"INTERRUPTED: " + why + "; the figures above are what was measured until then"})
	}
	return t
}

func benchTakeoverCommand() *cli.Command {
	return &cli.Command{
		Name:  "takeover",
		Usage: "measure how fast a waiting successor completes its first protected write after the holder dies",
		Description: example(`In each trial a holder holds a task and a contender waits for it; the holder
dies — its lease is revoked (cause revoke), or its client is closed and the lease
runs out (cause expiry) — and the contender takes over and completes its first
protected write. Contenders: acquire (leasegate's Session.Acquire, which
watches the owner key), poll (claims every --poll-interval, as client-go's
leader election retries every RetryPeriod) and election (etcd's
concurrency.Election.Campaign, then a write guarded by its leader key). Prints
p50/p99/max from the owner key's deletion (for revoke: from the revoke's send,
an upper bound) to the committed write, p50/p99 from the deletion to the grant
(GRANT-*), and from the holder's death to the write; for expiry also from the
lease's TTL end (its last renewal + TTL). The
diagnostic contender watch-from-busy (not run by default) waits by a watch
from the busy answer's revision + 1, not from a read after the watch is
registered as acquire does, and reports how many
trials' watch started at a revision etcd had already passed (served from etcd's
unsynced set, caught up every 100 ms) and the latency of those and of the
others. The plan and its expected length go to stderr first, then a bar (on a
terminal) or a line per interleaved round of trials; interrupted, it prints
the trials finished and exits 130.`,
			"leasegate bench takeover",
			"leasegate bench takeover --trials 100 --causes revoke --contenders acquire,election,poll -o json",
			"leasegate bench takeover --trials 100 --causes revoke --contenders watch-from-busy   # the 100 ms mode, diagnosed"),
		Flags: append(etcdFlags(),
			&cli.IntFlag{Name: "trials", Usage: "trials per cause and contender", Value: 20},
			&cli.DurationFlag{Name: "ttl", Usage: "the holder's lease TTL (whole seconds)", Value: 2 * time.Second},
			&cli.DurationFlag{Name: "poll-interval", Usage: "the polling contender's period", Value: 2 * time.Second},
			&cli.StringFlag{Name: "causes", Usage: "how the holder dies, comma-separated: " + strings.Join(bench.Causes(), ",") + " (default all)"},
			&cli.StringFlag{Name: "contenders", Usage: "contenders, comma-separated: " + strings.Join(bench.AllContenders(), ",") + " (default " + strings.Join(bench.Contenders(), ",") + ")"},
		),
		Action: benchTakeover,
	}
}

// takeoverOutput is bench takeover's result with -o json.
type takeoverOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	*bench.TakeoverReport
}

func benchTakeover(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	op := c.Command.FullName()
	cfg := bench.TakeoverConfig{Trials: c.Int("trials"), TTL: c.Duration("ttl"), PollInterval: c.Duration("poll-interval"),
		Causes: commaList(c.String("causes")), Contenders: commaList(c.String("contenders")), Logger: globalsOf(c).lg}
	if cfg.Trials < 1 || cfg.TTL <= 0 || cfg.PollInterval <= 0 {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--trials %d, --ttl %v and --poll-interval %v must be positive", cfg.Trials, cfg.TTL, cfg.PollInterval), nil)
	}
	etcd, closeEtcd, err := benchEtcd(c)
	if err != nil {
		return err
	}
	defer closeEtcd()
	cfg.Etcd = etcd
	var endProgress func()
	cfg.Progress, endProgress = progress(c)
	rep, err := bench.Takeover(c.Context, cfg)
	endProgress()
	if rep == nil {
		return err
	}
	t := table{header: []string{"CAUSE", "CONTENDER", "TRIALS", "FAILURES", "DEL-P50-MS", "DEL-P99-MS", "DEL-MAX-MS", "GRANT-P50-MS", "GRANT-P99-MS", "DEATH-P50-MS", "DEATH-P99-MS", "DEATH-MAX-MS"}}
	var diag []string
	for _, r := range rep.Results {
		t.rows = append(t.rows, []string{r.Cause, r.Contender, strconv.Itoa(r.Trials), strconv.Itoa(r.Failures),
			fmt.Sprintf("%.1f", r.FromDeletion.P50Ms), fmt.Sprintf("%.1f", r.FromDeletion.P99Ms), fmt.Sprintf("%.1f", r.FromDeletion.MaxMs),
			fmt.Sprintf("%.1f", r.ToGrant.P50Ms), fmt.Sprintf("%.1f", r.ToGrant.P99Ms),
			fmt.Sprintf("%.1f", r.FromDeath.P50Ms), fmt.Sprintf("%.1f", r.FromDeath.P99Ms), fmt.Sprintf("%.1f", r.FromDeath.MaxMs)})
		if l := r.FromTTLEnd; l != nil {
			diag = append(diag, fmt.Sprintf("%s/%s: from the lease TTL's end (last renewal + TTL) p50 %.1f / p99 %.1f / max %.1f ms", r.Cause, r.Contender, l.P50Ms, l.P99Ms, l.MaxMs))
		}
		if r.WatchStartedPast != nil {
			diag = append(diag, fmt.Sprintf("%s/%s: %d of %d trials' watch started at a past revision: from deletion p50 %.1f / p99 %.1f ms; the others p50 %.1f / p99 %.1f ms",
				r.Cause, r.Contender, *r.WatchStartedPast, r.Trials-r.Failures, r.FromDeletionPast.P50Ms, r.FromDeletionPast.P99Ms,
				r.FromDeletionNow.P50Ms, r.FromDeletionNow.P99Ms))
		}
	}
	t.rows = append(t.rows, []string{""}, []string{fmt.Sprintf("etcd %s, fsync %s, %d CPUs, holder TTL %d ms, poll every %d ms, load %s → %s",
		rep.Etcd, rep.Fsync, rep.Machine.CPUs, rep.TTLMs, rep.PollMs, rep.Machine.LoadStart, rep.Machine.LoadEnd)})
	for _, d := range diag {
		t.rows = append(t.rows, []string{d})
	}
	if perr := globalsOf(c).out.result(takeoverOutput{Disposition: ok, TakeoverReport: rep}, withInterrupted(t, rep.Interrupted)); perr != nil {
		return perr
	}
	return interruptedOrNot(err)
}

// commaList splits a comma-separated flag value; "" is nil (the default).
func commaList(v string) []string {
	if v == "" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		out = append(out, strings.TrimSpace(f))
	}
	return out
}

func benchScaleCommand() *cli.Command {
	return &cli.Command{
		Name:  "scale",
		Usage: "measure one session holding many grants, and its mass expiry against a lease per lock",
		Description: example(`For each size, one session claims that many tasks (--workers at a time) and
reports the claim rate, commit p50/p99 (commits one at a time on random held
tasks), this process's heap growth per grant held (with the embedded etcd it
includes etcd's own index: use --endpoints against a separate 'leasegate etcd'
for the client alone), and the keepalives sent — one lease, whatever the size.
Then the session dies (its client closes: no keepalive, no revoke) and a
watcher times every owner key's deletion after the lease's TTL ran out. For
comparison, --per-lock keys each on a lease of its own (one session per lock)
expire together: etcd revokes expired leases at a bounded rate, so their keys
go late.`,
			"leasegate bench scale",
			"leasegate bench scale --sizes 1000,10000 --per-lock 10000 -o json",
			"leasegate --endpoints 127.0.0.1:2379 bench scale --sizes 100000"),
		Flags: append(etcdFlags(),
			&cli.StringFlag{Name: "sizes", Usage: "grants held by one session, comma-separated", Value: "1000,10000,100000"},
			&cli.IntFlag{Name: "workers", Usage: "concurrent claimers", Value: 16},
			&cli.IntFlag{Name: "commits", Usage: "commits timed at each size", Value: 300},
			&cli.DurationFlag{Name: "ttl", Usage: "the session's lease TTL (whole seconds)", Value: 5 * time.Second},
			&cli.IntFlag{Name: "per-lock", Usage: "single-key leases expiring together for comparison (default: the largest size; -1 skips)"},
			&cli.DurationFlag{Name: "per-lock-ttl", Usage: "their TTL (whole seconds; longer than their setup takes)", Value: 60 * time.Second},
		),
		Action: benchScale,
	}
}

// scaleOutput is bench scale's result with -o json.
type scaleOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	*bench.ScaleReport
}

func benchScale(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	op := c.Command.FullName()
	cfg := bench.ScaleConfig{Workers: c.Int("workers"), Commits: c.Int("commits"), TTL: c.Duration("ttl"),
		PerLock: c.Int("per-lock"), PerLockTTL: c.Duration("per-lock-ttl"), Logger: globalsOf(c).lg}
	if cfg.Workers < 1 || cfg.Commits < 1 || cfg.TTL <= 0 || cfg.PerLockTTL <= 0 {
		return store.NewError(store.InvalidInput, op, "", "", "--workers, --commits, --ttl and --per-lock-ttl must be positive", nil)
	}
	for _, f := range commaList(c.String("sizes")) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--sizes %q: want comma-separated counts", c.String("sizes")), nil)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	etcd, closeEtcd, err := benchEtcd(c)
	if err != nil {
		return err
	}
	defer closeEtcd()
	cfg.Etcd = etcd
	var endProgress func()
	cfg.Progress, endProgress = progress(c)
	rep, err := bench.Scale(c.Context, cfg)
	endProgress()
	if rep == nil {
		return err
	}
	t := table{header: []string{"GRANTS", "CLAIMS/S", "COMMIT-P50-MS", "COMMIT-P99-MS", "HEAP-B/GRANT", "LEASES", "KEEPALIVES", "HELD-S",
		"GONE-P50-MS", "GONE-P99-MS", "ALL-GONE-MS"}}
	for _, z := range rep.Sizes {
		t.rows = append(t.rows, []string{strconv.Itoa(z.Grants), fmt.Sprintf("%.0f", z.ClaimsPerSec), fmt.Sprintf("%.2f", z.CommitP50Ms),
			fmt.Sprintf("%.2f", z.CommitP99Ms), fmt.Sprintf("%.0f", z.HeapPerGrantB), strconv.Itoa(z.Leases), fmt.Sprintf("%.0f", z.Keepalives),
			fmt.Sprintf("%.1f", z.HeldSeconds), fmt.Sprintf("%.0f", z.Expiry.LagP50Ms), fmt.Sprintf("%.0f", z.Expiry.LagP99Ms),
			fmt.Sprintf("%.0f", z.Expiry.LagMaxMs)})
	}
	if pl := rep.PerLock; pl != nil {
		t.rows = append(t.rows, []string{""}, []string{"PER-LOCK-LEASES", "SETUP-S", "GONE-P50-MS", "GONE-P99-MS", "ALL-GONE-MS"},
			[]string{strconv.Itoa(pl.Leases), fmt.Sprintf("%.1f", pl.SetupS), fmt.Sprintf("%.0f", pl.LagP50Ms),
				fmt.Sprintf("%.0f", pl.LagP99Ms), fmt.Sprintf("%.0f", pl.LagMaxMs)})
	}
	t.rows = append(t.rows, []string{""}, []string{fmt.Sprintf("etcd %s, fsync %s, %d CPUs, session TTL %d ms, %d workers, load %s → %s",
		rep.Etcd, rep.Fsync, rep.Machine.CPUs, rep.TTLMs, rep.Workers, rep.Machine.LoadStart, rep.Machine.LoadEnd)})
	if perr := globalsOf(c).out.result(scaleOutput{Disposition: ok, ScaleReport: rep}, withInterrupted(t, rep.Interrupted)); perr != nil {
		return perr
	}
	return interruptedOrNot(err)
}
