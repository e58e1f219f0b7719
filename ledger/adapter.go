package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Adapter is the only code that talks to one provider, and the gateway
// (Ledger.Dispatch) is the only code that calls Apply. Write one per
// provider, declaring in its Contract what that provider really offers
// (idempotency keys, lookup by id, a provider-side precondition); the
// ledger never assumes more than the contract says. See docs/ledger.md,
// "How to write an adapter".
//
// Every method is called with a context bounded by WithCallTimeout, and may
// be called concurrently for different operations.
type Adapter interface {
	// Kind is the effect kind this adapter serves (Effect.Kind).
	Kind() string

	// Contract is what the provider promises about ids, retries and
	// preconditions. It is read at New (and checked there) and at every
	// reconcile; it must not change while the ledger runs.
	Contract() Contract

	// Precondition observes the world an effect depends on, now, from the
	// provider's own authority: a digest of exactly what matters (the
	// writer of a topology; a DNS record's current value), when it was seen,
	// and, in Detail, what an Apply needs to send that world back to the
	// provider as a precondition (Contract.Conditional). Two observations of
	// one world must give one digest: leave out what changes without
	// mattering (timestamps, lag figures). An error is a hold: nothing is
	// dispatched.
	Precondition(ctx context.Context, e Effect) (Observation, error)

	// Apply performs the effect once, as call describes it. Send
	// call.Operation as the provider's idempotency key where it has one
	// (the same id on every attempt, by every owner); call.Epoch is the
	// fencing epoch, for providers that can check one. An adapter whose
	// Contract is Conditional sends call.Approved — the world the approval
	// was given under — with the write, so that the provider itself refuses
	// it if that world has moved since Dispatch revalidated it.
	//
	// A nil error needs evidence (the provider's request or change id, or
	// what it showed). A *RefusedError (Refused) is the provider's definite
	// "no": it applied nothing and never will for this attempt; give its
	// answer as evidence. Every other error is ambiguous (a timeout, a reset
	// connection, a 5xx after the request was sent): the record becomes
	// UNKNOWN. Evidence returned with an ambiguous error (a change id
	// accepted and not yet settled, say) is stored for Observe.
	Apply(ctx context.Context, call Call) (Evidence, error)

	// Observe asks the provider's own authority, never a cache, what became
	// of the operation rec records. rec is the record as stored: its
	// Effect and Operation; its Evidence — what the provider showed so far
	// (ids returned by an Apply whose answer was ambiguous, such as a change
	// id to poll); Epoch, Owner, Attempts and DispatchedAt of its last
	// dispatch (DispatchedAt is the claim, before Precondition: the call
	// left up to WithCallTimeout later — a window "could it still be in
	// flight" must count from DispatchedAt plus that); Precondition, the approved world; and Answer, if one was
	// kept: an ambiguous answer to that dispatch that arrived after its
	// grant stopped being current (with its evidence). With Contract.Lookup,
	// ask the provider by rec.Operation; without it, decide from the
	// provider's authoritative state (the topology shows the target as
	// writer; the record holds the value) and the stored evidence.
	//
	// Applied needs evidence. NotApplied, with Lookup, means no attempt
	// under the id applied or ever will; without Lookup, only that the
	// state does not show the effect now (the ledger re-observes, and does
	// not read it as proof that an attempt in flight will not land). Pending
	// is accepted and not settled (a DNS change PENDING). Anything else is
	// Inconclusive; an error is read as Inconclusive.
	Observe(ctx context.Context, rec Record) (Outcome, Evidence, error)
}

// Call is one dispatch of an operation, as Apply receives it.
type Call struct {
	// Operation is the stable operation id: the idempotency key. It is the
	// same on every attempt and under every owner, and never contains an
	// epoch or an attempt number.
	Operation string
	// Effect is what to do: kind, target, canonical parameters, policy.
	Effect Effect
	// Epoch is the fencing epoch of the grant that claimed this dispatch.
	Epoch int64
	// Attempt counts the dispatches of this operation, this one included:
	// 1, or more after Reconcile found an earlier one not applied and the
	// contract made a retry under the same id safe.
	Attempt int
	// Approved is the precondition the approval was given under (the
	// record's Precondition). Dispatch has just observed a world with the
	// same digest; a Conditional adapter sends it with the write.
	Approved Observation
}

// Contract is what a provider promises. The zero Contract promises
// nothing: an ambiguous dispatch is settled only by what Observe can show
// from the provider's state, and otherwise by an operator.
type Contract struct {
	// Lookup: the provider can be asked about an operation id, and its
	// answer covers every attempt under that id — Observe's NotApplied
	// means none applied and none will (a payment API's lookup by
	// idempotency key; a provider's "did you ever accept this request?").
	// Without it, Observe decides from the provider's authoritative state
	// plus the record's stored evidence, and the reconciler reads NotApplied
	// as "not so far": it keeps observing up to its bound, and does not
	// supersede the intent on it unless the provider checks preconditions
	// (Conditional).
	Lookup bool
	// RetrySafe: applying again under the same operation id cannot apply
	// the effect twice, even if an earlier attempt arrives late (the
	// provider deduplicates by the id for Retention). Only then does
	// Reconcile put a record Observe shows not applied back to AUTHORIZED.
	RetrySafe bool
	// Retention is how long the provider remembers an operation id. A retry
	// later than this after the first dispatch is not considered safe.
	// Zero means no promise (so no automatic retry); negative is invalid.
	Retention time.Duration
	// Conditional: Apply sends Call.Approved with the write and the
	// provider refuses the write if its world is not that one (DNS
	// prerequisites, a compare-and-set API, a SQL WHERE), so the check and
	// the effect are one step at the provider and no change between
	// Dispatch's revalidation and the call can slip in. An attempt that
	// arrives late in a changed world is refused by the provider, so an
	// intent Observe shows not applied in a changed world can be
	// SUPERSEDED.
	Conditional bool
}

func (c Contract) check() error {
	if c.Retention < 0 {
		return fmt.Errorf("contract retention %v is negative", c.Retention)
	}
	return nil
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

// String is the outcome's name as records and logs print it.
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

// Error names the refusal's reason.
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
