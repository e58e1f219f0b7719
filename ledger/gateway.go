package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
)

// Dispatch is the gateway, the only path to an adapter's Apply. In order:
// it reads the record under g's fence (a stale grant is refused here and
// no adapter is called); it observes the precondition now (a changed world
// makes the record SUPERSEDED, and nothing is dispatched); it claims the
// dispatch — {operation, epoch, effect} into DISPATCHING — in a fenced Txn;
// it calls Apply with the operation id as idempotency key; and it records
// CONFIRMED (with evidence), FAILED (a definite refusal, with evidence) or
// UNKNOWN (anything else). If g stopped being current while the call was in
// flight, that last Txn is refused and the record stays DISPATCHING for the
// next owner's Reconcile.
//
// The error is about the ledger's own requests (refused, hold, unknown); the
// effect's outcome is the returned record's State. On an error the record
// is the last one known.
func (l *Ledger) Dispatch(ctx context.Context, g coordinator.Grant, operation string) (Record, error) {
	const op = "dispatch"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	rec, err := l.fencedRead(ctx, op, g, operation)
	if err != nil {
		return rec, err
	}
	if !Allowed(rec.State, Dispatching, StepDispatch) {
		return rec, l.refuse(Dispatching, l.illegal(op, g, rec, Dispatching, ""))
	}
	ad, ok := l.adapters[rec.Effect.Kind]
	if !ok {
		return rec, coordinator.Invalid(op, "no adapter for effect kind %q", rec.Effect.Kind)
	}
	same, now, err := l.revalidate(ctx, ad, rec)
	if err != nil {
		return rec, err
	}
	if !same {
		return l.transition(ctx, g, rec, change{to: Superseded, by: StepSupersede,
			reason:   fmt.Sprintf("precondition changed: approved %s (seen %s), now %s (seen %s)", seen(rec.Precondition), stamp(rec.Precondition.At), seen(now), stamp(now.At)),
			evidence: &Evidence{Detail: now.Detail, At: now.At}})
	}
	at, id := l.now().UTC(), uuid.NewString()
	claimed, err := l.persist(ctx, g, rec, change{to: Dispatching, by: StepDispatch,
		reason: fmt.Sprintf("dispatch claimed; precondition %s revalidated (seen %s)", seen(now), stamp(now.At)),
		mutate: func(r *Record) {
			r.Epoch, r.Owner, r.Attempts, r.DispatchedAt, r.DispatchID = g.Epoch, g.Owner, r.Attempts+1, at, id
		}}, "claim not recorded; retrying")
	if err != nil {
		return claimed, err
	}
	actx, cancel := context.WithTimeout(ctx, l.callTimeout)
	ev, applyErr := ad.Apply(actx, Call{Operation: operation, Effect: claimed.Effect, Epoch: g.Epoch,
		Attempt: claimed.Attempts, Approved: claimed.Precondition})
	cancel()
	// The provider has answered (or not): record it even if ctx ended meanwhile.
	return l.persist(context.WithoutCancel(ctx), g, claimed, l.outcomeOfApply(ev, applyErr), "outcome not recorded; retrying")
}

// persist makes one transition of a dispatch, retrying within
// WithRecordTimeout while etcd does not answer (a hold, or an unknown
// outcome), so that a claim or a provider's answer is not lost for a moment
// without quorum. After an attempt whose outcome is unknown, finding the
// record at exactly this transition of this very dispatch (state, sequence
// number, dispatch id) means that attempt applied.
func (l *Ledger) persist(ctx context.Context, g coordinator.Grant, from Record, ch change, retrying string) (Record, error) {
	rctx, cancel := context.WithTimeout(ctx, l.recordTimeout)
	defer cancel()
	want := from
	if ch.mutate != nil {
		ch.mutate(&want)
	}
	wait, unknown := 50*time.Millisecond, false
	for {
		actx, cancelAttempt := context.WithTimeout(rctx, l.recordTimeout/5)
		out, err := l.transition(actx, g, from, ch)
		cancelAttempt()
		switch d := coordinator.DispositionOf(err); {
		case err == nil:
			return out, nil
		case unknown && (d == coordinator.IllegalTransition || d == coordinator.VersionConflict) &&
			out.State == ch.to && out.Seq == from.Seq+1 && out.DispatchID == want.DispatchID:
			return out, nil
		case d == coordinator.OutcomeUnknown:
			unknown = true
		case d != coordinator.AuthorityUnavailable:
			return out, err
		}
		l.lg.Warn(retrying, l.fields(g, from.Operation, zap.String("to", string(ch.to)),
			zap.String("disposition", string(coordinator.DispositionOf(err))))...)
		if sleepTimer(rctx, wait) != nil {
			return from, err
		}
		wait = min(2*wait, time.Second)
	}
}

// outcomeOfApply reads Apply's answer: CONFIRMED only with evidence, FAILED
// only for a definite refusal with evidence, UNKNOWN otherwise.
func (l *Ledger) outcomeOfApply(ev Evidence, err error) change {
	var refused *RefusedError
	if bad := checkEvidence(ev); err == nil && bad != nil {
		return change{to: Unknown, by: StepDispatch, reason: "provider answered with unusable evidence: " + truncate(bad.Error())}
	}
	if errors.As(err, &refused) {
		if bad := checkEvidence(refused.Evidence); bad != nil {
			return change{to: Unknown, by: StepDispatch, reason: "provider refused with unusable evidence: " + truncate(bad.Error())}
		}
	}
	switch {
	case err == nil && !ev.Empty():
		return change{to: Confirmed, by: StepDispatch, reason: "provider applied", evidence: l.stamped(ev)}
	case err == nil:
		return change{to: Unknown, by: StepDispatch, reason: "provider answered without evidence"}
	case errors.As(err, &refused) && !refused.Evidence.Empty():
		return change{to: Failed, by: StepDispatch, reason: truncate("provider refused: " + refused.Reason), evidence: l.stamped(refused.Evidence)}
	case errors.As(err, &refused):
		return change{to: Unknown, by: StepDispatch, reason: truncate("provider refused without evidence: " + refused.Reason)}
	}
	ch := change{to: Unknown, by: StepDispatch, reason: "ambiguous: " + truncate(err.Error())}
	if !ev.Empty() && checkEvidence(ev) == nil {
		ch.evidence = l.stamped(ev)
	}
	return ch
}

// Revalidate observes the operation's precondition now and reports whether
// it is still the world the operation was proposed and approved against.
// Use it before a dependent effect: a checkpointed plan is evidence of what
// was, not authority for what is. (Dispatch does this itself.)
func (l *Ledger) Revalidate(ctx context.Context, g coordinator.Grant, operation string) (bool, Observation, error) {
	const op = "revalidate"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return false, Observation{}, err
	}
	rec, err := l.read(ctx, op, g, operation)
	if err != nil {
		return false, Observation{}, err
	}
	if rec.State == "" {
		return false, Observation{}, coordinator.Refusal(coordinator.IllegalTransition, op, g.Tenant, g.Task,
			fmt.Sprintf("no operation %q is recorded", operation))
	}
	ad, ok := l.adapters[rec.Effect.Kind]
	if !ok {
		return false, Observation{}, coordinator.Invalid(op, "no adapter for effect kind %q", rec.Effect.Kind)
	}
	same, now, err := l.revalidate(ctx, ad, rec)
	return same, now, err
}

func (l *Ledger) revalidate(ctx context.Context, ad Adapter, rec Record) (bool, Observation, error) {
	cctx, cancel := context.WithTimeout(ctx, l.callTimeout)
	defer cancel()
	now, err := ad.Precondition(cctx, rec.Effect)
	if err == nil {
		err = checkObservation("precondition", now)
	}
	if err != nil {
		return false, now, &coordinator.Error{Disposition: coordinator.AuthorityUnavailable, Op: "precondition",
			Tenant: rec.Tenant, Task: rec.Task,
			Detail: fmt.Sprintf("the %s provider could not show the world now; nothing dispatched; hold", rec.Effect.Kind), Err: err}
	}
	return now.Digest == rec.Precondition.Digest, now, nil
}
