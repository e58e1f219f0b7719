package temporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// EffectActivity is the registered name of the one-effect activity
// (Activities.Effect).
const EffectActivity = "leasegate.Effect"

// Error types of the activity's application errors (temporal.ApplicationError.Type).
const (
	// ErrorTypeStopped: the record is FAILED, SUPERSEDED, REJECTED or
	// MANUAL_REVIEW; not retried. Its details hold the record.
	ErrorTypeStopped = "leasegate.Stopped"
	// ErrorTypeRefused: the gateway refused for a reason a retry cannot
	// change (invalid input, another payload under the operation id, the
	// certificate's roles, a corrupt record); not retried.
	ErrorTypeRefused = "leasegate.Refused"
)

// Step is what the workflow hands the effect activity: the operation id it
// minted and the one effect that id stands for.
type Step struct {
	Tenant    string        `json:"tenant"`
	Task      string        `json:"task"`
	Operation string        `json:"operation"`
	Effect    ledger.Effect `json:"effect"`
}

// Activities is the effect activity of one worker: a gateway client (the
// worker's certificate; no provider credential) and the lease's TTL.
type Activities struct {
	c    *client.Client
	ttl  time.Duration
	poll time.Duration
}

// NewActivities is the effect activity acting through c, each attempt
// under a lease of ttl (whole seconds; at most the activity's heartbeat
// timeout: see the package doc), polling every poll while it waits for a
// claim or an approval.
func NewActivities(c *client.Client, ttl, poll time.Duration) (*Activities, error) {
	if c == nil {
		return nil, store.NewError(store.InvalidInput, "activities", "", "", "nil gateway client", nil)
	}
	if ttl < time.Second || ttl%time.Second != 0 {
		return nil, store.NewError(store.InvalidInput, "activities", "", "", fmt.Sprintf("ttl %v must be a positive whole number of seconds", ttl), nil)
	}
	if poll <= 0 || poll > ttl/3 {
		return nil, store.NewError(store.InvalidInput, "activities", "", "", fmt.Sprintf("poll interval %v must be positive and at most TTL/3 (%v): each wait renews the lease", poll, ttl/3), nil)
	}
	return &Activities{c: c, ttl: ttl, poll: poll}, nil
}

// Register registers the effect activity on w under EffectActivity.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.Effect, activity.RegisterOptions{Name: EffectActivity})
}

// Effect is one attempt at one effect: claim the workflow's task under a
// grant of its own (Begin), resume the step's record (Resume), release.
// It returns the CONFIRMED record, the receipt.
func (a *Activities) Effect(ctx context.Context, s Step) (ledger.Record, error) {
	at, err := Begin(ctx, a.c, s.Tenant, s.Task, a.ttl, a.poll)
	if err != nil {
		return ledger.Record{}, ActivityError(err)
	}
	rec, err := at.Resume(ctx, s.Operation, s.Effect)
	endErr := at.End(context.WithoutCancel(ctx))
	if err != nil {
		return ledger.Record{}, ActivityError(err)
	}
	if endErr != nil && coordinator.DispositionOf(endErr) != coordinator.AuthorityUnavailable {
		// Superseded after the record was CONFIRMED: the receipt stands (the
		// next attempt reads the same record), but this attempt is not the
		// one Temporal counts; say so.
		activity.GetLogger(ctx).Warn("leasegate: release refused: the attempt was superseded", "operation", s.Operation, "error", endErr)
	}
	return rec, nil
}

// ActivityError is err as an activity's error: a *StoppedError and a
// refusal a retry cannot change are non-retryable application errors
// (ErrorTypeStopped, ErrorTypeRefused); anything else — a hold, an
// unknown outcome, a lost or superseded lease, a record still uncertain —
// is retryable, and the next attempt resumes the record.
func ActivityError(err error) error {
	var st *StoppedError
	if errors.As(err, &st) {
		return sdktemporal.NewNonRetryableApplicationError(err.Error(), ErrorTypeStopped, err, st.Record)
	}
	switch coordinator.DispositionOf(err) {
	case coordinator.InvalidInput, coordinator.OperationConflict, coordinator.PermissionDenied, coordinator.Unauthenticated,
		coordinator.CorruptRecord, coordinator.ScopeMismatch, coordinator.NoKeyspace:
		return sdktemporal.NewNonRetryableApplicationError(err.Error(), ErrorTypeRefused, err)
	}
	return err
}

// StepOptions are the effect activity's options in ExecuteEffect.
type StepOptions struct {
	// TaskQueue of the activity workers (default: the workflow's).
	TaskQueue string
	// HeartbeatTimeout: at least the workers' TTL (package doc).
	HeartbeatTimeout time.Duration
	// StartToCloseTimeout of one attempt: long enough for the approver.
	StartToCloseTimeout time.Duration
	// ScheduleToCloseTimeout bounds all attempts (0: unbounded).
	ScheduleToCloseTimeout time.Duration
	// RetryPolicy; nil is Temporal's default (unlimited attempts, 1 s
	// doubling to 100 s). ErrorTypeStopped and ErrorTypeRefused are never
	// retried: they are non-retryable errors.
	RetryPolicy *sdktemporal.RetryPolicy
}

// ExecuteEffect schedules effect e as step of the calling workflow, one
// effect in one activity: it mints the operation id from the workflow id
// and step (OperationID) and hands it, with the workflow's task, to the
// effect activity. The future's value is the CONFIRMED record. Schedule
// the next effect only after this one's future is ready, and from what it
// returned: an attempt Temporal gave up on then cannot advance to it.
func ExecuteEffect(ctx workflow.Context, tenant, step string, e ledger.Effect, o StepOptions) (workflow.Future, error) {
	op, err := OperationID(ctx, step)
	if err != nil {
		return nil, err
	}
	if o.HeartbeatTimeout <= 0 {
		return nil, store.NewError(store.InvalidInput, "execute effect", "", "", "a heartbeat timeout is required: it is how a stalled attempt is given up on", nil)
	}
	if o.StartToCloseTimeout <= 0 && o.ScheduleToCloseTimeout <= 0 {
		return nil, store.NewError(store.InvalidInput, "execute effect", "", "", "a start-to-close or schedule-to-close timeout is required", nil)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              o.TaskQueue,
		HeartbeatTimeout:       o.HeartbeatTimeout,
		StartToCloseTimeout:    o.StartToCloseTimeout,
		ScheduleToCloseTimeout: o.ScheduleToCloseTimeout,
		RetryPolicy:            o.RetryPolicy,
	})
	s := Step{Tenant: tenant, Task: TaskOf(workflow.GetInfo(ctx).WorkflowExecution.ID), Operation: op, Effect: e}
	return workflow.ExecuteActivity(actx, EffectActivity, s), nil
}
