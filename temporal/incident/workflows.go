package incident

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	lgtemporal "github.com/leasegate/leasegate/temporal"
)

// The replay's task queues: workflows run on the replay's own worker,
// activities on the activity workers A and B (processes or goroutines).
const (
	WorkflowQueue = "recovery-workflows"
	ActivityQueue = "recovery-activities"
)

// The replay's timings. The lease TTL equals the heartbeat timeout (the
// package doc's rule: TTL ≤ heartbeat timeout), so the stalled attempt's
// lease is gone when Temporal starts the next attempt.
const (
	HeartbeatTimeout = 2 * time.Second
	TTL              = 2 * time.Second
	Poll             = 100 * time.Millisecond
)

// Plan is the approved recovery: promote To (the secondary) and point
// Record's traffic at the writer.
type Plan struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Record string `json:"record"`
}

// SeedPlan is seed 003's plan on the simulated providers.
var SeedPlan = Plan{From: "db-1", To: "db-2", Record: "checkout.northstar.example"}

func promoteEffect(p Plan) ledger.Effect {
	params, _ := json.Marshal(map[string]string{"target": p.To})
	return ledger.Effect{Kind: devprovider.KindPromote, Target: p.To, Params: params, Policy: "recovery-v1"}
}

func trafficEffect(record, writer string) ledger.Effect {
	params, _ := json.Marshal(map[string]string{"value": writer})
	return ledger.Effect{Kind: devprovider.KindDNS, Target: record, Params: params, Policy: "recovery-v1"}
}

var retry = &sdktemporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: time.Second}

// Outcome is what a recovery workflow returns.
type Outcome struct {
	Promotion ledger.Record `json:"promotion"`
	Traffic   ledger.Record `json:"traffic"`
}

// FencedRecover is the seed's corrected shape with this module: the
// promotion and the traffic change are two workflow-scheduled activities,
// each under an operation id minted here from the workflow id and the
// step; the traffic change is scheduled only once the promotion's record
// is CONFIRMED, and points at the writer the promotion made.
func FencedRecover(ctx workflow.Context, p Plan) (Outcome, error) {
	o := lgtemporal.StepOptions{TaskQueue: ActivityQueue, HeartbeatTimeout: HeartbeatTimeout,
		StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: 5 * time.Minute, RetryPolicy: retry}
	var out Outcome
	f, err := lgtemporal.ExecuteEffect(ctx, Tenant, "promote", promoteEffect(p), o)
	if err != nil {
		return out, err
	}
	if err := f.Get(ctx, &out.Promotion); err != nil {
		return out, err
	}
	if f, err = lgtemporal.ExecuteEffect(ctx, Tenant, "traffic", trafficEffect(p.Record, out.Promotion.Effect.Target), o); err != nil {
		return out, err
	}
	err = f.Get(ctx, &out.Traffic)
	return out, err
}

// RecoverRegionActivity is the naive coarse activity's registered name.
const RecoverRegionActivity = "recoverRegion"

// NaiveRecover is the seed's workflow as it ran: one coarse recoverRegion
// activity that promotes and then changes traffic.
func NaiveRecover(ctx workflow.Context, p Plan) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: ActivityQueue, HeartbeatTimeout: HeartbeatTimeout,
		StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: 5 * time.Minute, RetryPolicy: retry})
	return workflow.ExecuteActivity(actx, RecoverRegionActivity, p).Get(ctx, nil)
}

// RegisterWorkflows registers both workflows on w.
func RegisterWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflow(FencedRecover)
	w.RegisterWorkflow(NaiveRecover)
}

// Naive is the seed's naive activity worker: through the same gateway (it
// holds no provider credential either), but every attempt invents its own
// request key and acts under a task of its own, so nothing ties one
// attempt's effects to another's and nothing ever supersedes its grant —
// the seed's gateway, which checked only that the caller may call the
// adapter. Its session renews itself (as the seed's Kubernetes lease
// helper did), whatever the activity is doing.
type Naive struct{ C *client.Client }

// Register registers the coarse activity on w.
func (n Naive) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(n.RecoverRegion, activity.RegisterOptions{Name: RecoverRegionActivity})
}

// RecoverRegion is the seed's coarse activity: a fresh request key, the
// promotion, then the traffic change, in one attempt. Like the seed's
// handler it does not stop when Temporal gives up on the attempt: its calls
// run on a context that ignores the activity's cancellation (which reaches
// a handler only through its context, once a heartbeat's answer says the
// attempt is no longer current).
func (n Naive) RecoverRegion(ctx context.Context, p Plan) error {
	ctx = context.WithoutCancel(ctx)
	var b [4]byte
	_, _ = rand.Read(b[:])
	key := "attempt-" + hex.EncodeToString(b[:]) // every attempt: a new intent
	s, err := n.C.OpenSession(ctx, time.Minute, client.WithKeepAlive())
	if err != nil {
		return err
	}
	defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()
	g, err := s.Claim(ctx, Tenant, key)
	if err != nil {
		return err
	}
	if _, err := n.effect(ctx, g, key+"-promote", promoteEffect(p)); err != nil {
		return err
	}
	_, err = n.effect(ctx, g, key+"-traffic", trafficEffect(p.Record, p.To))
	return err
}

func (n Naive) effect(ctx context.Context, g coordinator.Grant, op string, e ledger.Effect) (ledger.Record, error) {
	pre, err := n.C.ObservePrecondition(ctx, g, e)
	if err != nil {
		return ledger.Record{}, err
	}
	rec, err := n.C.Propose(ctx, g, op, e, pre)
	for err == nil && rec.State == ledger.Proposed {
		activity.RecordHeartbeat(ctx, "waiting for the approver")
		select {
		case <-ctx.Done():
			return ledger.Record{}, ctx.Err()
		case <-time.After(Poll):
		}
		rec, _, err = n.C.Record(ctx, g.Tenant, g.Task, op)
	}
	if err != nil {
		return ledger.Record{}, err
	}
	if rec.State != ledger.Authorized {
		return rec, fmt.Errorf("incident: %s is %s", op, rec.State)
	}
	if rec, err = n.C.Dispatch(ctx, g, op); err != nil {
		return rec, err
	}
	if rec.State != ledger.Confirmed {
		return rec, fmt.Errorf("incident: %s is %s", op, rec.State)
	}
	return rec, nil
}
