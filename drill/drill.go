package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// DefaultTrials matches the seed's 1,200 fault-injection trials per design.
const DefaultTrials = 1200

// Option configures Run.
type Option func(*config) error

type config struct {
	Trials   int
	Seed     uint64
	Parallel int
	Designs  []Design
	Prefix   string
	Replay   int // -1: no replay
	Scenario Scenario
	Logger   *zap.Logger
	Progress func(Progress)
	Metrics  prometheus.Registerer // WithMetrics (metrics.go)
	real     *RealProviders        // WithRealProviders (real.go)
	// clientConfig and tlsFiles: the caller's client settings
	// (WithClientConfig, WithTLSFiles; client.go).
	clientConfig *clientv3.Config
	tlsFiles     *transport.TLSInfo
	// ViaGateway: the fenced workers reach their gateway over loopback TLS
	// (gateway.go), else they call the ledger in-process.
	ViaGateway bool
	// worker: drill a user's worker (WithWorker, worker.go).
	worker *workerConfig
}

// WithTrials sets the number of trials per design (default DefaultTrials).
func WithTrials(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1_000_000 {
			return fmt.Errorf("trials %d out of range 1..1000000", n)
		}
		c.Trials = n
		return nil
	}
}

// WithSeed sets the seed every trial's faults and timings derive from.
func WithSeed(s uint64) Option {
	return func(c *config) error { c.Seed = s; return nil }
}

// WithParallel sets how many trials run at once (default 16).
func WithParallel(p int) Option {
	return func(c *config) error {
		if p < 1 || p > 1024 {
			return fmt.Errorf("parallel %d out of range 1..1024", p)
		}
		c.Parallel = p
		return nil
	}
}

// WithDesigns sets which designs run (default both, fenced first): Fenced,
// Naive, or a self-test design (SelfTestDesigns), which the drill must
// fail.
func WithDesigns(ds ...Design) Option {
	return func(c *config) error {
		if len(ds) == 0 {
			return errors.New("no design")
		}
		for _, d := range ds {
			if !slices.Contains(Designs(), d) {
				return fmt.Errorf("design %q: use %s or %s (or a self-test design: %v)", d, Fenced, Naive, selfTests)
			}
		}
		c.Designs = ds
		return nil
	}
}

// WithPrefix sets the key prefix the run works under (it must be the
// run's own: it is deleted by Cleanup).
func WithPrefix(p string) Option {
	return func(c *config) error {
		if len(p) < 2 || p[0] != '/' || p[len(p)-1] == '/' {
			return fmt.Errorf("prefix %q must start with '/' and not end with one", p)
		}
		c.Prefix = p
		return nil
	}
}

// WithReplay runs only trial n, keeping its trajectory in the report.
func WithReplay(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("replay trial %d is negative", n)
		}
		c.Replay = n
		return nil
	}
}

// WithScenario runs the named scenario in each design instead of the
// trials (its trajectories in the report, as with WithReplay).
func WithScenario(sc Scenario) Option {
	return func(c *config) error {
		for _, x := range scenarios {
			if sc == x {
				c.Scenario = sc
				return nil
			}
		}
		return fmt.Errorf("scenario %q: the scenarios are %v", sc, scenarios)
	}
}

// WithViaGateway sets whether the fenced design's workers reach the
// effect gateway over the network — a gateway server on loopback TLS
// holding each trial's provider adapters, so that a worker's stop does not
// stop a dispatch the gateway claimed — or call the ledger in their own
// process (false), as an embedded gateway (default true).
func WithViaGateway(on bool) Option {
	return func(c *config) error { c.ViaGateway = on; return nil }
}

// WithLogger sets the logger (default zap.NewNop()).
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return errors.New("nil logger")
		}
		c.Logger = lg
		return nil
	}
}

// Progress is how far a run is, as WithProgress reports it: the shape of
// bench.Progress. Done of Total trials (of every design) are finished;
// Line, when not empty, says what just finished (a design's trials).
type Progress struct {
	Done, Total int
	Line        string
}

// WithProgress calls f after every trial, and once more with a Line when a
// design's trials are done (from any goroutine, one call at a time).
func WithProgress(f func(Progress)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("nil progress func")
		}
		c.Progress = f
		return nil
	}
}

// CheckOptions reports why opts cannot configure a run (invalid_input),
// before any I/O.
func CheckOptions(opts ...Option) error {
	var cfg config
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	return nil
}

// Report is the outcome of a drill: the fixtures, each design's scores,
// and whether the drill passed.
type Report struct {
	Fixtures []FixtureResult          `json:"fixtures"`
	Designs  map[Design]*DesignReport `json:"designs"`
	Pass     bool                     `json:"pass"`
	// Replayed holds the replayed trial's trajectories, by design.
	Replayed []*Trajectory `json:"-"`
	// Why says which pass condition failed ("" when it passed).
	Why string `json:"-"`
	// Paired is the cost of safety paired trial by trial, fenced minus
	// naive (nil unless both ran the same trials).
	Paired *Paired `json:"paired,omitempty"`
}

// DesignReport is one design's scores over every trial.
type DesignReport struct {
	Trials          int               `json:"trials"`
	TotalViolations int               `json:"total_violations"`
	Violations      map[Grader]int    `json:"violations"`
	Faults          map[FaultKind]int `json:"faults"`
	// UnknownOperations went UNKNOWN; Reconciled of them ended CONFIRMED
	// or SUPERSEDED on the provider's evidence without an operator;
	// ManualReview went to MANUAL_REVIEW, and Resolved of those an
	// operator then resolved (Ledger.Resolve).
	UnknownOperations int     `json:"unknown_operations"`
	Reconciled        int     `json:"reconciled"`
	ManualReview      int     `json:"manual_review"`
	Resolved          int     `json:"-"`
	Seconds           float64 `json:"seconds"`
	// Cost is the cost of safety, in simulated time.
	Cost Cost `json:"cost"`
	// ResidualStaleCalls are stale calls that reached a provider through
	// the residual window (the gateway read the grant current, the worker
	// paused, the call left after its lease ended); ResidualApplied of them
	// changed the world. Not violations of stale_epoch_dispatch: only a
	// provider that checks the fence token can refuse them.
	ResidualStaleCalls int `json:"residual_stale_calls"`
	ResidualApplied    int `json:"residual_applied"`
	// RefusedAtGateway counts stale requests the gateway refused, and
	// FirstViolation the first trial each grader flagged (for --replay).
	RefusedAtGateway int            `json:"-"`
	FirstViolation   map[Grader]int `json:"-"`
	// SeedSequence counts the trials that played seed 003's central
	// sequence (the provider acknowledged the promotion, the answer never
	// reached its worker, the worker paused past its heartbeat timeout, a
	// replacement claimed, the old worker woke and tried its next effect);
	// NaiveOrder those that played its traffic order (the stale worker
	// pointed traffic at the promoted secondary, then the replacement back
	// at the original). Both read from the world's record (incident.go).
	SeedSequence int `json:"seed_sequence"`
	NaiveOrder   int `json:"seed_traffic_order"`
	// costs is each trial's cost, by trial number (for Paired).
	costs map[int]trialCost
}

// runner is one drill run.
type runner struct {
	cfg   config
	coord *coordinator.Coordinator
	// hop serves the fenced trials' gateways (nil: in-process).
	hop *hop
	// serve is the real-provider run's `leasegate serve --config`
	// (realserve.go; nil: none).
	serve *realServe
	// proc serves a user's worker's trials (WithWorker; nil: none).
	proc *procRun
	// worker is how the real-provider workers dial etcd (client.go; nil:
	// the endpoints alone).
	worker *workerClient
	// bypassOnWake breaks the fenced design for a test: a worker woken from
	// a stop beside the gateway calls the DNS provider itself.
	bypassOnWake bool
	// dropTrafficRequirement breaks the fenced design for a test: its
	// traffic changes require nothing of the topology; atTrafficDispatch,
	// if set, runs in a simulated fenced worker just before each traffic
	// dispatch (a test's change of the world there).
	dropTrafficRequirement bool
	atTrafficDispatch      func(wk *worker)
	// progress: done of total trials; mu orders the Progress calls.
	mu          sync.Mutex
	done, total int
}

func (r *runner) progress(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if line == "" {
		r.done++
	}
	r.cfg.Progress(Progress{Done: r.done, Total: r.total, Line: line})
}

func (r *runner) tenant(d Design) string { return "drill-" + string(d) }

// Run runs the fixtures and the trials against the etcd cluster client
// reaches, under the run's prefix, and grades every trajectory. An error
// means the drill could not run (etcd unreachable, say): no report is a
// pass. It does not delete the prefix: call Cleanup.
func Run(ctx context.Context, client *clientv3.Client, opts ...Option) (*Report, error) {
	cfg := config{Trials: DefaultTrials, Parallel: 16, Designs: []Design{Fenced, Naive}, Prefix: "/leasegate/drill",
		Replay: -1, Logger: zap.NewNop(), Progress: func(Progress) {}, ViaGateway: true}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if client == nil {
		return nil, store.NewError(store.InvalidInput, "drill", "", "", "nil etcd client", nil)
	}
	if cfg.real != nil {
		if err := checkReal(&cfg); err != nil {
			return nil, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if err := checkClient(&cfg); err != nil {
		return nil, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("%v", err), nil)
	}
	lg := cfg.Logger.Named("drill")
	fixtures, err := runFixtures(ctx, client, cfg.Prefix+"/fixtures", lg, cfg.coordinatorOptions()...)
	if err != nil {
		return nil, fmt.Errorf("drill: fixtures: %w", err)
	}
	coord, err := coordinator.New(ctx, client, cfg.coordinatorOptions(append(metricsOptions(cfg.Metrics),
		coordinator.WithPrefix(cfg.Prefix+"/trials"), coordinator.WithLogger(lg))...)...)
	if err != nil {
		return nil, fmt.Errorf("drill: %w", err)
	}
	r := &runner{cfg: cfg, coord: coord, total: cfg.Trials * len(cfg.Designs)}
	if cfg.real != nil {
		dir, err := os.MkdirTemp("", "leasegate-drill-workers-")
		if err != nil {
			return nil, fmt.Errorf("drill: the workers' directory: %w", err)
		}
		defer os.RemoveAll(dir)
		if r.worker, err = newWorkerClient(&cfg, dir); err != nil {
			return nil, err
		}
		if slices.Contains(cfg.Designs, Fenced) {
			if r.serve, err = r.startRealServe(ctx); err != nil {
				return nil, err
			}
			defer func() {
				if cerr := r.serve.close(); cerr != nil {
					lg.Warn("leasegate serve", zap.Error(cerr))
				}
			}()
		}
	}
	if cfg.ViaGateway && cfg.real == nil && slices.ContainsFunc(cfg.Designs, Design.ledgered) { // the real providers' world has its own gateway
		h, err := startHop(lg)
		if err != nil {
			return nil, err
		}
		defer func() {
			if cerr := h.close(); cerr != nil {
				lg.Warn("gateway listener", zap.Error(cerr))
			}
		}()
		r.hop = h
	}
	if cfg.worker != nil {
		pr, err := startProcRun(r, cfg.worker.argv, lg)
		if err != nil {
			return nil, err
		}
		defer func() {
			if cerr := pr.close(); cerr != nil {
				lg.Warn("worker gateway listener", zap.Error(cerr))
			}
		}()
		r.proc = pr
	}
	if cfg.Replay >= 0 || cfg.Scenario != "" {
		r.total = len(cfg.Designs)
	}
	rep := &Report{Fixtures: fixtures, Designs: map[Design]*DesignReport{}}
	for _, d := range cfg.Designs {
		dr, trajs, err := r.runDesign(ctx, d)
		if err != nil {
			return nil, err
		}
		rep.Designs[d] = dr
		rep.Replayed = append(rep.Replayed, trajs...)
	}
	if f, n := rep.Designs[Fenced], rep.Designs[Naive]; f != nil && n != nil && cfg.Scenario == "" {
		rep.Paired = paired(f, n)
	}
	rep.Pass, rep.Why = verdict(rep, cfg.Replay >= 0 || cfg.Scenario != "")
	return rep, nil
}

// verdict: every fixture passes, every design but the naive one (the
// fenced design, a self-test design) scores zero — a liveness violation
// as any other — and the naive design is caught by at least two graders
// (not asked of a replay: one trial need not show two).
func verdict(rep *Report, replay bool) (bool, string) {
	for _, f := range rep.Fixtures {
		if !f.Pass {
			return false, fmt.Sprintf("fixture %q: expected %s, observed %s", f.Name, f.Expected, f.Observed)
		}
	}
	for _, d := range Designs() {
		if dr, ok := rep.Designs[d]; ok && d != Naive && dr.TotalViolations > 0 {
			return false, fmt.Sprintf("the %s design has %d violations", d, dr.TotalViolations)
		}
	}
	if w, ok := rep.Designs[Worker]; ok && w.TotalViolations > 0 {
		return false, fmt.Sprintf("the worker has %d violations", w.TotalViolations)
	}
	if n, ok := rep.Designs[Naive]; ok && !replay {
		caught := 0
		for _, c := range n.Violations {
			if c > 0 {
				caught++
			}
		}
		if caught < 2 {
			return false, fmt.Sprintf("the naive design is caught by %d graders; at least 2 needed (faults that never bite prove nothing)", caught)
		}
	}
	return true, ""
}

// runDesign runs every trial of one design, Parallel at a time.
func (r *runner) runDesign(ctx context.Context, d Design) (*DesignReport, []*Trajectory, error) {
	start := time.Now()
	if r.cfg.Scenario != "" {
		dr := newDesignReport()
		traj, errs := r.runScenario(ctx, d, r.cfg.Scenario)
		if len(errs) > 0 {
			return nil, nil, fmt.Errorf("drill: %s scenario %s: %w", d, r.cfg.Scenario, errors.Join(errs...))
		}
		dr.add(traj)
		dr.Seconds = time.Since(start).Seconds()
		dr.Cost.finish()
		r.progress("")
		return dr, []*Trajectory{traj}, nil
	}
	trials := make([]int, 0, r.cfg.Trials)
	if r.cfg.Replay >= 0 {
		trials = append(trials, r.cfg.Replay)
	} else {
		for i := 0; i < r.cfg.Trials; i++ {
			trials = append(trials, i)
		}
		if r.proc != nil {
			r.proc.order(trials)
		}
	}
	dr := newDesignReport()
	var (
		mu       sync.Mutex
		firstErr error
		kept     []*Trajectory
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	for range min(r.cfg.Parallel, len(trials)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for trial := range next {
				traj, errs := r.runTrial(ctx, d, trial)
				mu.Lock()
				if len(errs) > 0 && firstErr == nil {
					firstErr = fmt.Errorf("drill: %s trial %d: %w", d, trial, errors.Join(errs...))
				}
				dr.add(traj)
				if r.cfg.Replay >= 0 || r.cfg.real != nil || r.proc != nil { // a real trial, or a worker's, cannot be replayed exactly: keep it
					kept = append(kept, traj)
				}
				mu.Unlock()
				r.progress("")
			}
		}()
	}
	for _, t := range trials {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		next <- t
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = fmt.Errorf("drill: %w", context.Cause(ctx))
	}
	dr.Seconds = time.Since(start).Seconds()
	dr.Cost.finish()
	r.progress(fmt.Sprintf("%s: %d trials, %d violations, %.1f s", d, dr.Trials, dr.TotalViolations, dr.Seconds))
	r.cfg.Logger.Named("drill").Info("trials done", zap.String("tenant", r.tenant(d)), zap.Int("trials", dr.Trials),
		zap.Int("violations", dr.TotalViolations), zap.Float64("seconds", dr.Seconds))
	return dr, kept, firstErr
}

func newDesignReport() *DesignReport {
	dr := &DesignReport{Violations: map[Grader]int{}, Faults: map[FaultKind]int{}, FirstViolation: map[Grader]int{}, costs: map[int]trialCost{}}
	for _, g := range graders {
		dr.Violations[g] = 0
	}
	for _, k := range faultKinds {
		dr.Faults[k] = 0
	}
	return dr
}

// add scores one trajectory.
func (dr *DesignReport) add(t *Trajectory) {
	dr.Trials++
	for _, v := range Grade(t) {
		if _, seen := dr.FirstViolation[v.Grader]; !seen || t.Trial < dr.FirstViolation[v.Grader] {
			dr.FirstViolation[v.Grader] = t.Trial
		}
		dr.Violations[v.Grader]++
		dr.TotalViolations++
	}
	tc := costOf(t)
	dr.Cost.add(tc)
	if dr.costs != nil {
		dr.costs[t.Trial] = tc
	}
	if seedSequence(t) {
		dr.SeedSequence++
	}
	if naiveOrder(t) {
		dr.NaiveOrder++
	}
	_, residual := staleCalls(t)
	for _, c := range residual {
		dr.ResidualStaleCalls++
		if c.applied {
			dr.ResidualApplied++
		}
	}
	fired := map[FaultKind]bool{}
	for _, e := range t.Events {
		switch e.Kind {
		case KindFault:
			fired[FaultKind(e.Effect)] = true
		case KindRefused:
			dr.RefusedAtGateway++
		}
	}
	for k := range fired {
		dr.Faults[k]++
	}
	ops := operations(t)
	for _, op := range ops.order {
		last := ops.last[op]
		if ops.unknown[op] {
			dr.UnknownOperations++
			if (last == "CONFIRMED" || last == "SUPERSEDED") && !ops.review[op] {
				dr.Reconciled++
			}
		}
		if ops.review[op] {
			dr.ManualReview++
			if last != "MANUAL_REVIEW" {
				dr.Resolved++
			}
		}
	}
}

// Cleanup deletes everything under the run's prefix.
func Cleanup(ctx context.Context, client *clientv3.Client, prefix string) error {
	if _, err := client.Delete(ctx, prefix+"/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("drill: clean up %s: %w", prefix, err)
	}
	return nil
}
