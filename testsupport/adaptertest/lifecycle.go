package adaptertest

import (
	"errors"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// ExpiredApproval authorizes eff, lets the approval outlive the ledger's
// validity (the ledger's clock moved past it), and checks the dispatch
// sends nothing: the record is back in PROPOSED for a new approval.
func (e *Env) ExpiredApproval(cnt *Counting, operation string, eff ledger.Effect) {
	e.T.Helper()
	e.Authorized(e.G, cnt, operation, eff)
	e.Advance(ledger.DefaultValidity + time.Second)
	rec, err := e.L.Dispatch(e.Ctx, e.G, operation)
	if err != nil || rec.State != ledger.Proposed || cnt.Applies() != 0 {
		e.T.Fatalf("expired approval: state %s, err %v, applies %d; want PROPOSED and no call", rec.State, err, cnt.Applies())
	}
}

// ChangedPolicy authorizes eff, changes the current policy version, and
// checks the dispatch sends nothing: back to PROPOSED.
func (e *Env) ChangedPolicy(cnt *Counting, operation string, eff ledger.Effect) {
	e.T.Helper()
	e.Authorized(e.G, cnt, operation, eff)
	e.SetPolicy(eff.Policy + "-revised")
	rec, err := e.L.Dispatch(e.Ctx, e.G, operation)
	if err != nil || rec.State != ledger.Proposed || cnt.Applies() != 0 {
		e.T.Fatalf("changed policy: state %s, err %v, applies %d; want PROPOSED and no call", rec.State, err, cnt.Applies())
	}
}

// AnswerInHand dispatches eff by worker-a and, while the provider's call
// is in flight (after it answered, before the ledger recorded it), gives
// the task to worker-b: worker-a's outcome Txn is refused and its answer
// kept; worker-b's Reconcile settles the record from that answer, to
// settled, without asking the provider (no Observe) and without a second
// Apply. kept is the answer as kept (CONFIRMED, FAILED, UNKNOWN). before,
// if set, runs just before the provider's call.
func (e *Env) AnswerInHand(cnt *Counting, operation string, eff ledger.Effect, before func(), kept, settled ledger.State) ledger.Record {
	e.T.Helper()
	e.Authorized(e.G, cnt, operation, eff)
	var g2 coordinator.Grant
	cnt.Before = before
	cnt.After = func() { g2 = e.TakeOver() }
	rec, err := e.L.Dispatch(e.Ctx, e.G, operation)
	cnt.Before, cnt.After = nil, nil
	var ce *coordinator.Error
	if !errors.As(err, &ce) || ce.Disposition.Class() != coordinator.ClassRefused {
		e.T.Fatalf("worker-a's dispatch after losing the task: %v, want its grant refused", err)
	}
	if rec.Answer == nil || rec.Answer.To != kept {
		e.T.Fatalf("the answer was not kept as %s: %+v", kept, rec.Answer)
	}
	rec = e.Reconcile(g2, operation)
	if rec.State != settled || cnt.Observations() != 0 || cnt.Applies() != 1 {
		e.T.Fatalf("state %s, observations %d, applies %d; want %s from the kept answer, no Observe, one Apply",
			rec.State, cnt.Observations(), cnt.Applies(), settled)
	}
	return rec
}
