package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
)

// Etcd says which etcd a run measures.
type Etcd struct {
	// Endpoints of the etcd to measure; empty (and no Dial) starts an
	// embedded member with its data under Dir.
	Endpoints []string
	Dir       string
	// NoFsync (embedded only) turns etcd's fsync off (UnsafeNoFsync).
	NoFsync bool
	// Dial, if set, opens clients of the etcd to measure instead of plain
	// clients of Endpoints (TLS, auth); Label names it in the report.
	Dial  func() (*clientv3.Client, error)
	Label string
	// ClientConfig, with Dial, is the configuration Dial's clients are
	// made from (TLS, user and password or token; its Endpoints are
	// ignored). Every coordinator the run makes on them gets it
	// (coordinator.WithClientConfig): a session's keepalive that cannot
	// renew through its client's connection then logs in on each other
	// member itself, so that on a cluster with auth one hung member does
	// not cost a session its lease. Give it whenever Dial's clients have
	// TLS or a login. Plain clients of Endpoints get theirs without it.
	ClientConfig *clientv3.Config
}

// Config says what Run measures and where.
type Config struct {
	Etcd

	Workers  []int         // worker counts; default 1, 16, 64
	Rounds   int           // interleaved rounds; default 3
	Duration time.Duration // per cell (one variant, one worker count, one round); default 1s
	Variants []string      // default all (Variants())
	// Paired interleaves the variants operation by operation inside one
	// cell instead of cell by cell: each variant's throughput is then
	// workers / its mean latency, under the same moment's load as the
	// others'. It cancels drift that cells of a second cannot (a shared
	// machine); bytes on the wire are not counted per variant.
	Paired bool
	// Console serves the console (package console) on the gateway and keeps
	// one of its pages open and live for the whole run: the Now page loaded
	// and its live stream (the ownership watch) read, as a browser would.
	Console bool

	Registerer prometheus.Registerer // optional: the coordinator's metrics
	Progress   func(Progress)        // optional: the plan, then one per cell
	Logger     *zap.Logger           // optional
	Prefix     string                // default /leasegate-bench-<uuid>; deleted afterwards
}

// Report is Run's result.
type Report struct {
	Etcd     string   `json:"etcd"`  // "embedded" or the endpoints
	Fsync    string   `json:"fsync"` // "on", "off" (embedded), "cluster's own"
	Machine  Machine  `json:"machine"`
	Rounds   int      `json:"rounds"`
	Paired   bool     `json:"paired"`
	CellMs   int64    `json:"cell_ms"`
	Workers  []int    `json:"workers"`
	Variants []string `json:"variants"`
	Results  []Result `json:"results"`
	Ratios   []Ratio  `json:"ratios"`
	// Bounds are the highest ratios a hop could reach on this run's
	// machine, from CPU per operation (unpaired runs only).
	Bounds []Bound `json:"bounds,omitempty"`
	// Interrupted, when set, is why the run stopped early: Results and
	// Ratios hold the cells finished until then.
	Interrupted string `json:"interrupted,omitempty"`
	// Console is the live console page held open during the run
	// (Config.Console).
	Console *ConsoleLive `json:"console,omitempty"`
}

// Machine is where the figures were taken.
type Machine struct {
	CPUs      int    `json:"cpus"`
	OS        string `json:"os"`
	Go        string `json:"go"`
	LoadStart string `json:"load_start,omitempty"` // /proc/loadavg when the run started
	LoadEnd   string `json:"load_end,omitempty"`
}

// Result is one variant at one worker count, over every round.
type Result struct {
	Variant   string    `json:"variant"`
	Workers   int       `json:"workers"`
	Ops       int       `json:"ops"`
	Errors    int       `json:"errors"`
	OpsPerSec float64   `json:"ops_per_sec"`
	P50Ms     float64   `json:"p50_ms"`
	P99Ms     float64   `json:"p99_ms"`
	PerRound  []float64 `json:"ops_per_sec_per_round"`
	// Bytes per operation in gRPC messages, sent and received (0 when
	// not counted: a client dialled by the caller).
	SentBytes float64 `json:"sent_bytes_per_op"`
	RecvBytes float64 `json:"recv_bytes_per_op"`
	// CPU time the whole process (workers, embedded etcd, gateway) spent
	// per successful operation while the variant's cells ran, in
	// microseconds, and the CPUs it kept busy meanwhile: measured in
	// cells of one variant (not in a paired run, where variants share
	// every moment), preparation included (the dispatch variants'
	// untimed proposal and approval).
	CPUPerOpUs float64 `json:"cpu_us_per_op,omitempty"`
	CPUCores   float64 `json:"cpu_cores,omitempty"`
	lat        []time.Duration
	sent       int64
	recv       int64
	cpu        time.Duration
	wall       time.Duration
}

// Ratio is the throughput of one variant over another's, round by round.
type Ratio struct {
	Name     string    `json:"name"`
	Workers  int       `json:"workers"`
	Min      float64   `json:"min"`
	Median   float64   `json:"median"`
	Max      float64   `json:"max"`
	PerRound []float64 `json:"per_round"`
	Target   float64   `json:"target,omitempty"` // the target for the minimum, if it sets one
	Met      *bool     `json:"met,omitempty"`
	// The numerator's latency over the denominator's, at p50 and p99 over
	// every round (for gateway-commit / commit: what the hop adds).
	AddedP50Ms float64 `json:"added_p50_ms"`
	AddedP99Ms float64 `json:"added_p99_ms"`
}

// Bound is the highest throughput ratio of a variant made through a hop
// (Through) to the same made in-process (Base) that any hop costing at
// least Floor's CPU per operation could reach where the CPUs bound the
// run: cpu(Base) / (cpu(Base) + cpu(Floor)). A measured ratio above it
// means the run was not CPU-bound (its CPUCores say how busy it was).
type Bound struct {
	Name    string  `json:"name"` // "through / base, floor"
	Workers int     `json:"workers"`
	Value   float64 `json:"value"`
}

// boundDefs are the bounds reported: through, base, floor. The dispatch
// variants have none: their CPU per operation includes their untimed
// preparation, which goes through the gateway too.
var boundDefs = []struct{ through, base, floor string }{
	{GatewayCommit, Commit, HTTPFloor},
	{GatewayCommit, Commit, GRPCFloor},
}

// ratioDefs are the ratios reported: numerator, denominator, target.
var ratioDefs = []struct {
	num, den string
	target   float64
}{
	{Commit, BareCommit, 0.95},
	{BareCommitControl, BareCommit, 0},
	{ClaimRelease, BareClaimRelease, 0.97},
	{ClaimRelease, Mutex, 1.0},
	{BareClaimRelease, Mutex, 0},
	{BareClaimRelease, BareClaimReleaseNoFence, 0},
	{BareClaimReleaseNoFence, Mutex, 0},
	{Commit, Put, 0},
	{Election, Mutex, 0},
	{LedgerDispatch, Commit, 0.45},
	{LedgerLifecycle, Commit, 0.22},
	{GatewayCommit, Commit, 0.85},
	{GatewayDispatch, LedgerDispatch, 0.85},
}

// withDefaults is cfg checked, with every default filled in: a copy, whose
// slices are its own (the caller's Config, its slices and the package's
// Variants are never written to, nor shared with the report).
func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) error {
		return store.NewError(store.InvalidInput, "bench", "", "", fmt.Sprintf(format, args...), nil)
	}
	cfg.Workers, cfg.Variants = slices.Clone(cfg.Workers), slices.Clone(cfg.Variants)
	if len(cfg.Workers) == 0 {
		cfg.Workers = []int{1, 16, 64}
	}
	for _, w := range cfg.Workers {
		if w < 1 || w > 1024 {
			return Config{}, bad("workers %d out of range 1..1024", w)
		}
	}
	if cfg.Rounds == 0 {
		cfg.Rounds = 3
	}
	if cfg.Rounds < 1 || cfg.Rounds > 100 {
		return Config{}, bad("rounds %d out of range 1..100", cfg.Rounds)
	}
	if cfg.Duration == 0 {
		cfg.Duration = time.Second
	}
	if cfg.Duration < time.Millisecond || cfg.Duration > time.Hour {
		return Config{}, bad("duration %v out of range 1ms..1h", cfg.Duration)
	}
	if len(cfg.Variants) == 0 {
		cfg.Variants = Variants()
	}
	for _, v := range cfg.Variants {
		if !slices.Contains(variants, v) && v != BareCommitControl {
			return Config{}, bad("unknown variant %q; the variants are %s", v, strings.Join(variants, ", "))
		}
	}
	if err := shared(cfg.Etcd, &cfg.Prefix, &cfg.Logger); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// shared checks which etcd a bench command measures and fills the prefix
// and logger every bench command has (in the caller's copy of its config).
func shared(e Etcd, prefix *string, lg **zap.Logger) error {
	if err := e.check(); err != nil {
		return err
	}
	if *prefix == "" {
		*prefix = freshPrefix()
	}
	if *lg == nil {
		*lg = zap.NewNop()
	}
	return nil
}

// newMachine describes this machine at the start of a run.
func newMachine() Machine {
	return Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), LoadStart: loadAvg()}
}

func freshPrefix() string { return "/leasegate-bench-" + uuid.NewString()[:8] }

func (e Etcd) check() error {
	if len(e.Endpoints) == 0 && e.Dial == nil && e.Dir == "" {
		return store.NewError(store.InvalidInput, "bench", "", "", "an embedded etcd needs a data directory", nil)
	}
	if (len(e.Endpoints) > 0 || e.Dial != nil) && e.NoFsync {
		return store.NewError(store.InvalidInput, "bench", "", "", "--unsafe-no-fsync applies to the embedded etcd only", nil)
	}
	if e.ClientConfig != nil && e.Dial == nil {
		return store.NewError(store.InvalidInput, "bench", "", "", "a client configuration describes Dial's clients: it needs Dial", nil)
	}
	return nil
}

// target is an etcd to measure: a client of it, a way to open more, and a
// way to close what the run started.
type target struct {
	client *clientv3.Client
	dial   func() (*clientv3.Client, error)
	// dialWith opens a client with extra dial options (the gateway's, as
	// leasegate serve dials); the caller's Etcd.Dial takes none.
	dialWith func(...grpc.DialOption) (*clientv3.Client, error)
	wire     *wireCounter // nil when the caller dials (Etcd.Dial)
	// config is what dial's clients are made from, for their coordinators
	// (newCoordinator); nil on the embedded etcd, a single member.
	config *clientv3.Config
	etcd   string
	fsync  string
	close  func()
}

func (e Etcd) open() (*target, error) {
	tg := &target{etcd: e.Label, fsync: "cluster's own", dial: e.Dial, config: e.ClientConfig, close: func() {}}
	switch {
	case e.Dial != nil:
	case len(e.Endpoints) > 0:
		tg.etcd = strings.Join(e.Endpoints, ",")
		tg.wire = &wireCounter{}
		tg.dialWith = plainDial(e.Endpoints, tg.wire)
		cfg := plainConfig(e.Endpoints, tg.wire)
		tg.config = &cfg
	default:
		opts := []embedtest.Option{}
		tg.etcd, tg.fsync = "embedded", "off"
		if !e.NoFsync {
			opts = append(opts, embedtest.WithFsync())
			tg.fsync = "on"
		}
		cl, err := embedtest.Start(e.Dir, opts...)
		if err != nil {
			return nil, store.NewError(coordinator.AuthorityUnavailable, "bench", "", "", "start the embedded etcd", err)
		}
		tg.close = cl.Close
		// Dial etcd directly, not through embedtest's fault proxy.
		tg.wire = &wireCounter{}
		tg.dialWith = plainDial([]string{cl.Member(0).DirectClientURL()}, tg.wire)
	}
	if tg.dialWith != nil {
		tg.dial = func() (*clientv3.Client, error) { return tg.dialWith() }
	} else {
		tg.dialWith = func(...grpc.DialOption) (*clientv3.Client, error) { return tg.dial() }
	}
	cli, err := tg.dial()
	if err != nil {
		tg.close()
		return nil, store.NewError(coordinator.AuthorityUnavailable, "bench", "", "", "connect", err)
	}
	stop := tg.close
	tg.client, tg.close = cli, func() { _ = cli.Close(); stop() }
	if tg.etcd == "" {
		tg.etcd = strings.Join(cli.Endpoints(), ",")
	}
	return tg, nil
}

func plainDial(endpoints []string, wire *wireCounter) func(...grpc.DialOption) (*clientv3.Client, error) {
	return func(extra ...grpc.DialOption) (*clientv3.Client, error) {
		return clientv3.New(plainConfig(endpoints, wire, extra...))
	}
}

// plainConfig is the configuration of a plain client of endpoints whose
// bytes wire counts.
func plainConfig(endpoints []string, wire *wireCounter, extra ...grpc.DialOption) clientv3.Config {
	return clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		DialOptions: append(append(coordinator.DialOptions(), grpc.WithStatsHandler(wire)), extra...), Logger: zap.NewNop()}
}

// newCoordinator is coordinator.New on cli, a client of tg, with opts and
// the configuration tg's clients are made from (coordinator.WithClientConfig).
func (tg *target) newCoordinator(ctx context.Context, cli *clientv3.Client, opts ...coordinator.Option) (*coordinator.Coordinator, error) {
	if tg.config != nil {
		opts = append(opts, coordinator.WithClientConfig(*tg.config))
	}
	return coordinator.New(ctx, cli, opts...)
}

// wireCounter counts the bytes of gRPC messages a client sends and
// receives (payloads as framed on the wire, without TLS or HTTP/2
// headers).
type wireCounter struct{ sent, recv atomic.Int64 }

func (w *wireCounter) counts() (int64, int64) {
	if w == nil {
		return 0, 0
	}
	return w.sent.Load(), w.recv.Load()
}

func (w *wireCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (w *wireCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch p := s.(type) {
	case *stats.OutPayload:
		w.sent.Add(int64(p.WireLength))
	case *stats.InPayload:
		w.recv.Add(int64(p.WireLength))
	}
}
func (w *wireCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (w *wireCounter) HandleConn(context.Context, stats.ConnStats)                       {}

// Run measures every variant at every worker count, in interleaved rounds:
// each round runs every (workers, variant) cell once, the variants in an
// order rotated from round to round.
func Run(ctx context.Context, cfg Config) (out *Report, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	tg, err := cfg.Etcd.open()
	if err != nil {
		return nil, err
	}
	defer tg.close()
	rep := &Report{Etcd: tg.etcd, Fsync: tg.fsync, Rounds: cfg.Rounds, Paired: cfg.Paired, CellMs: cfg.Duration.Milliseconds(),
		Workers: cfg.Workers, Variants: cfg.Variants,
		Machine: newMachine()}
	total, done := cfg.Rounds*len(cfg.Workers)*len(cfg.Variants), 0
	expected := time.Duration(total) * cfg.Duration
	report(cfg.Progress, Progress{Total: total, Expected: expected, Line: fmt.Sprintf(
		"bench: %d rounds × %d worker counts × %d variants, %v per variant: about %v after the set-up",
		cfg.Rounds, len(cfg.Workers), len(cfg.Variants), cfg.Duration, about(expected))})
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = interrupted(ctx, done, total, "cells")
			rep.Interrupted = err.Error()
			out = rep
		}
	}()

	opts := []coordinator.Option{coordinator.WithPrefix(cfg.Prefix), coordinator.WithLogger(cfg.Logger)}
	if cfg.Registerer != nil {
		opts = append(opts, coordinator.WithMetrics(cfg.Registerer))
	}
	c, err := tg.newCoordinator(ctx, tg.client, opts...)
	if err != nil {
		return nil, err
	}
	defer cleanup(tg.client, cfg.Prefix)

	l, err := newBenchLedger(c)
	if err != nil {
		return nil, err
	}
	workers := make([]*worker, 0, slices.Max(cfg.Workers))
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, w := range workers {
			w.close(cctx)
		}
	}()
	for i := range cap(workers) {
		w, err := newWorker(ctx, c, l, i, cfg.Prefix)
		if err != nil {
			return nil, fmt.Errorf("bench: set up worker %d: %w", i, err)
		}
		workers = append(workers, w)
	}
	closeGateway, err := withGateway(ctx, tg, cfg.Prefix, workers, cfg.Variants, cfg.Console, rep, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer closeGateway()
	// One operation of every variant by every worker first: it proves the
	// variant works and warms up connections and keys.
	for _, v := range cfg.Variants {
		for _, w := range workers {
			err := w.prepareOp(ctx, v)
			if err == nil {
				err = w.op(ctx, v)
			}
			if err != nil {
				return nil, fmt.Errorf("bench: warm-up of %s: %w", v, err)
			}
		}
	}

	results := map[string]*Result{}
	key := func(v string, n int) string { return fmt.Sprintf("%s/%d", v, n) }
	for _, n := range cfg.Workers {
		for _, v := range cfg.Variants {
			results[key(v, n)] = &Result{Variant: v, Workers: n}
		}
	}
cells:
	for round := range cfg.Rounds {
		for _, n := range cfg.Workers {
			where := fmt.Sprintf("round %d/%d, %d workers", round+1, cfg.Rounds, n)
			if cfg.Paired {
				if ctx.Err() != nil {
					break cells
				}
				outs := pairedCell(ctx, workers[:n], cfg.Variants, cfg.Duration*time.Duration(len(cfg.Variants)))
				if ctx.Err() != nil {
					break cells // cut short: not a result
				}
				var line []string
				for _, v := range cfg.Variants {
					o := outs[v]
					r := results[key(v, n)]
					r.Ops += len(o.lat)
					r.Errors += o.errs
					r.lat = append(r.lat, o.lat...)
					r.PerRound = append(r.PerRound, float64(len(o.lat))/o.busy.Seconds()*float64(n))
					line = append(line, fmt.Sprintf("%s %.0f ops/s", v, r.PerRound[len(r.PerRound)-1]))
				}
				done += len(cfg.Variants)
				report(cfg.Progress, Progress{Done: done, Total: total, Line: where + ", paired: " + strings.Join(line, ", ")})
				continue
			}
			for i := range cfg.Variants {
				v := cfg.Variants[(i+round)%len(cfg.Variants)]
				if ctx.Err() != nil {
					break cells
				}
				r := results[key(v, n)]
				sent, recv := tg.wire.counts()
				cpu0, cpuErr := processCPU()
				wall0 := time.Now()
				ops, errs, elapsed, lat := cell(ctx, workers[:n], v, cfg.Duration)
				if ctx.Err() != nil {
					break cells // cut short: not a result
				}
				cellCPU := "-"
				if cpu1, err := processCPU(); err == nil && cpuErr == nil {
					r.cpu, r.wall = r.cpu+cpu1-cpu0, r.wall+time.Since(wall0)
					if ops > 0 {
						cellCPU = fmt.Sprintf("%.0f", float64((cpu1-cpu0).Microseconds())/float64(ops))
					}
				}
				sent2, recv2 := tg.wire.counts()
				r.sent, r.recv = r.sent+sent2-sent, r.recv+recv2-recv
				r.Ops += ops
				r.Errors += errs
				r.lat = append(r.lat, lat...)
				r.PerRound = append(r.PerRound, float64(ops)/elapsed.Seconds())
				done++
				slices.Sort(lat)
				report(cfg.Progress, Progress{Done: done, Total: total, Line: fmt.Sprintf("%s, %s: %.0f ops/s, p50 %.2f ms, p99 %.2f ms, %d errors, cpu %s µs/op",
					where, v, r.PerRound[len(r.PerRound)-1], ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), errs, cellCPU)})
			}
		}
	}
	for _, n := range cfg.Workers {
		for _, v := range cfg.Variants {
			r := results[key(v, n)]
			r.finish(cfg.Duration)
			rep.Results = append(rep.Results, *r)
		}
		for _, d := range ratioDefs {
			num, den := results[key(d.num, n)], results[key(d.den, n)]
			if num == nil || den == nil || len(num.PerRound) == 0 || len(den.PerRound) == 0 {
				continue // not measured, or not yet when interrupted
			}
			r := ratioOf(d.num+" / "+d.den, n, num.PerRound, den.PerRound, d.target)
			r.AddedP50Ms, r.AddedP99Ms = round3(num.P50Ms-den.P50Ms), round3(num.P99Ms-den.P99Ms)
			rep.Ratios = append(rep.Ratios, r)
		}
		for _, d := range boundDefs {
			base, floor := results[key(d.base, n)], results[key(d.floor, n)]
			if results[key(d.through, n)] == nil || base == nil || floor == nil || base.CPUPerOpUs <= 0 || floor.CPUPerOpUs <= 0 {
				continue // not measured (or a paired run)
			}
			rep.Bounds = append(rep.Bounds, Bound{Name: fmt.Sprintf("%s / %s, %s", d.through, d.base, d.floor), Workers: n,
				Value: round3(base.CPUPerOpUs / (base.CPUPerOpUs + floor.CPUPerOpUs))})
		}
	}
	rep.Machine.LoadEnd = loadAvg()
	if ctx.Err() != nil {
		return rep, ctx.Err() // the deferred func names it
	}
	return rep, nil
}

// cell runs variant v on every worker for about d and returns the
// operations that succeeded, the failures, the wall time from the start
// to the last operation's end, and every successful operation's latency.
func cell(ctx context.Context, ws []*worker, v string, d time.Duration) (int, int, time.Duration, []time.Duration) {
	type out struct {
		lat  []time.Duration
		errs int
	}
	outs := make([]out, len(ws))
	prep := make([]time.Duration, len(ws))
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) && ctx.Err() == nil {
				octx, cancel := context.WithTimeout(ctx, 30*time.Second)
				p0 := time.Now()
				err := w.prepareOp(octx, v) // untimed: it leaves the wall time too
				t0 := time.Now()
				prep[i] += t0.Sub(p0)
				if err == nil {
					err = w.op(octx, v)
				}
				el := time.Since(t0)
				cancel()
				if err != nil {
					outs[i].errs++
					continue
				}
				outs[i].lat = append(outs[i].lat, el)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var prepared time.Duration
	for _, p := range prep {
		prepared += p
	}
	elapsed -= prepared / time.Duration(len(ws))
	var lat []time.Duration
	errs := 0
	for _, o := range outs {
		lat = append(lat, o.lat...)
		errs += o.errs
	}
	return len(lat), errs, elapsed, lat
}

// pairedOut is one variant's share of a paired cell.
type pairedOut struct {
	lat  []time.Duration
	errs int
	busy time.Duration // time workers spent in this variant's operations, failed ones included
}

// pairedCell runs every variant in one cell of about d, each worker taking
// them in turn operation by operation (worker i starting at variant i), so
// that every variant sees the same moment's load.
func pairedCell(ctx context.Context, ws []*worker, vs []string, d time.Duration) map[string]*pairedOut {
	outs := make([]map[string]*pairedOut, len(ws))
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for i, w := range ws {
		outs[i] = map[string]*pairedOut{}
		for _, v := range vs {
			outs[i][v] = &pairedOut{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; time.Now().Before(stop) && ctx.Err() == nil; j++ {
				v := vs[j%len(vs)]
				o := outs[i][v]
				octx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := w.prepareOp(octx, v) // untimed
				t0 := time.Now()
				if err == nil {
					err = w.op(octx, v)
				}
				el := time.Since(t0)
				cancel()
				o.busy += el
				if err != nil {
					o.errs++
					continue
				}
				o.lat = append(o.lat, el)
			}
		}()
	}
	wg.Wait()
	all := map[string]*pairedOut{}
	for _, v := range vs {
		a := &pairedOut{}
		for _, o := range outs {
			a.lat = append(a.lat, o[v].lat...)
			a.errs += o[v].errs
			a.busy += o[v].busy
		}
		all[v] = a
	}
	return all
}

func (r *Result) finish(d time.Duration) {
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	r.P50Ms, r.P99Ms = ms(percentile(r.lat, 0.50)), ms(percentile(r.lat, 0.99))
	var sum float64
	for _, x := range r.PerRound {
		sum += x
	}
	if len(r.PerRound) > 0 {
		r.OpsPerSec = sum / float64(len(r.PerRound))
	}
	if all := r.Ops + r.Errors; all > 0 {
		r.SentBytes, r.RecvBytes = round3(float64(r.sent)/float64(all)), round3(float64(r.recv)/float64(all))
	}
	r.CPUPerOpUs = round3(r.cpuPerOp())
	if r.wall > 0 {
		r.CPUCores = round3(r.cpu.Seconds() / r.wall.Seconds())
	}
	r.lat = nil
}

// cpuPerOp is the process's CPU per successful operation so far, in
// microseconds (0 when not measured).
func (r *Result) cpuPerOp() float64 {
	if r.Ops == 0 || r.cpu == 0 {
		return 0
	}
	return float64(r.cpu.Microseconds()) / float64(r.Ops)
}

func ratioOf(name string, n int, num, den []float64, target float64) Ratio {
	r := Ratio{Name: name, Workers: n, Target: target}
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			r.PerRound = append(r.PerRound, round3(num[i]/den[i]))
		}
	}
	if len(r.PerRound) == 0 {
		return r
	}
	s := slices.Clone(r.PerRound)
	slices.Sort(s)
	r.Min, r.Max, r.Median = s[0], s[len(s)-1], s[len(s)/2]
	if len(s)%2 == 0 {
		r.Median = round3((s[len(s)/2-1] + s[len(s)/2]) / 2)
	}
	if target > 0 {
		met := r.Min >= target
		r.Met = &met
	}
	return r
}

// percentile of sorted latencies (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cleanup deletes what the run wrote (leasegate's keyspace and the plain
// keys), so that a bench against a real cluster leaves nothing behind.
func cleanup(cli *clientv3.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
	_, _ = cli.Delete(ctx, prefix+"-plain/", clientv3.WithPrefix())
}
