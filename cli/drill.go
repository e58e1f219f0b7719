package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
)

// init gives the drill leasegate's command line: a real-provider drill runs
// `leasegate serve --config` as a process of its own binary (drill.HostServe;
// a process started so runs it and exits here).
func init() {
	drill.HostServe(func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		defer stop()
		return ExitCode(New().RunContext(ctx, args))
	})
}

// defaultDrillSeed makes `leasegate drill` reproducible unless --seed says
// otherwise.
const defaultDrillSeed = 2026

func drillCommand() *cli.Command {
	return &cli.Command{
		Name:  "drill",
		Usage: "run the failover drill: seed-000 fixtures, then the seed-003 failover under faults, naive vs fenced",
		Description: example(`Runs the seed-000 stale-owner fixtures (expected vs observed disposition), then
N randomized regional-failover trials with injected faults, twice on the same
seeds: once with the naive design of the incident (a fresh request key per
attempt, no fence at the gateway, the checkpoint trusted as present truth,
promotion and traffic as one step), once fenced through the effect ledger.
Graders read each trial's journal and provider logs. The drill passes when
every fixture passes, the fenced design has zero violations and the naive
design is caught by at least two graders; the exit code is 0 then, 1 if not.

Unless --endpoints is given on the command line it starts an embedded
single-member etcd in a temporary directory (fsync off, for speed) and
removes it afterwards. An exported LEASEGATE_ENDPOINTS does not count: the
drill writes test data, and never reaches a real cluster through the
environment (a command-line value equal to the environment's cannot be told
apart and counts as the environment's). With --endpoints on the command
line it runs on that cluster (TLS and auth flags apply) under
<prefix>/drill/<run id>, inside leasegate's prefix (so a role with readwrite
on the prefix covers it), which it deletes at the end unless --keep.
Ownership, fences and the ledger are real etcd; the providers and their time
are simulated (see docs/drill.md). The fenced workers reach their effect
gateway over loopback TLS (a gateway server per trial behind one listener,
holding the trial's providers, with throwaway certificates as serve --dev
makes them): a worker that stops leaves its claimed call to the gateway,
which completes it; --via-gateway=false puts the ledger back in the worker's
process (faster, about half the fenced trials' CPU).

With --providers real the failover's providers are real servers started on
loopback ports for the run — a PostgreSQL 15 primary and streaming standby
as the database topology, BIND 9 named as the checkout record's authority —
and trials run one at a time in real time, 20 per design unless --trials
says otherwise. The fenced workers are processes that hold only a
certificate: they reach etcd and the servers through a leasegate serve
--config the drill starts for the run, which alone holds the PostgreSQL
password and the TSIG key; the world's incident commander decides in the
drill's process, under a certificate of its own. Promotion is pg_promote on the standby, reconciled from
pg_is_in_recovery and the timeline; traffic is an RFC 2136 update whose
prerequisite is the approved record, observed by query. The faults are the
ones that are real there: the promote's connection cut after send, a worker
paused in a dispatch window (no steps, no heartbeats: its etcd lease
expires), an operator's nsupdate mid-incident, the standby shut down at
dispatch. A fresh standby is cloned (pg_basebackup) before every trial. The
servers must be installed (make providers, as root); --replay, --scenario,
--svg and --parallel are for the simulated providers.

Exit codes: 0 the drill passed; 1 it failed (one line on stderr says why);
2 invalid flags, nothing started; 3 etcd could not be reached (a hold, never
a pass); 6 etcd refused these credentials or this prefix (permission_denied,
unauthenticated: check the user, the password, the client certificate and
the role's grant on --prefix).`,
			"leasegate drill",
			"leasegate drill --trials 10000 --parallel 32 -o json",
			"leasegate drill --design naive --replay 3",
			"leasegate drill --scenario incident",
			"leasegate drill --scenario incident --svg incident.svg   # incident-naive.svg, incident-fenced.svg",
			"leasegate drill --design fenced --replay 7 --svg trial7.svg",
			"leasegate drill --via-gateway=false   # the fenced workers call the ledger in-process",
			"leasegate --endpoints 127.0.0.1:2379 drill --trials 200 --keep",
			"leasegate drill --providers real                # 20 trials per design on PostgreSQL and BIND",
			"leasegate drill --providers real --trials 5 --design fenced",
			"leasegate drill --worker 'python3 examples/python/recovery_worker.py' --trials 20"),
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "trials", Usage: "trials per design", Value: drill.DefaultTrials},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of every trial's faults and timings", Value: defaultDrillSeed},
			&cli.IntFlag{Name: "parallel", Usage: "trials run at once", Value: 16},
			&cli.StringFlag{Name: "design", Usage: "fenced, naive or both; or a graders' self-test design the drill must fail: refuse-all, hold-traffic, release-after-claim, do-nothing", Value: "both"},
			&cli.IntFlag{Name: "replay", Usage: "run only trial `N` and print its whole trajectory", Value: -1},
			&cli.StringFlag{Name: "svg", Usage: "with --replay or --scenario: draw the trajectory as an SVG timeline in `FILE` (with both designs, FILE-naive.svg and FILE-fenced.svg)"},
			&cli.StringFlag{Name: "scenario", Usage: "replay a named scenario in both designs, side by side against its clock (incident: seed 003's timeline)"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the run's keys in etcd (with --endpoints) for inspection"},
			&cli.StringFlag{Name: "providers", Usage: "sim (simulated providers, virtual time) or real (PostgreSQL and BIND on this machine, real time; default 20 trials)", Value: "sim"},
			&cli.BoolFlag{Name: "via-gateway", Usage: "the fenced workers reach the effect gateway over loopback TLS (false: they call the ledger in-process)", Value: true},
			&cli.StringFlag{Name: "worker", Usage: "drill your own recovery worker: `'CMD ARGS'` (split on spaces) run as processes against the trial's gateway, per the contract in docs/drill.md (default 20 trials)"},
			metricsAddrFlag(),
		},
		Action: drillAction,
	}
}

// drillSettings are the drill's flags, checked before any I/O.
type drillSettings struct {
	opts     []drill.Option
	replay   int
	scenario drill.Scenario
	svg      string
	keep     bool
	trials   int
	designs  []drill.Design
	real     bool     // --providers real
	worker   []string // --worker
}

func drillFlags(c *cli.Context) (drillSettings, error) {
	s := drillSettings{replay: c.Int("replay"), keep: c.Bool("keep"), trials: c.Int("trials")}
	switch d := c.String("design"); d {
	case "both":
		s.designs = []drill.Design{drill.Fenced, drill.Naive}
	default:
		if !slices.Contains(drill.Designs(), drill.Design(d)) {
			return s, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("--design %q: use fenced, naive or both (or a graders' self-test design: %v)", d, drill.SelfTestDesigns()), nil)
		}
		s.designs = []drill.Design{drill.Design(d)}
	}
	switch pr := c.String("providers"); pr {
	case "sim":
	case "real":
		s.real = true
		for _, f := range []string{"replay", "scenario", "svg", "parallel"} {
			if c.IsSet(f) {
				return s, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("--%s is for the simulated providers, not --providers real", f), nil)
			}
		}
		if !c.IsSet("trials") {
			s.trials = drill.DefaultRealTrials
		}
	default:
		return s, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("--providers %q: use sim or real", pr), nil)
	}
	if w := c.String("worker"); c.IsSet("worker") {
		if s.worker = strings.Fields(w); len(s.worker) == 0 {
			return s, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("--worker %q: give the worker's command and its arguments", w), nil)
		}
		for _, f := range []string{"design", "scenario", "providers", "via-gateway"} {
			if c.IsSet(f) {
				return s, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("--%s is for the built-in designs, not --worker", f), nil)
			}
		}
		s.designs = []drill.Design{drill.Worker}
		if !c.IsSet("trials") {
			s.trials = drill.DefaultWorkerTrials
		}
	}
	s.opts = []drill.Option{drill.WithTrials(s.trials), drill.WithSeed(c.Uint64("seed")),
		drill.WithParallel(c.Int("parallel")), drill.WithViaGateway(c.Bool("via-gateway"))}
	if s.worker == nil {
		s.opts = append(s.opts, drill.WithDesigns(s.designs...))
	}
	if s.worker != nil {
		s.opts = append(s.opts, drill.WithWorker(s.worker...))
	}
	if c.IsSet("replay") {
		if s.replay < 0 {
			return s, store.NewError(store.InvalidInput, "drill", "", "", fmt.Sprintf("--replay %d: a trial number is 0 or more", s.replay), nil)
		}
		s.opts = append(s.opts, drill.WithReplay(s.replay))
		s.trials = 1
	}
	if sc := c.String("scenario"); sc != "" {
		if c.IsSet("replay") {
			return s, store.NewError(store.InvalidInput, "drill", "", "", "--scenario and --replay: one or the other", nil)
		}
		s.scenario = drill.Scenario(sc)
		s.opts = append(s.opts, drill.WithScenario(s.scenario))
		s.trials = 1
	}
	if s.svg = c.String("svg"); s.svg != "" && s.scenario == "" && !c.IsSet("replay") {
		return s, store.NewError(store.InvalidInput, "drill", "", "", "--svg draws one trial: give --replay N or --scenario", nil)
	}
	if c.IsSet("keep") && !endpointsOnCommandLine(c) {
		return s, store.NewError(store.InvalidInput, "drill", "", "", "--keep needs --endpoints: the embedded etcd is removed at the end", nil)
	}
	// Validate every option now, so that bad input sends nothing.
	if err := drill.CheckOptions(s.opts...); err != nil {
		return s, err
	}
	return s, nil
}

func drillAction(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	s, err := drillFlags(c)
	if err != nil {
		return err
	}
	metrics, stopMetrics, err := serveMetrics(c)
	if err != nil {
		return err
	}
	defer stopMetrics()
	g := globalsOf(c)
	ctx := c.Context
	where := ""
	var client *clientv3.Client
	var clientOpts []drill.Option // the cluster's client settings, for the drill's coordinators and workers
	if endpointsOnCommandLine(c) {
		client, err = newClient(g)
		if err != nil {
			return err
		}
		where = "etcd " + strings.Join(g.endpoints, ",")
		clientOpts = append(clientOpts, drill.WithClientConfig(clientConfig(g)))
		if g.tls != nil {
			clientOpts = append(clientOpts, drill.WithTLSFiles(g.tlsFiles))
		}
	} else {
		ignoringEndpointsEnv(g.lg, "the drill")
		dir, err := os.MkdirTemp("", "leasegate-drill-")
		if err != nil {
			return fmt.Errorf("drill: temporary directory: %w", err)
		}
		defer os.RemoveAll(dir)
		cl, err := embedtest.Start(dir)
		if err != nil {
			return store.NewError(coordinator.AuthorityUnavailable, "drill", "", "", "cannot start the embedded etcd", err)
		}
		defer cl.Close()
		client, err = cl.NewClient()
		if err != nil {
			return store.NewError(coordinator.AuthorityUnavailable, "drill", "", "", "", err)
		}
		where = "embedded etcd (1 member, fsync off)"
	}
	defer client.Close()

	prefix := drillPrefix(g.prefix)
	opts := append(append(s.opts, drill.WithPrefix(prefix), drill.WithLogger(g.lg)), clientOpts...)
	var provs *drill.RealProviders
	if s.real {
		if provs, err = drill.StartRealProviders(ctx); err != nil {
			return &drillFailed{why: "the real providers did not start: " + err.Error()}
		}
		defer func() {
			if err := provs.Close(); err != nil {
				g.lg.Warn("stopping the real providers", zap.Error(err))
			}
		}()
		opts = append(opts, drill.WithRealProviders(provs))
		where += "; real providers (PostgreSQL 15 primary + standby, BIND 9), trials one at a time in real time"
	}
	if metrics != nil {
		opts = append(opts, drill.WithMetrics(metrics))
	}
	if bar := drillProgress(c.App.ErrWriter, s.trials*len(s.designs)); bar != nil {
		opts = append(opts, drill.WithProgress(func(p drill.Progress) { _ = bar.Set(p.Done) }))
		defer func() { _ = bar.Finish(); fmt.Fprintln(c.App.ErrWriter) }()
	}
	rep, runErr := drill.Run(ctx, client, opts...)
	if !s.keep {
		cctx, cancel := cleanupContext(c)
		defer cancel()
		if err := drill.Cleanup(cctx, client, prefix); err != nil && runErr == nil {
			runErr = store.NewError(coordinator.DispositionOf(err), "drill", "", "", "cleaning up "+prefix, err)
		}
	}
	if runErr != nil {
		return drillError(runErr)
	}
	if s.svg != "" {
		if err := writeSVGs(s.svg, rep.Replayed); err != nil {
			return err
		}
	}
	switch {
	case s.scenario != "":
		err = printScenario(g.out, rep)
	case s.replay >= 0:
		err = printReplay(g.out, rep)
	case s.real && g.out.json:
		st := provs.Stats()
		err = g.out.result(struct {
			*drill.Report
			Servers map[string]any `json:"servers"`
		}{rep, map[string]any{"setup_seconds": st.Setup.Seconds(), "resets": st.Resets,
			"reset_p50_seconds": st.P50.Seconds(), "reset_max_seconds": st.Max.Seconds()}}, table{})
	case s.real:
		st := provs.Stats()
		err = printDrill(g.out, rep, drillHeader(c, where, prefix, s)+fmt.Sprintf(
			"\nservers set up in %.1f s; reset before each trial (fresh standby by pg_basebackup, primary crashed, record reset) p50 %.2f s, max %.2f s over %d trials",
			st.Setup.Seconds(), st.P50.Seconds(), st.Max.Seconds(), st.Resets), drill.RealFaultKinds(), true)
	case s.worker != nil:
		err = printDrill(g.out, rep, drillHeader(c, where, prefix, s)+"\nworker: "+strings.Join(s.worker, " ")+
			" (its instances as processes, real time, the world's clock 10x from its first call)", drill.WorkerFaultKinds(), true)
	default:
		err = printDrill(g.out, rep, drillHeader(c, where, prefix, s), drill.FaultKinds(), false)
	}
	if err != nil {
		return err
	}
	if !rep.Pass {
		return &drillFailed{why: rep.Why}
	}
	return nil
}

// drillError names a run that could not complete: an error that names its
// disposition — etcd's answer (a hold, a denial), the drill's input check,
// a real-provider worker's report of what it saw of etcd (drill's
// workerFailure) — keeps it; anything else is the drill's own failure
// (exit 1). DispositionOf gives outcome_unknown for an error that names
// none, so that alone does not count as named.
func drillError(err error) error {
	if d := coordinator.DispositionOf(err); d != coordinator.OutcomeUnknown || errors.Is(err, coordinator.ErrOutcomeUnknown) {
		return err
	}
	return &drillFailed{why: err.Error()}
}

func drillHeader(c *cli.Context, where, prefix string, s drillSettings) string {
	keep := "deleted at the end"
	if s.keep {
		keep = "kept"
	}
	parallel := c.Int("parallel")
	if s.real {
		parallel = 1
	}
	return fmt.Sprintf("leasegate drill: seed %d, %d trials per design, %d in parallel, %s, prefix %s (%s)",
		c.Uint64("seed"), s.trials, parallel, where, prefix, keep)
}

// drillPrefix is a run's prefix: inside leasegate's own, under a kind no
// keyspace uses ("drill"), so that one grant on --prefix covers it.
func drillPrefix(prefix string) string { return prefix + store.NestedSubtree + runID() }

// runID names one run's prefix.
func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// drillProgress is a progress bar on w when w is a terminal, else nil.
func drillProgress(w io.Writer, total int) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("trials"),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond))
}

// printDrill prints the report: faults are the fault kinds to list; real
// (onReal) says the trials ran on real providers (no replay: a violation names its
// trial, and the trajectories are printed after the tables).
func printDrill(p printer, rep *drill.Report, header string, faultKinds []drill.FaultKind, onReal bool) error {
	if p.json {
		return p.result(rep, table{})
	}
	designs := make([]drill.Design, 0, len(rep.Designs))
	for _, d := range append(drill.Designs(), drill.Worker) {
		if _, ok := rep.Designs[d]; ok {
			designs = append(designs, d)
		}
	}
	fixtures := table{header: []string{"FIXTURE", "EXPECTED", "OBSERVED", "PASS"}}
	for _, f := range rep.Fixtures {
		fixtures.rows = append(fixtures.rows, []string{f.Name, string(f.Expected), string(f.Observed), passMark(f.Pass)})
	}
	summary := table{header: []string{"DESIGN", "TRIALS", "FAULTS", "UNKNOWN", "RECONCILED", "MANUAL-REVIEW",
		"STALE-REFUSED", "VIOLATIONS", "SECONDS", "TRIALS/S"}}
	for _, d := range designs {
		r := rep.Designs[d]
		faults := 0
		for _, n := range r.Faults {
			faults += n
		}
		summary.rows = append(summary.rows, []string{string(d), fmt.Sprint(r.Trials), fmt.Sprint(faults),
			fmt.Sprint(r.UnknownOperations), fmt.Sprint(r.Reconciled), fmt.Sprint(r.ManualReview),
			fmt.Sprint(r.RefusedAtGateway), fmt.Sprint(r.TotalViolations), fmt.Sprintf("%.1f", r.Seconds), rate(r.Trials, r.Seconds, onReal)})
	}
	graders := table{header: append([]string{"GRADER"}, upper(designs)...)}
	for _, gr := range drill.Graders() {
		row := []string{string(gr)}
		for _, d := range designs {
			cell := fmt.Sprint(rep.Designs[d].Violations[gr])
			if t, ok := rep.Designs[d].FirstViolation[gr]; ok && onReal {
				cell += fmt.Sprintf(" (first: trial %d)", t)
			} else if ok {
				cell += fmt.Sprintf(" (first: --design %s --replay %d)", d, t)
			}
			row = append(row, cell)
		}
		graders.rows = append(graders.rows, row)
	}
	cost := table{header: []string{"DESIGN", "RECOVERY P50/P95/MAX (S)", "RECOVERED", "WRITES HELD P50/P95/MAX (S)", "AMBIGUOUS",
		"NEEDED COMMANDER", "ENDED IN HOLD", "RESIDUAL STALE CALLS (APPLIED)"}}
	for _, d := range designs {
		r := rep.Designs[d]
		c := r.Cost
		cost.rows = append(cost.rows, []string{string(d), secs(c.Recovery), fmt.Sprint(c.Recovery.Trials), secs(c.WritesHeld),
			fmt.Sprint(c.WritesHeld.Trials), fmt.Sprint(c.Commander), fmt.Sprint(c.Holds),
			fmt.Sprintf("%d (%d)", r.ResidualStaleCalls, r.ResidualApplied)})
	}
	incident := table{header: []string{"DESIGN", "SEED 003 CENTRAL SEQUENCE", "SEED 003 TRAFFIC ORDER (A TO THE SECONDARY, THEN B BACK)"}}
	for _, d := range designs {
		r := rep.Designs[d]
		incident.rows = append(incident.rows, []string{string(d), share(r.SeedSequence, r.Trials), share(r.NaiveOrder, r.Trials)})
	}
	tables := []table{fixtures, summary, cost, incident}
	if pr := rep.Paired; pr != nil {
		paired := table{header: []string{"PAIRED, SAME TRIAL: FENCED MINUS NAIVE", "P50", "P95", "TRIALS"}}
		for _, row := range []struct {
			what string
			s    drill.Seconds
		}{
			{"time to traffic on the writer (s; seed: another 45-90 s read-only)", pr.Recovery},
			{"time with writes held (s)", pr.WritesHeld},
			{"orders queued at 48,000 a minute", pr.OrdersQueued},
			{"shoppers who saw a warning (the seed's 1,906 per 11,842 queued)", pr.Warned},
		} {
			paired.rows = append(paired.rows, []string{row.what, fmt.Sprintf("%.0f", row.s.P50), fmt.Sprintf("%.0f", row.s.P95), fmt.Sprint(row.s.Trials)})
		}
		tables = append(tables, paired)
	}
	faults := table{header: append([]string{"FAULT (TRIALS WHERE IT FIRED)"}, upper(designs)...)}
	for _, k := range faultKinds {
		row := []string{string(k)}
		for _, d := range designs {
			row = append(row, fmt.Sprint(rep.Designs[d].Faults[k]))
		}
		faults.rows = append(faults.rows, row)
	}
	verdict := "PASS: every fixture refused as expected; the fenced design has zero violations; the naive design is caught"
	if _, ok := rep.Designs[drill.Worker]; ok {
		verdict = "PASS: every fixture refused as expected; the worker has zero violations"
	}
	if !rep.Pass {
		verdict = "FAIL: " + rep.Why
	}
	if err := p.results(header, verdict, append(tables, graders, faults)...); err != nil || !onReal {
		return err
	}
	return printViolating(p, rep)
}

// share is n of trials, with its percentage.
func share(n, trials int) string {
	if trials == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%.1f%%)", n, 100*float64(n)/float64(trials))
}

// printViolating prints the trajectory of each design's first trial each
// grader flagged, with its violations (a real trial, or a worker's, cannot
// be replayed exactly: its processes' timing is the run's).
func printViolating(p printer, rep *drill.Report) error {
	shown := map[*drill.Trajectory]bool{}
	var b strings.Builder
	for _, t := range rep.Replayed {
		first := false
		for _, n := range rep.Designs[t.Design].FirstViolation {
			first = first || n == t.Trial
		}
		if !first || shown[t] {
			continue
		}
		shown[t] = true
		b.WriteString("\n" + t.Render(false))
		for _, v := range drill.Grade(t) {
			fmt.Fprintf(&b, "VIOLATION %s: %s\n", v.Grader, v.Detail)
		}
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}

// rate is trials per second, with two decimals for real trials (they
// take seconds each).
func rate(trials int, seconds float64, onReal bool) string {
	r := float64(trials) / max(seconds, 1e-9)
	if onReal {
		return fmt.Sprintf("%.2f", r)
	}
	return fmt.Sprintf("%.0f", r)
}

// secs prints a distribution of simulated seconds.
func secs(s drill.Seconds) string {
	if s.Trials == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f", s.P50, s.P95, s.Max)
}

// writeSVGs draws each replayed trajectory into file: file itself for one
// design, file with "-<design>" before its extension for each of two.
func writeSVGs(file string, trajs []*drill.Trajectory) error {
	for _, t := range trajs {
		name := file
		if len(trajs) > 1 {
			ext := filepath.Ext(file)
			name = strings.TrimSuffix(file, ext) + "-" + string(t.Design) + ext
		}
		var b bytes.Buffer
		if err := t.SVG(&b); err != nil {
			return fmt.Errorf("drill: draw %s: %w", name, err)
		}
		if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("drill: %w", err)
		}
	}
	return nil
}

// printScenario prints a scenario's two runs side by side (with -o json,
// as a replay's trials).
func printScenario(p printer, rep *drill.Report) error {
	if p.json || len(rep.Replayed) != 2 {
		return printReplay(p, rep)
	}
	byDesign := map[drill.Design]*drill.Trajectory{}
	for _, t := range rep.Replayed {
		byDesign[t.Design] = t
	}
	_, err := io.WriteString(p.w, drill.SideBySide(byDesign[drill.Naive], byDesign[drill.Fenced]))
	return err
}

func printReplay(p printer, rep *drill.Report) error {
	type replayed struct {
		*drill.Trajectory
		Violations []drill.Violation `json:"violations"`
	}
	out := struct {
		Fixtures []drill.FixtureResult `json:"fixtures"`
		Trials   []replayed            `json:"trials"`
		Pass     bool                  `json:"pass"`
	}{Fixtures: rep.Fixtures, Pass: rep.Pass}
	sort.Slice(rep.Replayed, func(i, j int) bool { return rep.Replayed[i].Design < rep.Replayed[j].Design })
	for _, t := range rep.Replayed {
		out.Trials = append(out.Trials, replayed{Trajectory: t, Violations: drill.Grade(t)})
	}
	if p.json {
		return p.result(out, table{})
	}
	var b strings.Builder
	for _, t := range out.Trials {
		b.WriteString(t.Render(false))
		if len(t.Violations) == 0 {
			b.WriteString("graders: no violation\n")
		}
		for _, v := range t.Violations {
			fmt.Fprintf(&b, "VIOLATION %s: %s\n", v.Grader, v.Detail)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}

func passMark(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func upper(ds []drill.Design) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = strings.ToUpper(string(d))
	}
	return out
}
