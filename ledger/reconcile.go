package ledger

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Reconcile is what a new owner of a task runs on taking over: every
// DISPATCHING record of an older epoch becomes UNKNOWN (its dispatch may or
// may not have reached the provider; a newer epoch cannot cancel it), then
// every UNKNOWN record is settled against the provider's own authority
// (Observe), polled with bounded backoff (WithPolling):
//
//   - applied, with evidence: CONFIRMED;
//   - not applied: SUPERSEDED if the world has changed meanwhile and the
//     contract rules out a late attempt landing there (Conditional, or
//     Lookup within the retention), whether or not a retry is safe;
//     AUTHORIZED again, to be dispatched under the same operation id, if
//     the world has not changed and the contract says a retry under that id
//     is safe (RetrySafe, within the provider's retention); otherwise
//     MANUAL_REVIEW (notApplied gives the order). Without Lookup, "not
//     applied" is only what the provider's state shows now: it is observed
//     again up to the bound, and decided on the last observation;
//   - pending past the bound: stays UNKNOWN (call Reconcile again later);
//   - inconclusive past the bound: MANUAL_REVIEW.
//
// It never mints a new operation id. It leaves DISPATCHING records of g's
// own epoch alone — their dispatch may still be in flight — unless their
// claim carries a dispatch lease (WithDispatchLease) that has expired: the
// process that claimed it is gone, and the record is settled as an older
// epoch's would be.
// It returns the records it looked at, as they are now.
func (l *Ledger) Reconcile(ctx context.Context, g coordinator.Grant) ([]Record, error) {
	const op = "reconcile"
	if err := g.Validate(); err != nil {
		return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	recs, err := l.currentList(ctx, op, g)
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, rec := range recs {
		for try := 0; ; try++ {
			takeover := rec.State == Dispatching && rec.Epoch < g.Epoch
			if rec.State == Dispatching && rec.Epoch == g.Epoch {
				// This owner's own dispatch: settled only if the process
				// that claimed it is gone (its dispatch lease expired).
				if takeover, err = l.orphaned(ctx, rec); err != nil {
					return out, err
				}
			}
			if !takeover && rec.State != Unknown {
				break
			}
			now, err := l.reconcileOne(ctx, g, rec)
			if try < 2 && moved(rec, now, err) {
				// It moved while we decided (an answer kept meanwhile, say):
				// decide again on the record as its refused Txn read it.
				rec = now
				continue
			}
			out = append(out, now)
			if err != nil {
				return out, err
			}
			break
		}
	}
	return out, nil
}

// reconcileOne settles one record: DISPATCHING of an older epoch, or
// UNKNOWN. An answer kept for its last dispatch settles it without asking
// the provider; otherwise an older epoch's dispatch becomes UNKNOWN (with
// the evidence of an ambiguous kept answer, if any), and UNKNOWN is
// observed (settle).
func (l *Ledger) reconcileOne(ctx context.Context, g coordinator.Grant, rec Record) (Record, error) {
	if out, ok, err := l.fromAnswer(ctx, g, rec); ok {
		return out, err
	}
	if rec.State == Dispatching {
		why := "the task has a new owner"
		if rec.Epoch == g.Epoch {
			why = fmt.Sprintf("the gateway that claimed it is gone (its dispatch lease %s expired)", coordinator.FormatLeaseID(rec.DispatchLease))
		}
		ch := change{to: Unknown, by: StepReconcile,
			reason: fmt.Sprintf("dispatch claimed by epoch %d (%s) was never recorded; %s", rec.Epoch, rec.Owner, why)}
		if a := rec.answer(); a != nil {
			ch.reason = truncate(fmt.Sprintf("dispatch claimed by epoch %d (%s) answered ambiguously after the task got a new owner: %s", rec.Epoch, rec.Owner, a.Reason))
			ch.evidence = a.Evidence
		}
		var err error
		if rec, err = l.transition(ctx, g, rec, ch); err != nil {
			return rec, err
		}
	}
	return l.settle(ctx, g, rec)
}

// settle polls Observe for one UNKNOWN record and moves it as Reconcile
// says.
func (l *Ledger) settle(ctx context.Context, g coordinator.Grant, rec Record) (Record, error) {
	ad, ok := l.adapters[rec.Effect.Kind]
	if !ok {
		return rec, store.NewError(store.InvalidInput, "reconcile", "", "", fmt.Sprintf("no adapter for effect kind %q of operation %q", rec.Effect.Kind, rec.Operation), nil)
	}
	wait := l.pollInitial
	lookup := ad.Contract().Lookup
	last, lastDetail, lastEv := Inconclusive, "", Evidence{}
	for i := range l.polls {
		if i > 0 {
			if err := l.sleep(ctx, wait); err != nil {
				return rec, store.NewError(coordinator.AuthorityUnavailable, "reconcile", g.Tenant, g.Task, fmt.Sprintf("stopped polling operation %q; it stays UNKNOWN", rec.Operation), err)
			}
			wait = min(2*wait, l.pollMax)
		}
		cctx, cancel := context.WithTimeout(ctx, l.callTimeout)
		outcome, ev, err := ad.Observe(cctx, rec)
		cancel()
		if err == nil {
			err = checkEvidence(ev)
		}
		switch {
		case err != nil:
			last, lastDetail = Inconclusive, truncate(err.Error())
			continue
		case outcome == Applied && ev.Empty():
			last, lastDetail = Inconclusive, "provider says applied but shows no evidence"
			continue
		case outcome == Applied:
			l.metrics.action("confirmed")
			return l.transition(ctx, g, rec, change{to: Confirmed, by: StepReconcile,
				reason: "provider's authority shows it applied", evidence: l.stamped(ev)})
		case outcome == NotApplied && lookup:
			return l.notApplied(ctx, g, ad, rec, ev)
		}
		// Without a lookup by id, not applied is only "not so far": an
		// attempt in flight may still land. Observe again, up to the bound.
		last, lastDetail, lastEv = outcome, "", ev
	}
	if last == NotApplied {
		return l.notApplied(ctx, g, ad, rec, lastEv)
	}
	if last == Pending {
		l.metrics.action("pending")
		l.lg.Info("still pending", l.fields(g, rec.Operation)...)
		return rec, nil
	}
	reason := fmt.Sprintf("provider inconclusive after %d observations", l.polls)
	if lastDetail != "" {
		reason += ": " + lastDetail
	}
	l.metrics.action("manual_review")
	return l.transition(ctx, g, rec, change{to: ManualReview, by: StepReconcile, reason: truncate(reason)})
}

// notApplied moves an UNKNOWN record Observe showed not applied: by a
// lookup by id (none of its attempts applied or will), or, without one,
// from the provider's state at the last of the bounded observations. In
// order:
//
//   - the contract lets no outcome but review follow: neither a safe retry
//     (RetrySafe, within Retention of the dispatch) nor a late attempt
//     ruled out in a changed world (Conditional, or a Lookup within
//     Retention): MANUAL_REVIEW, the world not even observed;
//   - the precondition observed changed, and a late attempt is ruled out
//     (the provider refuses it in the changed world, or the lookup covers
//     every attempt): SUPERSEDED;
//   - it changed, and a late attempt could still land: MANUAL_REVIEW;
//   - the world is the approved one, or cannot be observed, and a retry is
//     not safe: MANUAL_REVIEW (a Conditional provider's check does not make
//     one safe: the world may be the approved one again);
//   - otherwise AUTHORIZED, to be dispatched again under the same id
//     (Dispatch revalidates before the call).
func (l *Ledger) notApplied(ctx context.Context, g coordinator.Grant, ad Adapter, rec Record, ev Evidence) (Record, error) {
	var evp *Evidence
	if !ev.Empty() {
		evp = l.stamped(ev)
	}
	c := ad.Contract()
	first, err := l.firstDispatch(ctx, g, rec)
	if err != nil {
		return rec, err
	}
	age := l.now().Sub(first)
	retained := c.Retention > 0 && !first.IsZero() && age < c.Retention
	canRetry := c.RetrySafe && retained
	lateRuledOut := c.Conditional || (c.Lookup && retained)
	whyNoRetry := "its contract does not make a retry under the same id safe"
	if c.RetrySafe {
		whyNoRetry = fmt.Sprintf("the first dispatch (%s ago) is outside its idempotency retention %v", age, c.Retention)
	}
	review := func(reason string) (Record, error) {
		l.metrics.action("manual_review")
		return l.transition(ctx, g, rec, change{to: ManualReview, by: StepReconcile, evidence: evp, reason: truncate(reason)})
	}
	if !canRetry && !lateRuledOut {
		return review("provider shows it not applied, but " + whyNoRetry)
	}
	why, _, err := l.revalidate(ctx, ad, rec)
	changed := err == nil && why != ""
	switch {
	case changed && lateRuledOut:
		l.metrics.action("superseded")
		return l.transition(ctx, g, rec, change{to: Superseded, by: StepReconcile, evidence: evp,
			reason: truncate("provider shows it not applied, and the " + why)})
	case changed:
		return review("provider's state does not show it applied, but the " + why + ", and a late attempt could still land: the contract has neither a lookup by id within its retention nor a provider-side precondition")
	case !canRetry:
		world := "in the approved world"
		if err != nil {
			world = "(the world could not be observed now: " + err.Error() + ")"
		}
		return review("provider shows it not applied " + world + ", but " + whyNoRetry)
	}
	l.metrics.action("retried")
	return l.transition(ctx, g, rec, change{to: Authorized, by: StepReconcile, evidence: evp,
		reason: "provider shows it not applied; its contract makes a retry under the same id safe"})
}

// firstDispatch is when rec's operation was first claimed for dispatch: a
// provider remembers the id from its first attempt, so its Retention counts
// from there. The record shows only its last claim (DispatchedAt); after a
// retry the first is the journal's first entry into DISPATCHING (a claim
// withdrawn with nothing sent counts too, which only shortens the window).
// A journal that cannot be read is a hold: the record stays UNKNOWN.
func (l *Ledger) firstDispatch(ctx context.Context, g coordinator.Grant, rec Record) (time.Time, error) {
	if rec.Attempts <= 1 {
		return rec.DispatchedAt, nil
	}
	resp, err := store.Of(l.c).Txn(ctx, store.TxnRequest{Op: "reconcile", Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(store.Of(l.c).Keys().JournalOperationPrefix(g.Tenant, g.Task, rec.Operation), clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))}})
	if err != nil {
		return time.Time{}, err
	}
	js, err := decodeJournal(resp.Responses[0].GetResponseRange().GetKvs())
	if err != nil {
		return time.Time{}, err
	}
	for _, t := range js {
		if t.To == Dispatching && t.By == StepDispatch {
			return t.At, nil
		}
	}
	return rec.DispatchedAt, nil
}

// currentList reads every record of g's task once g is known current
// (coordinator.Current: a stale grant is refused before anything else).
func (l *Ledger) currentList(ctx context.Context, op string, g coordinator.Grant) ([]Record, error) {
	if err := l.c.Current(ctx, g); err != nil {
		return nil, err
	}
	resp, err := store.Of(l.c).Txn(ctx, store.TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		Then: []clientv3.Op{clientv3.OpGet(store.Of(l.c).Keys().EffectPrefix(g.Tenant, g.Task), clientv3.WithPrefix())}})
	if err != nil {
		return nil, err
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	out := make([]Record, 0, len(kvs))
	for i := range kvs {
		rec, _, err := decodeRecord(kvs[i : i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}
