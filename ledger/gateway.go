package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Dispatch is the gateway, the only path to an adapter's Apply. In order:
//
//  1. It checks the record's approval: one older than WithApprovalValidity,
//     or given under a policy version that is no longer current
//     (WithPolicy), does not authorize a dispatch — the record goes back to
//     PROPOSED for a new approval, and no adapter is called.
//  2. It claims the dispatch — {operation, epoch, effect} into DISPATCHING —
//     in a Txn fenced by g: a stale grant is refused here, before any
//     adapter is called; of concurrent dispatches one claims it.
//  3. It observes the precondition now (Precondition): a changed world makes
//     the record SUPERSEDED, a provider that cannot show it withdraws the
//     claim (back to AUTHORIZED, a hold); nothing is sent in either case.
//  4. It calls Apply, with the operation id as idempotency key and the
//     approved precondition, and records CONFIRMED (with evidence), FAILED
//     (a definite refusal, with evidence) or UNKNOWN (anything else).
//
// If g stopped being current while the call was in flight, that last Txn is
// refused (the error says how) and the provider's answer is kept on the
// DISPATCHING record under its dispatch id (Record.Answer), or on the
// UNKNOWN record the next owner made of it: the next owner's Reconcile
// settles from it without asking the provider again.
//
// The error is about the ledger's own requests (refused, hold, unknown); the
// effect's outcome is the returned record's State (CONFIRMED, FAILED,
// UNKNOWN, SUPERSEDED, or PROPOSED when the approval no longer held). On an
// error the record is the last one known.
func (l *Ledger) Dispatch(ctx context.Context, g coordinator.Grant, operation string) (Record, error) {
	const op = "dispatch"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	rec, err := l.hinted(ctx, op, g, operation, Authorized)
	if err != nil {
		return rec, err
	}
	claimed, ad, err := l.claim(ctx, g, rec)
	if err != nil || claimed.State != Dispatching {
		return claimed, err
	}
	changed, now, err := l.revalidate(ctx, ad, claimed)
	if err != nil {
		prev := rec
		withdrawn, werr := l.persist(ctx, g, claimed, change{to: Authorized, by: StepDispatch,
			reason: "claim withdrawn, nothing sent: " + truncate(err.Error()),
			mutate: func(r *Record) {
				r.Epoch, r.Owner, r.Attempts, r.DispatchedAt, r.DispatchID, r.DispatchLease = prev.Epoch, prev.Owner, prev.Attempts, prev.DispatchedAt, prev.DispatchID, prev.DispatchLease
			}}, "claim withdrawal not recorded; retrying")
		if werr != nil {
			l.lg.Warn("claim not withdrawn: the record stays DISPATCHING for the next owner", l.fields(g, operation,
				zap.String("disposition", string(coordinator.DispositionOf(werr))), zap.Error(werr))...)
		}
		return withdrawn, err
	}
	if changed != "" {
		return l.persist(ctx, g, claimed, change{to: Superseded, by: StepSupersede,
			reason:   truncate(changed + ", nothing sent"),
			evidence: &Evidence{Detail: now.Detail, At: now.At}}, "supersede not recorded; retrying")
	}
	actx, cancel := context.WithTimeout(ctx, l.callTimeout)
	ev, applyErr := ad.Apply(actx, Call{Operation: operation, Effect: claimed.Effect, Epoch: g.Epoch,
		Attempt: claimed.Attempts, Approved: claimed.Precondition})
	cancel()
	// The provider has answered (or not): record it even if ctx ended meanwhile.
	ctx = context.WithoutCancel(ctx)
	outcome := l.outcomeOfApply(ev, applyErr)
	out, err := l.persist(ctx, g, claimed, outcome, "outcome not recorded; retrying")
	if err != nil && coordinator.DispositionOf(err).Class() == coordinator.ClassRefused {
		kept, kerr := l.keepAnswer(ctx, g, claimed, outcome)
		if kerr != nil {
			l.lg.Warn("provider's answer not kept", l.fields(g, operation, zap.String("to", string(outcome.to)),
				zap.String("reason", outcome.reason), zap.Error(kerr))...)
			return out, err
		}
		return kept, err
	}
	return out, err
}

// claim moves rec, AUTHORIZED, to DISPATCHING for g — or, if its approval
// no longer holds, back to PROPOSED. A DISPATCHING record of g's own
// epoch whose dispatching process is gone (orphaned) is settled first, as
// Reconcile would, and claimed again only if that makes it AUTHORIZED. A record in another state is
// illegal_transition, or g's own refusal if g is not current. A hint found
// stale by the Txn's compare is decided again once, from the record that
// Txn's Else read.
func (l *Ledger) claim(ctx context.Context, g coordinator.Grant, rec Record) (Record, Adapter, error) {
	const op = "dispatch"
	for try := 0; ; try++ {
		if rec.State == "" {
			return rec, nil, l.refuse(Dispatching, notRecorded(op, g, rec.Operation))
		}
		if rec.State == Dispatching && rec.Epoch == g.Epoch {
			// A retry of a dispatch of this very grant: settled here if the
			// process that claimed it is gone, else in flight (refused below).
			orphan, err := l.orphaned(ctx, rec)
			if err != nil {
				return rec, nil, err
			}
			if orphan {
				if rec, err = l.reconcileOne(ctx, g, rec); err != nil || rec.State != Authorized {
					return rec, nil, err // settled (CONFIRMED, UNKNOWN, ...): the record says how
				}
			}
		}
		if !Allowed(rec.State, Dispatching, StepDispatch) {
			return rec, nil, l.refuse(Dispatching, l.grantFirst(ctx, g, l.illegal(op, g, rec, Dispatching, "")))
		}
		ad, ok := l.adapters[rec.Effect.Kind]
		if !ok {
			return rec, nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("no adapter for effect kind %q", rec.Effect.Kind), nil)
		}
		lapse, cur, err := l.lapsed(ctx, rec)
		if err != nil {
			return rec, nil, err
		}
		var out Record
		if lapse != "" {
			out, err = l.transition(ctx, g, rec, change{to: Proposed, by: StepExpire, reason: truncate(lapse + "; approve it again"), policy: cur,
				mutate: func(r *Record) { r.Approval, r.ApprovalDigest, r.AuthorizedAt = nil, "", time.Time{} }})
		} else {
			var lease int64
			if lease, err = l.leaseOfDispatch(ctx, g, rec); err != nil {
				return rec, nil, err
			}
			at, id := l.now().UTC(), uuid.NewString()
			out, err = l.persist(ctx, g, rec, change{to: Dispatching, by: StepDispatch, reason: "dispatch claimed", policy: cur,
				mutate: func(r *Record) {
					r.Epoch, r.Owner, r.Attempts, r.DispatchedAt, r.DispatchID, r.DispatchLease = g.Epoch, g.Owner, r.Attempts+1, at, id, lease
				}}, "claim not recorded; retrying")
		}
		if try == 0 && moved(rec, out, err) {
			rec = out // the hint was stale: decide again on the record as it is
			continue
		}
		return out, ad, err
	}
}

// leaseOfDispatch is the lease a claim of rec carries (WithDispatchLease;
// 0 without it). A lease that cannot be had is a hold: nothing claimed.
func (l *Ledger) leaseOfDispatch(ctx context.Context, g coordinator.Grant, rec Record) (int64, error) {
	if l.dispatchLease == nil {
		return 0, nil
	}
	id, err := l.dispatchLease(ctx)
	if err == nil && id == 0 {
		err = errors.New("no lease")
	}
	if err != nil {
		return 0, store.NewError(coordinator.AuthorityUnavailable, "dispatch", g.Tenant, g.Task, fmt.Sprintf("this gateway's dispatch lease could not be had; operation %q not claimed; hold", rec.Operation), err)
	}
	return id, nil
}

// orphaned reports whether rec, DISPATCHING, was claimed by a process that
// is gone: its claim carries a lease (WithDispatchLease) that etcd shows
// expired. An expired lease never comes back, so a later look cannot
// contradict this one; the transition that acts on it still compares the
// record's revision. A claim without a lease is never orphaned here.
func (l *Ledger) orphaned(ctx context.Context, rec Record) (bool, error) {
	if rec.State != Dispatching || rec.DispatchLease == 0 {
		return false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, l.recordTimeout/5)
	defer cancel()
	resp, err := l.c.Client().TimeToLive(rctx, clientv3.LeaseID(rec.DispatchLease))
	if err != nil {
		return false, store.NewError(coordinator.AuthorityUnavailable, "dispatch", rec.Tenant, rec.Task, fmt.Sprintf("could not read whether the dispatch of operation %q is still in flight; hold", rec.Operation), err)
	}
	return resp.TTL < 0, nil // -1: expired (0 is under a second left, still alive)
}

// lapsed says why rec's approval no longer authorizes a dispatch ("" if it
// does): older than the approval validity, or given under a policy version
// that is not the current one (cur, returned too when it was read). A
// policy source that cannot answer is a hold.
func (l *Ledger) lapsed(ctx context.Context, rec Record) (string, string, error) {
	if rec.Approval == nil {
		return "no approval is recorded", "", nil
	}
	if expires := rec.AuthorizedAt.Add(l.validity); !l.now().Before(expires) {
		return fmt.Sprintf("the approval by %s (recorded %s) expired at %s", rec.Approval.Approver, stamp(rec.AuthorizedAt), stamp(expires)), "", nil
	}
	cur, err := l.currentPolicy(ctx, rec)
	if err != nil {
		return "", "", err
	}
	if cur != rec.Approval.Policy {
		return fmt.Sprintf("the policy changed since the approval: approved under %q, now %q", rec.Approval.Policy, cur), cur, nil
	}
	return "", cur, nil
}

// currentPolicy is the current policy version of rec's effect (WithPolicy;
// without it, the effect's own).
func (l *Ledger) currentPolicy(ctx context.Context, rec Record) (string, error) {
	if l.policy == nil {
		return rec.Effect.Policy, nil
	}
	cctx, cancel := context.WithTimeout(ctx, l.callTimeout)
	defer cancel()
	v, err := l.policy(cctx, rec.Effect)
	if err == nil && v == "" {
		err = errors.New("empty policy version")
	}
	if err != nil {
		return "", store.NewError(coordinator.AuthorityUnavailable, "policy", rec.Tenant, rec.Task, fmt.Sprintf("the current policy of operation %q could not be read; nothing dispatched; hold", rec.Operation), err)
	}
	return v, nil
}

// grantFirst is refusal, unless g is not current: then g's own refusal
// (stale_owner, expired_owner, ...), or the hold if etcd cannot tell. A
// stale worker learns that it must stop, not what the record says.
func (l *Ledger) grantFirst(ctx context.Context, g coordinator.Grant, refusal error) error {
	if err := l.c.Current(ctx, g); err != nil {
		return err
	}
	return refusal
}

// persist makes one transition of a dispatch, retrying within
// WithRecordTimeout while etcd does not answer (a hold, or an unknown
// outcome), so that a claim or a provider's answer is not lost for a moment
// without quorum; it waits between attempts through WithSleep, 50 ms
// doubling up to 1 s. After an attempt whose outcome is unknown, finding the
// record at exactly this transition of this very dispatch (state, sequence
// number, dispatch id) means that attempt applied.
func (l *Ledger) persist(ctx context.Context, g coordinator.Grant, from Record, ch change, retrying string) (Record, error) {
	// One context per attempt, not one for the whole and one per attempt:
	// this is every dispatch's path. The whole is bounded by end.
	end := time.Now().Add(l.recordTimeout)
	want := from
	if ch.mutate != nil {
		ch.mutate(&want)
	}
	wait, unknown := 50*time.Millisecond, false
	for {
		deadline := time.Now().Add(l.recordTimeout / 5)
		if deadline.After(end) {
			deadline = end
		}
		actx, cancelAttempt := context.WithDeadline(ctx, deadline)
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
		rctx, cancel := context.WithDeadline(ctx, end)
		slept := l.sleep(rctx, wait)
		over := rctx.Err()
		cancel()
		if slept != nil || over != nil {
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
		return false, Observation{}, notRecorded(op, g, operation)
	}
	ad, ok := l.adapters[rec.Effect.Kind]
	if !ok {
		return false, Observation{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("no adapter for effect kind %q", rec.Effect.Kind), nil)
	}
	changed, now, err := l.revalidate(ctx, ad, rec)
	return err == nil && changed == "", now, err
}

// revalidate observes rec's precondition now through ad, then each of its
// requirements through the adapter of the requirement's kind, and says
// what changed ("" if nothing did): the first world whose digest is not
// the one the record holds, with that observation. A world that cannot be
// observed is a hold (authority_unavailable), whichever it is.
func (l *Ledger) revalidate(ctx context.Context, ad Adapter, rec Record) (string, Observation, error) {
	now, err := l.observe(ctx, ad, rec, rec.Effect)
	if err != nil || now.Digest != rec.Precondition.Digest {
		return fmt.Sprintf("precondition changed: approved %s (seen %s), now %s (seen %s)", seen(rec.Precondition), stamp(rec.Precondition.At), seen(now), stamp(now.At)), now, err
	}
	for i, r := range rec.Requires {
		rad, ok := l.adapters[r.Effect.Kind]
		if !ok {
			return "", now, store.NewError(coordinator.AuthorityUnavailable, "precondition", rec.Tenant, rec.Task,
				fmt.Sprintf("requirement %d: no adapter serves kind %q now; nothing dispatched; hold", i, r.Effect.Kind), nil)
		}
		rnow, err := l.observe(ctx, rad, rec, r.Effect)
		if err != nil {
			return "", rnow, err
		}
		if rnow.Digest != r.Precondition.Digest {
			return fmt.Sprintf("requirement %d changed: %s %s required %s (seen %s), now %s (seen %s)", i, r.Effect.Kind, r.Effect.Target,
				seen(r.Precondition), stamp(r.Precondition.At), seen(rnow), stamp(rnow.At)), rnow, nil
		}
	}
	return "", now, nil
}

// observe is ad's observation of e's world now, for rec: an error is a
// hold.
func (l *Ledger) observe(ctx context.Context, ad Adapter, rec Record, e Effect) (Observation, error) {
	cctx, cancel := context.WithTimeout(ctx, l.callTimeout)
	defer cancel()
	now, err := ad.Precondition(cctx, e)
	if err == nil {
		err = checkObservation("precondition", now)
	}
	if err != nil {
		return now, store.NewError(coordinator.AuthorityUnavailable, "precondition", rec.Tenant, rec.Task,
			fmt.Sprintf("the %s provider could not show the world now; nothing dispatched; hold", e.Kind), err)
	}
	return now, nil
}
