package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
)

// Option configures New.
type Option func(*options) error

type options struct {
	adapterList   []Adapter
	logger        *zap.Logger
	now           func() time.Time
	sleep         func(ctx context.Context, d time.Duration) error
	pollInitial   time.Duration
	pollMax       time.Duration
	polls         int
	recordTimeout time.Duration
	callTimeout   time.Duration
	validity      time.Duration
	policy        func(ctx context.Context, e Effect) (string, error)
	registerer    prometheus.Registerer
	dispatchLease func(ctx context.Context) (int64, error)
}

// Defaults of the options.
const (
	DefaultPollInitial   = 200 * time.Millisecond
	DefaultPollMax       = 5 * time.Second
	DefaultPolls         = 8
	DefaultRecordTimeout = 10 * time.Second
	DefaultCallTimeout   = 30 * time.Second
	DefaultValidity      = 15 * time.Minute
)

// WithAdapters registers provider adapters, one per effect kind.
func WithAdapters(adapters ...Adapter) Option {
	return func(o *options) error {
		for i, a := range adapters {
			if a == nil {
				return fmt.Errorf("adapter %d is nil", i)
			}
			if err := coordinator.CheckLabel("adapter kind", a.Kind()); err != nil {
				return err
			}
			if err := a.Contract().check(); err != nil {
				return fmt.Errorf("adapter %q: %w", a.Kind(), err)
			}
			o.adapterList = append(o.adapterList, a)
		}
		return nil
	}
}

// WithLogger sets the logger (default: the coordinator's).
func WithLogger(lg *zap.Logger) Option {
	return func(o *options) error {
		if lg == nil {
			return errors.New("nil logger")
		}
		o.logger = lg
		return nil
	}
}

// WithClock sets the clock the ledger stamps journal entries and dispatch
// times with, and measures a provider's retention against (default
// time.Now). A drill in simulated time injects its own.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("nil clock")
		}
		o.now = now
		return nil
	}
}

// WithSleep sets how Reconcile waits between polls of a provider (default:
// a timer, cut short by the context). It returns the context's error if the
// wait was cut short.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) error {
		if sleep == nil {
			return errors.New("nil sleep")
		}
		o.sleep = sleep
		return nil
	}
}

// WithPolling bounds how Reconcile polls Observe for one UNKNOWN record: at
// most polls observations, the first wait initial, doubling up to max.
// Pending past the bound stays UNKNOWN (Reconcile again later);
// inconclusive past it goes to MANUAL_REVIEW.
func WithPolling(initial, max time.Duration, polls int) Option {
	return func(o *options) error {
		if initial <= 0 || max < initial {
			return fmt.Errorf("poll backoff %v..%v: need 0 < initial <= max", initial, max)
		}
		if polls < 1 || polls > 1000 {
			return fmt.Errorf("polls %d out of range 1..1000", polls)
		}
		o.pollInitial, o.pollMax, o.polls = initial, max, polls
		return nil
	}
}

// WithRecordTimeout bounds recording an Apply's outcome (default 10s). It
// runs even if the caller's context was cancelled while the provider
// answered, so that an answer is not lost for want of a context; an attempt
// that etcd did not answer (a hold, or an unknown outcome) is retried within
// this bound, each attempt bounded by a fifth of it.
func WithRecordTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("record timeout %v must be positive", d)
		}
		o.recordTimeout = d
		return nil
	}
}

// WithCallTimeout bounds every call to an adapter (Precondition, Apply,
// Observe), whatever the caller's context allows (default 30s). An Apply
// cut short by it is ambiguous: the record becomes UNKNOWN.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("call timeout %v must be positive", d)
		}
		o.callTimeout = d
		return nil
	}
}

// WithMetrics registers the ledger's metrics on reg:
// leasegate_ledger_transitions_total{state,disposition} (disposition "ok"
// when the transition applied), leasegate_reconciler_actions_total{action}
// and leasegate_ledger_records{state} (set by a whole-ledger List). Ledgers
// of one process on one registry share them. Without it nothing is
// counted.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(o *options) error {
		if reg == nil {
			return errors.New("nil prometheus registerer")
		}
		o.registerer = reg
		return nil
	}
}

// WithApprovalValidity sets how long an approval authorizes a dispatch,
// from the moment Authorize recorded it (by the ledger's clock; default 15
// minutes). Dispatch of a record whose approval is older does not claim
// it: the record goes back to PROPOSED, for a new approval.
func WithApprovalValidity(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("approval validity %v must be positive", d)
		}
		o.validity = d
		return nil
	}
}

// WithPolicy sets where the current policy version of an effect comes
// from (a policy service, say; default: the effect's own Policy, which
// never changes). Authorize records the version an approval was given
// under; Dispatch asks again, and a record whose policy has changed since
// is not dispatched: it goes back to PROPOSED, for a new approval under
// the current policy. An error is a hold: nothing is written. The call is
// bounded by WithCallTimeout.
func WithPolicy(current func(ctx context.Context, e Effect) (string, error)) Option {
	return func(o *options) error {
		if current == nil {
			return errors.New("nil policy source")
		}
		o.policy = current
		return nil
	}
}

// WithDispatchLease makes every dispatch claim carry an etcd lease of the
// process that runs the dispatch (lease returns its ID): a gateway
// replica's own lease, kept alive by the replica and by nothing else. A
// DISPATCHING record of the caller's own epoch whose lease has expired is
// a dispatch whose process is gone: the owner's Reconcile, or its retry of
// Dispatch, makes it UNKNOWN and settles it against the provider, instead
// of waiting for a dispatch that will never be recorded. While the lease
// lives the dispatch may still be in flight and is left alone. Without
// this option the claim carries no lease (an in-process ledger: the
// dispatching process is the worker itself), and only a newer epoch's
// Reconcile settles a DISPATCHING record. An error from lease is a hold:
// nothing is claimed.
func WithDispatchLease(lease func(ctx context.Context) (int64, error)) Option {
	return func(o *options) error {
		if lease == nil {
			return errors.New("nil dispatch lease")
		}
		o.dispatchLease = lease
		return nil
	}
}

func sleepTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
