package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/leasegate/leasegate/bench"
	"github.com/leasegate/leasegate/coordinator"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure leasegate side by side with bare etcd and etcd's own primitives",
		Description: example(`Runs, in interleaved rounds on the same etcd, a plain Put, a bare Txn of
exactly the protected commit's shape, fencedtxn.Commit, concurrency.Mutex
lock+unlock, concurrency.Election campaign+resign, leasegate claim+release and
the same two Txns bare — at each worker count — and prints ops/s, p50, p99 and
the ratios (each taken round by round; the minimum is what a target is checked
against). Without --endpoints it starts an embedded etcd with fsync on in a
temporary directory (--unsafe-no-fsync turns fsync off). With --endpoints it
writes under a fresh prefix of the cluster and deletes it afterwards.
A progress bar goes to stderr when stderr is a terminal.`,
			"leasegate bench",
			"leasegate bench --workers 1,16,64 --rounds 5 --duration 2s -o json > bench.json",
			"leasegate bench --unsafe-no-fsync --variants commit,bare-commit",
			"leasegate --endpoints 10.0.0.1:2379 bench --rounds 3"),
		Flags: append(etcdFlags(),
			&cli.StringFlag{Name: "workers", Usage: "worker counts, comma-separated", Value: "1,16,64"},
			&cli.IntFlag{Name: "rounds", Usage: "interleaved rounds", Value: 3},
			&cli.DurationFlag{Name: "duration", Usage: "how long each cell (one variant at one worker count in one round) runs", Value: time.Second},
			&cli.StringFlag{Name: "variants", Usage: "variants to run, comma-separated: " + strings.Join(bench.Variants, ",") + " (default all)"},
			metricsAddrFlag(),
		),
		Action: benchRun,
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
	cfg := bench.Config{Rounds: c.Int("rounds"), Duration: c.Duration("duration")}
	if cfg.Rounds < 1 || cfg.Duration <= 0 {
		return coordinator.Invalid(op, "--rounds %d and --duration %v must be positive", cfg.Rounds, cfg.Duration)
	}
	for _, f := range strings.Split(c.String("workers"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return coordinator.Invalid(op, "--workers %q: want comma-separated counts", c.String("workers"))
		}
		cfg.Workers = append(cfg.Workers, n)
	}
	if v := c.String("variants"); v != "" {
		for _, f := range strings.Split(v, ",") {
			cfg.Variants = append(cfg.Variants, strings.TrimSpace(f))
		}
	}
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
	cfg.Progress = progress(c)
	rep, err := bench.Run(c.Context, cfg)
	if err != nil {
		return err
	}
	return g.out.result(benchOutput{Disposition: ok, Report: rep}, benchTable(rep))
}

// benchEtcd is the etcd a bench command measures: the cluster at
// --endpoints when given, else an embedded member in --data-dir or a
// temporary directory (removed by the returned func).
func benchEtcd(c *cli.Context) (bench.Etcd, func(), error) {
	op := c.Command.FullName()
	nofsync := c.Bool("unsafe-no-fsync")
	if c.IsSet("endpoints") {
		if c.IsSet("data-dir") {
			return bench.Etcd{}, nil, coordinator.Invalid(op, "--data-dir is for the embedded etcd; drop it or --endpoints")
		}
		if nofsync {
			return bench.Etcd{}, nil, coordinator.Invalid(op, "--unsafe-no-fsync is for the embedded etcd; a cluster's fsync is its own")
		}
		client, err := newClient(globalsOf(c))
		if err != nil {
			return bench.Etcd{}, nil, err
		}
		return bench.Etcd{Client: client}, func() { _ = client.Close() }, nil
	}
	if dir := c.String("data-dir"); dir != "" {
		return bench.Etcd{Dir: dir, NoFsync: nofsync}, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "leasegate-bench-")
	if err != nil {
		return bench.Etcd{}, nil, coordinator.Invalid(op, "temporary directory: %v", err)
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

// progress is a progress callback drawing a bar on stderr when stderr is
// a terminal, else nil.
func progress(c *cli.Context) func(done, total int) {
	w := c.App.ErrWriter
	f, isFile := w.(*os.File)
	if !isFile || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	bar := progressbar.NewOptions(1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(c.Command.FullName()),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	return func(done, total int) {
		bar.ChangeMax(total)
		_ = bar.Set(done)
		if done == total {
			_ = bar.Finish()
		}
	}
}

func benchTable(r *bench.Report) table {
	t := table{header: []string{"VARIANT", "WORKERS", "OPS/S", "P50-MS", "P99-MS", "OPS", "ERRORS"}}
	for _, x := range r.Results {
		t.rows = append(t.rows, []string{x.Variant, strconv.Itoa(x.Workers), fmt.Sprintf("%.0f", x.OpsPerSec),
			fmt.Sprintf("%.3f", x.P50Ms), fmt.Sprintf("%.3f", x.P99Ms), strconv.Itoa(x.Ops), strconv.Itoa(x.Errors)})
	}
	t.rows = append(t.rows, []string{""}, []string{"RATIO", "WORKERS", "MIN", "MEDIAN", "MAX", "TARGET", "MET"})
	for _, x := range r.Ratios {
		target, met := "-", "-"
		if x.Target > 0 {
			target = fmt.Sprintf("%.2f", x.Target)
			met = strconv.FormatBool(*x.Met)
		}
		t.rows = append(t.rows, []string{x.Name, strconv.Itoa(x.Workers), fmt.Sprintf("%.3f", x.Min),
			fmt.Sprintf("%.3f", x.Median), fmt.Sprintf("%.3f", x.Max), target, met})
	}
	t.rows = append(t.rows, []string{""}, []string{fmt.Sprintf("etcd %s, fsync %s, %d CPUs, %s, load %s → %s; %d rounds of %d ms cells",
		r.Etcd, r.Fsync, r.Machine.CPUs, r.Machine.Go, r.Machine.LoadStart, r.Machine.LoadEnd, r.Rounds, r.CellMs)})
	return t
}
