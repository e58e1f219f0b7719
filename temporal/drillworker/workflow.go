// Package drillworker is a Temporal-driven recovery worker that `leasegate
// drill --worker` can drill: seed 003's failover as this module's workflow
// (the promotion and the traffic change as separate, workflow-scheduled
// activities under operation ids minted in workflow code, one grant per
// attempt), its activities acting through the drill trial's gateway with
// the certificate each instance is given. cmd/drillworker is the program;
// docs/temporal.md ("Drilling a Temporal-driven worker") says how a drill
// instance maps to Temporal and what the drill then proves.
//
// One Temporal server serves a whole drill run (NewHost: the workflow
// worker, beside a server outside the drill's processes); each drill
// instance is an activity worker process that joins the trial's activity
// queue and starts (or attaches to) the trial's workflow. When an instance
// stops heartbeating, Temporal's heartbeat timeout retries its activity,
// and the drill's replacement instance — a new worker process with a
// certificate of its own — is the worker that takes the retried attempt.
package drillworker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/leasegate/leasegate/ledger"
	lgtemporal "github.com/leasegate/leasegate/temporal"
)

// WorkflowQueue is the task queue of Recover's workflow worker (NewHost).
const WorkflowQueue = "leasegate-drill-workflows"

// The observation activities' registered names.
const (
	ObserveActivity    = "leasegate.drill.Observe"
	WaitWriterActivity = "leasegate.drill.WaitWriter"
)

// Plan is the drill's approved plan (the contract's LEASEGATE_PLAN, JSON).
// The promotion's operation id and the traffic prefix it names are not
// used: the workflow mints its own ids from the workflow id (the drill's
// task) and the step.
type Plan struct {
	Incident string        `json:"incident"`
	Promote  PlanPromotion `json:"promote"`
	Traffic  PlanTraffic   `json:"traffic"`
	// OriginalWriter is the writer before the incident.
	OriginalWriter string `json:"original_writer"`
}

// PlanPromotion is the plan's promotion: its effect's kind, target and
// parameters.
type PlanPromotion struct {
	Operation string          `json:"operation"`
	Kind      string          `json:"kind"`
	Target    string          `json:"target"`
	Params    json.RawMessage `json:"params"`
}

// PlanTraffic is the plan's traffic change: kind on Record, with
// parameters {"record": Record, "value": <the writer>}.
type PlanTraffic struct {
	OperationPrefix string `json:"operation_prefix"`
	Kind            string `json:"kind"`
	Record          string `json:"record"`
}

// check says what the plan lacks.
func (p Plan) check() error {
	switch {
	case p.Promote.Kind == "" || p.Promote.Target == "" || len(p.Promote.Params) == 0:
		return errors.New("the promotion needs a kind, a target and params")
	case p.Traffic.Kind == "" || p.Traffic.Record == "":
		return errors.New("the traffic change needs a kind and a record")
	}
	return nil
}

// Policy is the policy every effect of the recovery is proposed under.
const Policy = "recovery-v1"

func (p Plan) promotion() ledger.Effect {
	return ledger.Effect{Kind: p.Promote.Kind, Target: p.Promote.Target, Params: p.Promote.Params, Policy: Policy}
}

func (p Plan) traffic(writer string) ledger.Effect {
	params, _ := json.Marshal(map[string]string{"record": p.Traffic.Record, "value": writer})
	return ledger.Effect{Kind: p.Traffic.Kind, Target: p.Traffic.Record, Params: params, Policy: Policy}
}

// Input is Recover's input: the tenant of the workflow's task (the task is
// the workflow id), the plan, the trial's activity queue and the
// activities' heartbeat timeout (the drill's).
type Input struct {
	Tenant           string        `json:"tenant"`
	Plan             Plan          `json:"plan"`
	ActivityQueue    string        `json:"activity_queue"`
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
}

// Result is what Recover returns: the last promotion and traffic records,
// the writer, the traffic record's value as the gateway read it at the
// end, and why the workflow held for the commander ("" if it did not).
type Result struct {
	Promotion ledger.Record `json:"promotion"`
	Traffic   ledger.Record `json:"traffic"`
	Writer    string        `json:"writer"`
	Record    string        `json:"record"`
	Held      string        `json:"held,omitempty"`
}

// Done says whether the recovery is done: traffic points at the writer,
// as the gateway read it after the traffic change's CONFIRMED.
func (r Result) Done() bool { return r.Held == "" && r.Writer != "" && r.Record == r.Writer }

// The workflow's bounds, on Temporal's clock (real time; the drill's world
// runs twenty times faster).
const (
	// reviewPoll is how often a step whose record is in MANUAL_REVIEW is
	// looked at again (the commander resolves it from the evidence).
	reviewPoll = 500 * time.Millisecond
	// reviewWait bounds that wait: then the workflow holds.
	reviewWait = 100 * time.Second
	// intents bounds the intents of one effect: a new one only after the
	// last ended FAILED or SUPERSEDED (shown never applied).
	intents = 3
)

var retry = &sdktemporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: time.Second}

// Recover is seed 003's recovery in this module's shape, for the drill's
// world: promote the plan's target (a step, an activity); once the
// topology shows it as the writer, point the plan's record at it (another
// step); read the record back, and point it again if it moved after the
// change applied (an operator's edit: the commander decides whether it may
// go over it). Each step's operation id is minted here from the workflow
// id and the step's name ("promote", "traffic"; a new intent only after
// the last one ended FAILED or SUPERSEDED, or applied and was moved:
// "traffic-2", ...). A step whose record waits in MANUAL_REVIEW is looked at again
// until the commander resolves it; a rejection is a hold (Result.Held).
func Recover(ctx workflow.Context, in Input) (Result, error) {
	var res Result
	if err := in.Plan.check(); err != nil {
		return res, sdktemporal.NewNonRetryableApplicationError("bad plan: "+err.Error(), lgtemporal.ErrorTypeRefused, err)
	}
	o := lgtemporal.StepOptions{TaskQueue: in.ActivityQueue, HeartbeatTimeout: in.HeartbeatTimeout,
		StartToCloseTimeout: time.Minute, RetryPolicy: retry}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: in.ActivityQueue,
		HeartbeatTimeout: in.HeartbeatTimeout, StartToCloseTimeout: time.Minute, RetryPolicy: retry})
	task := lgtemporal.TaskOf(workflow.GetInfo(ctx).WorkflowExecution.ID)
	target := in.Plan.Promote.Target

	promoted := false
	for n := 1; n <= intents && !promoted; n++ {
		rec, err := settle(ctx, in.Tenant, stepName("promote", n), in.Plan.promotion(), o)
		if err != nil {
			return res, err
		}
		res.Promotion = rec
		switch rec.State {
		case ledger.Confirmed:
			promoted = true
		case ledger.Failed, ledger.Superseded:
			// Never applied under this id (FAILED on evidence; SUPERSEDED
			// at dispatch, nothing sent) — unless the world promoted the
			// target anyway (out of band): look.
			var w map[string]string
			if err := workflow.ExecuteActivity(actx, ObserveActivity, ObserveInput{Tenant: in.Tenant, Task: task, Effect: in.Plan.promotion()}).Get(ctx, &w); err != nil {
				return res, err
			}
			promoted = w["writer"] == target || w["promoting"] == target
		default:
			res.Held = fmt.Sprintf("promotion %s ended %s", rec.Operation, rec.State)
			return res, nil
		}
	}
	if !promoted {
		res.Held = fmt.Sprintf("no promotion after %d intents", intents)
		return res, nil
	}
	if err := workflow.ExecuteActivity(actx, WaitWriterActivity, ObserveInput{Tenant: in.Tenant, Task: task, Effect: in.Plan.promotion()}).Get(ctx, &res.Writer); err != nil {
		return res, err
	}

	for n := 1; ; n++ {
		if n > intents {
			res.Held = fmt.Sprintf("traffic did not stay on the writer after %d intents", intents)
			return res, nil
		}
		rec, err := settle(ctx, in.Tenant, stepName("traffic", n), in.Plan.traffic(res.Writer), o)
		if err != nil {
			return res, err
		}
		res.Traffic = rec
		switch rec.State {
		case ledger.Confirmed:
			var w map[string]string
			if err := workflow.ExecuteActivity(actx, ObserveActivity, ObserveInput{Tenant: in.Tenant, Task: task, Effect: in.Plan.traffic(res.Writer)}).Get(ctx, &w); err != nil {
				return res, err
			}
			if res.Record = w["record"]; res.Record == res.Writer {
				return res, nil
			}
			// Applied, then moved (an operator's edit after the change):
			// propose again against the record as it is now; the
			// commander decides whether it may go over the edit.
		case ledger.Failed, ledger.Superseded:
			// The record moved under the approval (an operator's edit) or
			// the change never applied: propose again against the world as
			// the gateway observes it now; the commander decides whether
			// it may go over an edit.
		default:
			res.Held = fmt.Sprintf("traffic change %s ended %s", rec.Operation, rec.State)
			return res, nil
		}
	}
}

func stepName(step string, n int) string {
	if n == 1 {
		return step
	}
	return fmt.Sprintf("%s-%d", step, n)
}

// settle runs step's effect activity until its record ends: CONFIRMED is
// returned as the activity returned it; a record the activity stopped on
// (lgtemporal.ErrorTypeStopped) is returned as its details hold it, after
// waiting out MANUAL_REVIEW (the same step, so the same operation id,
// every reviewPoll, up to reviewWait). Any other error is the workflow's.
func settle(ctx workflow.Context, tenant, step string, e ledger.Effect, o lgtemporal.StepOptions) (ledger.Record, error) {
	start := workflow.Now(ctx)
	for {
		f, err := lgtemporal.ExecuteEffect(ctx, tenant, step, e, o)
		if err != nil {
			return ledger.Record{}, err
		}
		var rec ledger.Record
		err = f.Get(ctx, &rec)
		if err == nil {
			return rec, nil
		}
		var app *sdktemporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != lgtemporal.ErrorTypeStopped {
			return ledger.Record{}, err
		}
		if derr := app.Details(&rec); derr != nil {
			return ledger.Record{}, err
		}
		if rec.State != ledger.ManualReview || workflow.Now(ctx).Sub(start) > reviewWait {
			return rec, nil
		}
		if err := workflow.Sleep(ctx, reviewPoll); err != nil {
			return ledger.Record{}, err
		}
	}
}

// digestFields are the fields of a drill observation digest,
// "writer=X;promoting=Y[;record=Z]" ("-": none).
func digestFields(digest string) map[string]string {
	out := map[string]string{}
	for part := range strings.SplitSeq(digest, ";") {
		k, v, _ := strings.Cut(part, "=")
		if v == "-" {
			v = ""
		}
		out[k] = v
	}
	return out
}

// NewHost is the workflow worker of a drill run: Recover on WorkflowQueue,
// on Temporal client c. Run it beside the Temporal server, outside the
// drill's worker processes (cmd/drillworker host does both).
func NewHost(c sdkclient.Client) worker.Worker {
	w := worker.New(c, WorkflowQueue, worker.Options{})
	w.RegisterWorkflow(Recover)
	return w
}
