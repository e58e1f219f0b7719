package incident

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	lgtemporal "github.com/leasegate/leasegate/temporal"
)

// The two shapes of the replay.
const (
	ShapeNaive  = "naive"
	ShapeFenced = "fenced"
)

// Temporal is the Temporal server the replay runs on: a client of it, and
// what a worker process needs to dial it.
type Temporal struct {
	Client    sdkclient.Client
	HostPort  string
	Namespace string
}

// Report is what one replay observed: the providers' calls (what reached
// them, in order), the ledger's records, worker A's events and Temporal's
// attempts. It is read from the providers, the ledger and Temporal, never
// from what the workers say they did — except A's events, which say when
// it paused and woke and what its late call was answered.
type Report struct {
	Shape       string
	WorkflowID  string
	WorkflowOK  bool
	WorkflowErr string
	// Calls is every Apply the providers received, in order.
	Calls []devprovider.Call
	// Writer and Traffic are the providers' state at the end.
	Writer, Traffic string
	// Records are the tenant's operation records at the end.
	Records []ledger.Record
	// Paused is A's pause (its operation and epoch); Late its late call.
	Paused, Late Event
	// ADone is A's activity's end, as A saw it.
	ADone Event
	// CompletedBeforeAWoke: the workflow finished while A was stopped.
	CompletedBeforeAWoke bool
	// PromoteAttempts is the attempt count of the activity that promoted
	// (recoverRegion, or the promote step), from Temporal's history.
	PromoteAttempts int32
}

// Replay runs the seed once in shape on w and t: worker A a process (exe
// with args, which calls RunWorkerFromEnv first) that stops itself after
// its promotion's answer arrived; worker B a worker in this process,
// started once A is stopped; the approver in this process. log gets a line
// per step.
func Replay(ctx context.Context, w *World, t Temporal, shape, exe string, args []string, log io.Writer) (Report, error) {
	r := Report{Shape: shape}
	say := func(format string, a ...any) { fmt.Fprintf(log, "  [%s] "+format+"\n", append([]any{shape}, a...)...) }

	console, err := w.Client("console")
	if err != nil {
		return r, err
	}
	defer console.Close()
	approver, err := w.Client("approver")
	if err != nil {
		return r, err
	}
	defer approver.Close()
	actx, stopApprover := context.WithCancel(ctx)
	approved := make(chan int, 1)
	go func() { approved <- Approve(actx, console, approver, SeedPlan.Allows, 20*time.Millisecond) }()
	defer func() { stopApprover(); <-approved }()

	// The workflow worker: never paused.
	ww := worker.New(t.Client, WorkflowQueue, worker.Options{})
	RegisterWorkflows(ww)
	if err := ww.Start(); err != nil {
		return r, err
	}
	defer ww.Stop()

	a, err := w.Spawn(ctx, exe, args, WorkerEnv{Identity: "worker-a", Temporal: t.HostPort, Namespace: t.Namespace, Shape: shape, Pause: true})
	if err != nil {
		return r, err
	}
	defer a.Stop(5 * time.Second)
	say("worker A started: process %d, activity queue %s", a.Cmd.Process.Pid, ActivityQueue)

	var b [4]byte
	_, _ = rand.Read(b[:])
	r.WorkflowID = "northstar-recovery-" + shape + "-" + hex.EncodeToString(b[:])
	var wf any = FencedRecover
	if shape == ShapeNaive {
		wf = NaiveRecover
	}
	run, err := t.Client.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: r.WorkflowID, TaskQueue: WorkflowQueue}, wf, SeedPlan)
	if err != nil {
		return r, err
	}
	say("workflow %s started: promote %s, then point %s at the writer", r.WorkflowID, SeedPlan.To, SeedPlan.Record)

	if r.Paused, err = a.Await(ctx, "paused"); err != nil {
		return r, err
	}
	for !a.Stopped() {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	say("worker A stopped (SIGSTOP, /proc state T) after the gateway answered its dispatch of %s at epoch %d; writer now %s",
		r.Paused.Op, r.Paused.Epoch, w.Provider.Writer())

	bc, err := w.Client("worker-b")
	if err != nil {
		return r, err
	}
	defer bc.Close()
	bw := worker.New(t.Client, ActivityQueue, worker.Options{})
	if shape == ShapeNaive {
		Naive{C: bc}.Register(bw)
	} else {
		acts, err := lgtemporal.NewActivities(bc, TTL, Poll)
		if err != nil {
			return r, err
		}
		acts.Register(bw)
	}
	if err := bw.Start(); err != nil {
		return r, err
	}
	defer bw.Stop()
	say("worker B started; Temporal retries the activity on B once A's heartbeat timeout (%v) passes", HeartbeatTimeout)

	var out Outcome
	var werr error
	if shape == ShapeNaive {
		werr = run.Get(ctx, nil)
	} else {
		werr = run.Get(ctx, &out)
	}
	r.WorkflowOK = werr == nil
	if werr != nil {
		r.WorkflowErr = werr.Error()
	}
	r.CompletedBeforeAWoke = a.Stopped()
	say("workflow ended (ok=%v) while A was still stopped=%v; writer %s, %s → %q", r.WorkflowOK, r.CompletedBeforeAWoke,
		w.Provider.Writer(), SeedPlan.Record, w.Provider.Record(SeedPlan.Record))

	if err := a.Signal(syscall.SIGCONT); err != nil {
		return r, err
	}
	if shape == ShapeFenced {
		if r.Late, err = a.Await(ctx, "late-call"); err != nil {
			return r, err
		}
		say("worker A woke (SIGCONT); its late traffic change %s under epoch %d: %s", r.Late.Op, r.Late.Epoch, r.Late.Detail)
	}
	if r.ADone, err = a.Await(ctx, "activity-done"); err != nil {
		return r, err
	}
	say("worker A's activity returned: %s", r.ADone.Detail)

	r.Calls = w.Provider.Calls()
	r.Writer, r.Traffic = w.Provider.Writer(), w.Provider.Record(SeedPlan.Record)
	if r.Records, err = console.List(ctx, Tenant, "", ""); err != nil {
		return r, err
	}
	if r.PromoteAttempts, err = promoteAttempts(ctx, t.Client, r.WorkflowID); err != nil {
		return r, err
	}
	for _, c := range r.Calls {
		say("provider received %-10s %-28s op %-52s epoch %d", c.Kind, c.Target, c.Operation, c.Epoch)
	}
	return r, nil
}

// promoteAttempts reads, from the workflow's history, the attempt number
// of the first activity's completion (or failure): the attempt Temporal
// counted, after the retries.
func promoteAttempts(ctx context.Context, c sdkclient.Client, id string) (int32, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return 0, err
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			return a.GetAttempt(), nil
		}
	}
	return 0, nil
}
