package ledger

import (
	"context"
	"fmt"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Resolve is an operator's decision on a MANUAL_REVIEW record, and only on
// one: to CONFIRMED or FAILED (with the provider's evidence), SUPERSEDED or
// REJECTED. It is journaled with who approved it and why — a separately
// authorized action under the task's grant, never a silent bypass.
func (l *Ledger) Resolve(ctx context.Context, g coordinator.Grant, operation string, to State, ev Evidence, approver, why string) (Record, error) {
	const op = "resolve"
	if err := l.checkGrantOp(op, g, operation); err != nil {
		return Record{}, err
	}
	if err := coordinator.CheckLabel("approver", approver); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := checkText("why", why, true); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if _, err := ParseState(string(to)); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := checkEvidence(ev); err != nil {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if (to == Confirmed || to == Failed) && ev.Empty() {
		return Record{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%s needs the provider's evidence (ids or detail)", to), nil)
	}
	rec, err := l.read(ctx, op, g, operation)
	if err != nil {
		return rec, err
	}
	if rec.State == "" {
		return rec, notRecorded(op, g, operation)
	}
	var evp *Evidence
	if !ev.Empty() {
		evp = l.stamped(ev)
	}
	return l.applyOnce(ctx, g, rec, change{to: to, by: StepResolve, evidence: evp, approver: approver,
		reason: truncate(fmt.Sprintf("resolved by %s: %s", approver, why))})
}
