package drillworker

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	lgtemporal "github.com/leasegate/leasegate/temporal"
)

// ObserveInput names what an observation activity reads: the precondition
// of Effect in Tenant/Task, as the gateway observes it from the provider.
type ObserveInput struct {
	Tenant string        `json:"tenant"`
	Task   string        `json:"task"`
	Effect ledger.Effect `json:"effect"`
}

// Activities are one drill instance's activities: the module's effect
// activity and the two observations, every attempt under a grant of its
// own through the gateway (lgtemporal.Begin). Fenced is called with the
// refusal when an attempt of this worker is refused stale_owner: another
// instance holds the task.
type Activities struct {
	c      *client.Client
	effect *lgtemporal.Activities
	ttl    time.Duration
	poll   time.Duration
	fenced func(error)
}

// NewActivities are the activities acting through c, each attempt under a
// lease of ttl, polling every poll (at most ttl/3).
func NewActivities(c *client.Client, ttl, poll time.Duration, fenced func(error)) (*Activities, error) {
	e, err := lgtemporal.NewActivities(c, ttl, poll)
	if err != nil {
		return nil, err
	}
	if fenced == nil {
		fenced = func(error) {}
	}
	return &Activities{c: c, effect: e, ttl: ttl, poll: poll, fenced: fenced}, nil
}

// Register registers the effect activity (lgtemporal.EffectActivity) and
// the observations on w.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.Effect, activity.RegisterOptions{Name: lgtemporal.EffectActivity})
	w.RegisterActivityWithOptions(a.Observe, activity.RegisterOptions{Name: ObserveActivity})
	w.RegisterActivityWithOptions(a.WaitWriter, activity.RegisterOptions{Name: WaitWriterActivity})
}

// Effect is the module's effect activity, watched for a fence.
func (a *Activities) Effect(ctx context.Context, s lgtemporal.Step) (ledger.Record, error) {
	rec, err := a.effect.Effect(ctx, s)
	return rec, a.watch(err)
}

// Observe is one read of in's precondition under a grant of this attempt:
// the digest's fields.
func (a *Activities) Observe(ctx context.Context, in ObserveInput) (map[string]string, error) {
	var out map[string]string
	err := a.attempt(ctx, in, func(at *lgtemporal.Attempt) error {
		obs, err := at.Client().ObservePrecondition(ctx, at.Grant(), in.Effect)
		out = digestFields(obs.Digest)
		return err
	})
	return out, err
}

// WaitWriter reads the topology (in's promotion's precondition) every poll,
// heartbeating, until it shows the promotion's target as the writer with
// no promotion in progress; it returns the writer. The activity's
// timeout bounds it; Temporal then retries.
func (a *Activities) WaitWriter(ctx context.Context, in ObserveInput) (string, error) {
	var writer string
	err := a.attempt(ctx, in, func(at *lgtemporal.Attempt) error {
		for {
			obs, err := at.Client().ObservePrecondition(ctx, at.Grant(), in.Effect)
			if err != nil && coordinator.DispositionOf(err) != coordinator.AuthorityUnavailable {
				return err
			}
			if w := digestFields(obs.Digest); err == nil && w["writer"] == in.Effect.Target && w["promoting"] == "" {
				writer = w["writer"]
				return nil
			}
			if err := at.Heartbeat(ctx, "waiting for "+in.Effect.Target+" to be the writer"); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(a.poll):
			}
		}
	})
	return writer, err
}

// attempt runs f under a grant of this attempt (Begin), then releases it.
func (a *Activities) attempt(ctx context.Context, in ObserveInput, f func(*lgtemporal.Attempt) error) error {
	at, err := lgtemporal.Begin(ctx, a.c, in.Tenant, in.Task, a.ttl, a.poll)
	if err != nil {
		return a.watch(lgtemporal.ActivityError(err))
	}
	err = f(at)
	_ = at.End(context.WithoutCancel(ctx)) // a superseded attempt's release is refused: nothing to release
	if err != nil {
		return a.watch(lgtemporal.ActivityError(err))
	}
	return nil
}

// watch reports an attempt refused stale_owner to the instance (a newer
// grant holds the task: another instance), and returns err. An attempt
// whose own lease lapsed (expired_owner) is not reported: its error is
// retryable, and Temporal retries it — on this worker if it is the one
// still polling — under a new session and a new claim.
func (a *Activities) watch(err error) error {
	if coordinator.DispositionOf(err) == coordinator.StaleOwner {
		a.fenced(err)
	}
	return err
}
