package ledger

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// A provider's answer in hand is never dropped. When a dispatch's outcome
// Txn is refused because its grant stopped being current while the call was
// in flight, Dispatch keeps the answer on the record (Record.Answer, and a
// journal entry by StepAnswer) under the dispatch's id, and the next owner's
// Reconcile settles from it.
//
// Keeping it is the one write not fenced by the writer's grant — that grant
// is no longer current, which is why the answer could not be recorded as
// the outcome. It is guarded instead by the record itself: the record's
// ModRevision as read, the same dispatch id, a state the dispatch could
// still leave (DISPATCHING, or the UNKNOWN a newer owner made of it), no
// answer yet. It changes no state: what the answer means is decided by the
// current owner, in a fenced Reconcile.

// errNoAnswerPlace: the record has moved past the dispatch (another dispatch
// claimed it, it settled, or an answer is already kept).
var errNoAnswerPlace = errors.New("ledger: the record has moved past this dispatch")

// keepAnswer keeps the outcome ch of dispatch claimed (which g could not
// record) on the record, retrying while the record moves within the states
// it may be kept in.
func (l *Ledger) keepAnswer(ctx context.Context, g coordinator.Grant, claimed Record, ch change) (Record, error) {
	rctx, cancel := context.WithTimeout(ctx, l.recordTimeout)
	defer cancel()
	ans := &Answer{DispatchID: claimed.DispatchID, Epoch: g.Epoch, Owner: g.Owner, To: ch.to, Reason: ch.reason,
		Evidence: ch.evidence, At: l.now().UTC()}
	rec := claimed
	for range 3 {
		if rec.DispatchID != claimed.DispatchID || rec.Answer != nil || !Allowed(rec.State, rec.State, StepAnswer) {
			return rec, fmt.Errorf("%w: it is %s under dispatch %q", errNoAnswerPlace, rec.State, rec.DispatchID)
		}
		key, then, next, err := l.encode(g, rec, change{to: rec.State, by: StepAnswer,
			reason:   truncate(fmt.Sprintf("answer kept after the grant stopped being current: %s (%s)", ch.to, ch.reason)),
			evidence: nil, mutate: func(r *Record) { r.Answer = ans }})
		if err != nil {
			return rec, err
		}
		resp, err := store.Of(l.c).Txn(rctx, store.TxnRequest{Op: string(StepAnswer), Tenant: g.Tenant, Task: g.Task,
			If:   []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rec.Revision)},
			Then: then, Else: []clientv3.Op{clientv3.OpGet(key)}})
		if err != nil {
			return rec, err
		}
		if resp.Succeeded {
			next.Revision = resp.Header.Revision
			l.hints.put(next)
			l.lg.Info("answer kept", l.fields(g, rec.Operation, zap.String("state", string(rec.State)),
				zap.String("to", string(ch.to)), zap.String("dispatch", claimed.DispatchID))...)
			return next, nil
		}
		cur, found, err := decodeRecord(resp.Responses[0].GetResponseRange().GetKvs())
		if err != nil {
			return rec, err
		}
		if !found {
			return rec, fmt.Errorf("%w: it is gone", errNoAnswerPlace)
		}
		rec = cur
	}
	return rec, fmt.Errorf("%w: it kept moving", errNoAnswerPlace)
}

// fromAnswer settles rec (DISPATCHING of an older epoch, or UNKNOWN) from
// the answer kept for its last dispatch: CONFIRMED with the provider's
// evidence; a definite refusal is FAILED for a DISPATCHING record (what the
// dispatch would have recorded), and for an UNKNOWN one it is what a lookup
// by id would show — not applied — decided as Observe's NotApplied is (an
// uncertain operation settles only by confirmation, supersession, a retry
// the contract allows, or review). An ambiguous answer settles nothing: ok
// is false, and the caller goes on as without one.
func (l *Ledger) fromAnswer(ctx context.Context, g coordinator.Grant, rec Record) (_ Record, ok bool, err error) {
	a := rec.answer()
	if a == nil || (a.To != Confirmed && a.To != Failed) || a.Evidence == nil || a.Evidence.Empty() {
		return rec, false, nil
	}
	if a.To == Failed && rec.State == Unknown {
		ad, found := l.adapters[rec.Effect.Kind]
		if !found {
			return rec, true, store.NewError(store.InvalidInput, "reconcile", "", "", fmt.Sprintf("no adapter for effect kind %q of operation %q", rec.Effect.Kind, rec.Operation), nil)
		}
		out, err := l.notApplied(ctx, g, ad, rec, *a.Evidence)
		return out, true, err
	}
	l.metrics.action("answered")
	out, err := l.transition(ctx, g, rec, change{to: a.To, by: StepReconcile, evidence: a.Evidence,
		reason: truncate(fmt.Sprintf("settled from the provider's answer to dispatch %s (epoch %d, %s), kept after ownership changed: %s",
			a.DispatchID, a.Epoch, a.Owner, a.Reason))})
	return out, true, err
}
