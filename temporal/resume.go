package temporal

import (
	"context"
	"fmt"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// StoppedError is Resume's answer for a record it will not act on: FAILED,
// SUPERSEDED, REJECTED or MANUAL_REVIEW (or a state this package does not
// know). The record is as read; a person decides what comes next.
type StoppedError struct{ Record ledger.Record }

func (e *StoppedError) Error() string {
	return fmt.Sprintf("temporal: operation %s is %s: stopped for review", e.Record.Operation, e.Record.State)
}

// usable refuses locally once the attempt's session is past its local
// deadline or gone: the gateway would refuse too, but a lapsed attempt
// should not even ask.
func (a *Attempt) usable(op string) error {
	if err := a.s.Err(); err != nil {
		return store.NewError(coordinator.ExpiredOwner, op, a.g.Tenant, a.g.Task, "the attempt's session can no longer act", err)
	}
	if time.Now().After(a.s.Deadline()) {
		return store.NewError(coordinator.ExpiredOwner, op, a.g.Tenant, a.g.Task, "the attempt's session is past its local deadline", coordinator.ErrSessionDeadline)
	}
	return nil
}

// record reads the operation's record, if there is one (a list of the
// task's records: a missing id is not an error to parse).
func (a *Attempt) record(ctx context.Context, op string) (ledger.Record, bool, error) {
	recs, err := a.c.List(ctx, a.g.Tenant, a.g.Task, "")
	if err != nil {
		return ledger.Record{}, false, err
	}
	for _, r := range recs {
		if r.Operation == op {
			return r, true, nil
		}
	}
	return ledger.Record{}, false, nil
}

// Resume carries operation op (effect e) as far as this attempt can,
// under its grant — the seed's resumePromotion as a library call. It reads
// the record and acts on its state, again after each step:
//
//   - none yet: observe the precondition through the gateway and Propose;
//   - PROPOSED: wait (heartbeating) for the approver's decision;
//   - AUTHORIZED: Dispatch under this attempt's epoch;
//   - DISPATCHING of an older epoch, or UNKNOWN: Reconcile (the provider's
//     authority settles it; an answer kept by the gateway settles it without
//     asking again);
//   - DISPATCHING of this attempt's epoch (its answer was lost): wait for
//     the gateway's dispatch to be recorded, up to two TTLs, then give the
//     next attempt the record;
//   - CONFIRMED: return it — the receipt;
//   - anything else: *StoppedError.
//
// An error that is not a *StoppedError leaves the record for the next
// attempt to resume (Temporal's retry): a hold, an unknown outcome, a lost
// lease, a record still UNKNOWN after reconciling.
func (a *Attempt) Resume(ctx context.Context, op string, e ledger.Effect) (ledger.Record, error) {
	reconciled := false
	var ownSince time.Time
	for {
		if err := a.usable("resume"); err != nil {
			return ledger.Record{}, err
		}
		rec, found, err := a.record(ctx, op)
		if err != nil {
			return ledger.Record{}, err
		}
		if !found {
			pre, err := a.c.ObservePrecondition(ctx, a.g, e)
			if err != nil {
				return ledger.Record{}, err
			}
			if rec, err = a.c.Propose(ctx, a.g, op, e, pre); err != nil {
				return ledger.Record{}, err
			}
		}
		switch rec.State {
		case ledger.Confirmed:
			return rec, nil
		case ledger.Proposed:
			if err := a.wait(ctx, "waiting for the approver of "+op); err != nil {
				return ledger.Record{}, err
			}
		case ledger.Authorized:
			err := a.during(ctx, "dispatching "+op, func() error {
				_, err := a.c.Dispatch(ctx, a.g, op)
				return err
			})
			// The record, read again, is the answer; an unknown outcome
			// of the call is read there too.
			if err != nil && coordinator.DispositionOf(err) != coordinator.OutcomeUnknown {
				return ledger.Record{}, err
			}
		case ledger.Dispatching, ledger.Unknown:
			if rec.State == ledger.Dispatching && rec.Epoch == a.g.Epoch {
				// This attempt's own dispatch, its answer lost: the gateway
				// owns it and records its outcome.
				if ownSince.IsZero() {
					ownSince = time.Now()
				}
				if time.Since(ownSince) > 2*a.ttl {
					return ledger.Record{}, store.NewError(coordinator.OutcomeUnknown, "resume", a.g.Tenant, a.g.Task, op+" is still DISPATCHING under this attempt's epoch; the next attempt reconciles it", nil)
				}
				if err := a.wait(ctx, "waiting for the gateway to record "+op); err != nil {
					return ledger.Record{}, err
				}
				continue
			}
			if reconciled {
				return ledger.Record{}, store.NewError(coordinator.OutcomeUnknown, "resume", a.g.Tenant, a.g.Task, op+" is still "+string(rec.State)+" after reconciling; the next attempt reconciles again", nil)
			}
			reconciled = true
			if err := a.during(ctx, "reconciling "+op, func() error {
				_, err := a.c.Reconcile(ctx, a.g)
				return err
			}); err != nil {
				return ledger.Record{}, err
			}
		default:
			return rec, &StoppedError{Record: rec}
		}
	}
}
