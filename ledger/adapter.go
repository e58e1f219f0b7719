package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Adapter is the only code that talks to one provider, and the gateway
// (Ledger.Dispatch) is the only code that calls Apply. Write one per
// provider; see docs/ledger.md.
type Adapter interface {
	// Kind is the effect kind this adapter serves (Effect.Kind).
	Kind() string
	// Contract is what the provider promises about retries.
	Contract() Contract
	// Precondition observes the world an effect depends on, now: a digest
	// of what matters (the writer of a topology, say) and when it was seen.
	Precondition(ctx context.Context, e Effect) (Observation, error)
	// Apply performs the effect once. The operation id is the provider's
	// idempotency key (the same id on every attempt, by every owner); epoch
	// is the fencing epoch of the dispatch, for providers that can check it.
	// A nil error needs evidence (the provider's request or change id). An
	// error is ambiguous unless it is a *RefusedError: the provider's
	// definite "no", which it must be certain applied nothing.
	Apply(ctx context.Context, e Effect, operation string, epoch int64) (Evidence, error)
	// Observe asks the provider's own authority whether the operation
	// applied. An error is read as Inconclusive.
	Observe(ctx context.Context, e Effect, operation string) (Outcome, Evidence, error)
}

// Contract is what a provider promises.
type Contract struct {
	// RetrySafe: once Observe says NotApplied, applying again under the
	// same operation id cannot apply the effect twice (the provider
	// deduplicates by the id for Retention).
	RetrySafe bool
	// Retention is how long the provider remembers an operation id. A retry
	// later than this after the first dispatch is not considered safe.
	// Zero means no promise.
	Retention time.Duration
}

// Outcome is what Observe learned. The zero value is Inconclusive: not
// knowing never reads as applied or as not applied.
type Outcome int

// The outcomes of Observe.
const (
	Inconclusive Outcome = iota // the provider cannot tell (yet), or could not be asked
	Applied                     // it applied; the evidence says so
	NotApplied                  // it did not apply, and will not from this id's earlier attempts
	Pending                     // accepted, not settled (a DNS change PENDING, say)
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case NotApplied:
		return "not_applied"
	case Pending:
		return "pending"
	}
	return "inconclusive"
}

// RefusedError is a provider's definite refusal: it applied nothing and
// never will for this attempt. Its evidence is the provider's answer.
type RefusedError struct {
	Reason   string
	Evidence Evidence
}

func (e *RefusedError) Error() string { return "ledger: provider refused: " + e.Reason }

// Is makes errors.Is(err, ErrRefused) true for every *RefusedError.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Refused is a definite refusal for Apply to return.
func Refused(reason string, ev Evidence) error { return &RefusedError{Reason: reason, Evidence: ev} }

// ErrRefused matches every *RefusedError.
var ErrRefused = errors.New("ledger: provider refused")

// ErrAmbiguous is for an Apply that cannot tell whether the provider
// applied (timeout, lost response, transport error after send). Any error
// that is not a *RefusedError is read as ambiguous; wrapping this one says
// so explicitly.
var ErrAmbiguous = errors.New("ledger: provider outcome ambiguous")

// Ambiguous wraps cause as an ambiguous Apply error.
func Ambiguous(cause error) error { return fmt.Errorf("%w: %w", ErrAmbiguous, cause) }
