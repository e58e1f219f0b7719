package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Propose records an intent: operation (its stable id, never containing an
// epoch or an attempt number) bound to effect e, decided while the world
// looked like pre. It is idempotent on the operation id: the same effect
// digest returns the existing record, whatever its state; another digest is
// operation_conflict. It is ProposeRequiring with no requirement.
func (l *Ledger) Propose(ctx context.Context, g coordinator.Grant, operation string, e Effect, pre Observation) (Record, error) {
	return l.ProposeRequiring(ctx, g, operation, e, pre, nil)
}

// ProposeRequiring is Propose of an effect that also requires other
// adapters' worlds to look as each of requires says (at most
// MaxRequirements, each of a kind an adapter serves): Dispatch sends
// nothing unless they still do ("traffic follows the writer": a DNS
// change requiring the topology's writer to be its value). The same
// effect digest with other requirements is operation_conflict.
func (l *Ledger) ProposeRequiring(ctx context.Context, g coordinator.Grant, operation string, e Effect, pre Observation, requires []Requirement) (Record, error) {
	const op = "propose"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	if err := checkEffect(e); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if _, ok := l.adapters[e.Kind]; !ok {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("no adapter for effect kind %q", e.Kind), nil)
	}
	if err := checkObservation("precondition", pre); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if len(requires) > MaxRequirements {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%d requirements; at most %d", len(requires), MaxRequirements), nil)
	}
	reqs := make([]Requirement, 0, len(requires))
	for i, r := range requires {
		if err := checkRequirement(i, r); err != nil {
			return Record{}, store.NewError(store.InvalidInput, op, "", "", err.Error(), nil)
		}
		if _, ok := l.adapters[r.Effect.Kind]; !ok {
			return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("requirement %d: no adapter for effect kind %q", i, r.Effect.Kind), nil)
		}
		r.Effect.Params, _ = canonical(r.Effect.Params)
		r.Precondition.At = r.Precondition.At.UTC()
		reqs = append(reqs, r)
	}
	if len(reqs) == 0 {
		reqs = nil
	}
	d, _ := Digest(e)
	e.Params, _ = canonical(e.Params)
	pre.At = pre.At.UTC()
	rec := Record{Tenant: g.Tenant, Task: g.Task, Operation: operation, Effect: e, ParamsDigest: d,
		Precondition: pre, Requires: reqs, ProposedEpoch: g.Epoch}
	out, err := l.transition(ctx, g, rec, change{to: Proposed, by: StepPropose, reason: "proposed"})
	if errors.Is(err, errExists) {
		if out.ParamsDigest == d && sameRequirements(out.Requires, reqs) {
			return out, nil
		}
		if out.ParamsDigest == d {
			return out, store.NewError(coordinator.OperationConflict, op, g.Tenant, g.Task, fmt.Sprintf("operation %q was proposed (epoch %d) with other requirements; a new intent needs a new operation id",
				operation, out.ProposedEpoch), nil)
		}
		return out, store.NewError(coordinator.OperationConflict, op, g.Tenant, g.Task, fmt.Sprintf("operation %q was proposed (epoch %d) with another effect digest; a new intent needs a new operation id",
			operation, out.ProposedEpoch), nil)
	}
	return out, err
}

// Authorize binds approval a to the operation: a must name exactly the
// record's parameter digest and precondition digest (an approval of other
// parameters, or of another observed world, is operation_conflict), and be
// given under the current policy version (a.Policy; empty: the current one,
// WithPolicy). Repeating the approval of an AUTHORIZED record — the same
// approver, digests, policy and note, whatever its time — returns it
// unchanged: Authorize is idempotent, so a retry after outcome_unknown
// learns it applied. The approval authorizes a dispatch for WithApprovalValidity
// from now, by the ledger's clock.
func (l *Ledger) Authorize(ctx context.Context, g coordinator.Grant, operation string, a Approval) (Record, error) {
	const op = "authorize"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	if err := coordinator.CheckLabel("approver", a.Approver); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if a.ParamsDigest == "" || a.PreconditionDigest == "" {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", "the approval must name the parameter and precondition digests it approves", nil)
	}
	if err := checkText("approval note", a.Note, false); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if a.Policy != "" {
		if err := coordinator.CheckLabel("approval policy", a.Policy); err != nil {
			return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	a.At = a.At.UTC()
	rec, err := l.hinted(ctx, op, g, operation, Proposed)
	if err != nil {
		return rec, err
	}
	for try := 0; ; try++ {
		out, err := l.authorize(ctx, g, rec, a)
		if try == 0 && moved(rec, out, err) {
			rec = out // the hint was stale: decide again on the record as it is
			continue
		}
		return out, err
	}
}

func (l *Ledger) authorize(ctx context.Context, g coordinator.Grant, rec Record, a Approval) (Record, error) {
	const op = "authorize"
	if rec.State == Proposed || rec.State == Authorized {
		cur, err := l.currentPolicy(ctx, rec)
		if err != nil {
			return rec, err
		}
		if a.Policy == "" {
			a.Policy = cur
		}
		if a.Policy != cur {
			return rec, store.NewError(coordinator.OperationConflict, op, g.Tenant, g.Task, fmt.Sprintf("the approval was given under policy %q; the current policy of operation %q is %q", a.Policy, rec.Operation, cur), nil)
		}
	}
	if rec.State == "" {
		return rec, l.refuse(Authorized, notRecorded(op, g, rec.Operation))
	}
	if rec.State == Authorized && rec.Approval != nil && sameApproval(*rec.Approval, a) {
		return rec, nil // a retry: the approval is recorded
	}
	if !Allowed(rec.State, Authorized, StepAuthorize) {
		return rec, l.refuse(Authorized, l.illegal(op, g, rec, Authorized, ""))
	}
	switch {
	case a.ParamsDigest != rec.ParamsDigest:
		return rec, store.NewError(coordinator.OperationConflict, op, g.Tenant, g.Task, fmt.Sprintf("the approval is of parameters %s; operation %q has %s", short(a.ParamsDigest), rec.Operation, short(rec.ParamsDigest)), nil)
	case a.PreconditionDigest != rec.Precondition.Digest:
		return rec, store.NewError(coordinator.OperationConflict, op, g.Tenant, g.Task, fmt.Sprintf("the approval is of world %s; operation %q was proposed against %s", short(a.PreconditionDigest), rec.Operation, short(rec.Precondition.Digest)), nil)
	}
	at := l.now().UTC()
	return l.transition(ctx, g, rec, change{to: Authorized, by: StepAuthorize, reason: "approved", approver: a.Approver,
		mutate: func(r *Record) { r.Approval, r.ApprovalDigest, r.AuthorizedAt = &a, a.Digest(), at }})
}

// sameApproval reports whether b is the approval a again: the same
// approver, digests, policy and note. Its time is not compared: a retry
// through the gateway (after outcome_unknown) carries the time of the
// retry, and the approval it repeats is already recorded.
func sameApproval(a, b Approval) bool {
	return a.Approver == b.Approver && a.ParamsDigest == b.ParamsDigest &&
		a.PreconditionDigest == b.PreconditionDigest && a.Policy == b.Policy && a.Note == b.Note
}

// Reject refuses the operation before dispatch (from PROPOSED or
// AUTHORIZED).
func (l *Ledger) Reject(ctx context.Context, g coordinator.Grant, operation, reason string) (Record, error) {
	const op = "reject"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	if err := checkText("reason", reason, true); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	rec, err := l.read(ctx, op, g, operation)
	if err != nil {
		return rec, err
	}
	if rec.State == "" {
		return rec, notRecorded(op, g, operation)
	}
	return l.applyOnce(ctx, g, rec, change{to: Rejected, by: StepReject, reason: reason})
}
