package incident

import (
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
)

// ChaosConfig is one chaos run: Workflows fenced recoveries at once, served
// by Workers activity-worker processes that are killed (and restarted) or
// paused past the heartbeat timeout at random every Interval for Duration,
// while the gateway drops each answer with probability Drop.
type ChaosConfig struct {
	Workflows int
	Workers   int
	Duration  time.Duration
	Interval  time.Duration
	Drop      float64
	Seed      uint64
}

// ChaosReport is what a chaos run observed, and the faults it made.
type ChaosReport struct {
	Kills, Pauses int
	Dropped       int64
	Workflows     map[string]error // workflow id → its error (nil: completed)
	Calls         []devprovider.Call
	Records       []ledger.Record
	Journals      map[string][]ledger.Transition // operation → journal
}

// Chaos runs cfg on w and t, worker processes being exe with args.
func Chaos(ctx context.Context, w *World, t Temporal, cfg ChaosConfig, exe string, args []string, log io.Writer) (ChaosReport, error) {
	rnd := mrand.New(mrand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	rep := ChaosReport{Workflows: map[string]error{}, Journals: map[string][]ledger.Transition{}}
	console, err := w.Client("console")
	if err != nil {
		return rep, err
	}
	defer console.Close()
	approver, err := w.Client("approver")
	if err != nil {
		return rep, err
	}
	defer approver.Close()
	actx, stopApprover := context.WithCancel(ctx)
	approved := make(chan int, 1)
	go func() { approved <- Approve(actx, console, approver, chaosAllows, 20*time.Millisecond) }()
	defer func() { stopApprover(); <-approved }()

	ww := worker.New(t.Client, WorkflowQueue, worker.Options{})
	RegisterWorkflows(ww)
	if err := ww.Start(); err != nil {
		return rep, err
	}
	defer ww.Stop()

	names := []string{"worker-a", "worker-b", "worker-c"}
	spawn := func(i int) (*Process, error) {
		return w.Spawn(ctx, exe, args, WorkerEnv{Identity: names[i%len(names)], Temporal: t.HostPort, Namespace: t.Namespace, Shape: ShapeFenced})
	}
	procs := make([]*Process, cfg.Workers)
	for i := range procs {
		if procs[i], err = spawn(i); err != nil {
			return rep, err
		}
	}
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.Stop(5 * time.Second)
			}
		}
	}()

	runs := map[string]sdkclient.WorkflowRun{}
	for i := range cfg.Workflows {
		id := fmt.Sprintf("chaos-%d-%d", cfg.Seed, i)
		p := Plan{From: "db-1", To: "db-2", Record: fmt.Sprintf("checkout-%d.northstar.example", i)}
		run, err := t.Client.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: WorkflowQueue}, FencedRecover, p)
		if err != nil {
			return rep, err
		}
		runs[id] = run
	}

	w.DropAnswers(cfg.Drop)
	end := time.Now().Add(cfg.Duration)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(cfg.Interval):
		}
		i := rnd.IntN(len(procs))
		if rnd.IntN(2) == 0 {
			procs[i].Kill()
			rep.Kills++
			fmt.Fprintf(log, "  chaos: killed worker %d (%s)\n", i, names[i%len(names)])
			if procs[i], err = spawn(i); err != nil {
				return rep, err
			}
			continue
		}
		_ = procs[i].Signal(syscall.SIGSTOP)
		rep.Pauses++
		d := HeartbeatTimeout + time.Duration(rnd.Int64N(int64(2*HeartbeatTimeout)))
		fmt.Fprintf(log, "  chaos: paused worker %d (%s) for %v\n", i, names[i%len(names)], d.Round(time.Millisecond))
		p := procs[i]
		time.AfterFunc(d, func() { _ = p.Signal(syscall.SIGCONT) })
	}
	w.DropAnswers(0)
	for _, p := range procs {
		_ = p.Signal(syscall.SIGCONT)
	}
	rep.Dropped = w.Dropped.Load()

	for id, run := range runs {
		var out Outcome
		rep.Workflows[id] = run.Get(ctx, &out)
	}
	rep.Calls = w.Provider.Calls()
	if rep.Records, err = console.List(ctx, Tenant, "", ""); err != nil {
		return rep, err
	}
	for _, r := range rep.Records {
		_, js, err := console.Record(ctx, r.Tenant, r.Task, r.Operation)
		if err != nil {
			return rep, err
		}
		rep.Journals[r.Operation] = js
	}
	return rep, nil
}

// chaosAllows approves promoting db-2, and traffic only at the writer the
// record's precondition observed.
func chaosAllows(r ledger.Record) bool {
	p := Plan{To: "db-2", Record: r.Effect.Target}
	return strings.HasSuffix(r.Effect.Target, ".northstar.example") && p.Allows(r) || r.Effect.Kind == devprovider.KindPromote && p.Allows(r)
}

// Check judges a chaos run from the providers' calls and the ledger, and
// returns every violation found:
//
//   - an operation id reaching a provider that is not a workflow's step
//     (<workflow id>/promote or /traffic): a minted intent;
//   - a provider call whose (operation, epoch) no DISPATCHING claim of the
//     journal names: an effect not claimed under a then-current grant —
//     a stale attempt's;
//   - more calls of an operation than its claimed dispatches (at most one
//     call per claim: the dev providers' contract declares a retry under
//     the same id safe, and each retry is a claim of its own);
//   - a record not resolved (CONFIRMED, FAILED, SUPERSEDED, REJECTED) and
//     not in MANUAL_REVIEW once every workflow ended;
//   - a workflow that did not end, or whose promotion record is missing.
func Check(rep ChaosReport) []string {
	var bad []string
	claims := map[string]map[int64]int{} // operation → epoch → claims
	for op, js := range rep.Journals {
		claims[op] = map[int64]int{}
		for _, j := range js {
			if j.To == ledger.Dispatching && j.From != ledger.Dispatching {
				claims[op][j.Epoch]++
			}
		}
	}
	calls := map[string]map[int64]int{}
	for _, c := range rep.Calls {
		if !strings.HasSuffix(c.Operation, "/promote") && !strings.HasSuffix(c.Operation, "/traffic") {
			bad = append(bad, fmt.Sprintf("operation %s reached the provider: not a workflow step's id", c.Operation))
		}
		if calls[c.Operation] == nil {
			calls[c.Operation] = map[int64]int{}
		}
		calls[c.Operation][c.Epoch]++
		if claims[c.Operation][c.Epoch] == 0 {
			bad = append(bad, fmt.Sprintf("operation %s reached the provider under epoch %d, which never claimed its dispatch", c.Operation, c.Epoch))
		}
	}
	for op, byEpoch := range calls {
		for epoch, n := range byEpoch {
			if n > claims[op][epoch] {
				bad = append(bad, fmt.Sprintf("operation %s reached the provider %d times under epoch %d, which claimed %d dispatches", op, n, epoch, claims[op][epoch]))
			}
		}
	}
	resolved := []ledger.State{ledger.Confirmed, ledger.Failed, ledger.Superseded, ledger.Rejected, ledger.ManualReview}
	have := map[string]bool{}
	for _, r := range rep.Records {
		have[r.Operation] = true
		if !slices.Contains(resolved, r.State) {
			bad = append(bad, fmt.Sprintf("record %s ended %s: neither resolved nor in MANUAL_REVIEW", r.Operation, r.State))
		}
	}
	for id, err := range rep.Workflows {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			bad = append(bad, fmt.Sprintf("workflow %s did not end: %v", id, err))
		}
		if !have[id+"/promote"] {
			bad = append(bad, fmt.Sprintf("workflow %s has no promotion record (error: %v)", id, err))
		}
	}
	slices.Sort(bad)
	return bad
}
