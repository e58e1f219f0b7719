package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// The fenced design on the real providers: the same steps as fenced.go —
// one promotion intent with a stable id, approved by the commander and
// dispatched only through the ledger's gateway, reconciled after a
// takeover from the topology (pgpromote), then traffic as its own
// operation, revalidated and sent with the approved record as its RFC 2136
// prerequisite (dnsupdate) — with the reference adapters instead of the
// simulated ones.

// realTap is the gateway's side of a reference adapter in the drill: the
// fence read as the call leaves (the sim's sendable), the pause windows,
// the faults that strike at the call, and a look at the servers' own
// records after it (realWorld.watch).
type realTap struct {
	inner   ledger.Adapter
	wk      *realWorker
	promote bool
}

func (t realTap) Kind() string              { return t.inner.Kind() }
func (t realTap) Contract() ledger.Contract { return t.inner.Contract() }

func (t realTap) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	return t.inner.Precondition(ctx, e)
}

func (t realTap) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	wk, w := t.wk, t.wk.w
	w.syncJournal()
	claimWin, residualWin, what := winPromoteClaim, winPromoteResidual, "promotion"
	if !t.promote {
		claimWin, residualWin, what = winTrafficClaim, winTrafficResidual, "traffic change"
	}
	wk.stopAt(claimWin, "after the "+what+"'s dispatch was claimed, before the call left")
	if ev, err := wk.sendable(ctx, call.Operation); err != nil {
		return ev, err
	}
	wk.stopAt(residualWin, "after the gateway's last fence read, before the call")
	kind := "traffic"
	if t.promote {
		kind = "promote"
	}
	w.remote.call(linkMsg{Op: opBeforeCall, S: kind})
	if !t.promote {
		var p dnsupdate.Params
		_ = json.Unmarshal(call.Effect.Params, &p)
		wk.record(Event{Kind: KindCall, Actor: "bind", Effect: "ChangeResourceRecordSets", Epoch: call.Epoch, Operation: call.Operation,
			Value: realName([]string{p.Value}), By: wk.name, Detail: "RFC 2136 UPDATE, prerequisite: the approved record"})
	}
	ev, err := t.inner.Apply(ctx, call)
	w.remote.call(linkMsg{Op: opAfterCall, S: kind, S2: wk.name, N: call.Epoch, S3: call.Operation})
	return ev, err
}

func (t realTap) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	out, ev, err := t.inner.Observe(ctx, rec)
	t.wk.w.remote.call(linkMsg{Op: opWatch})
	return out, ev, err
}

// sendable is the gateway's last check as a call leaves (worker.sendable
// in the sim): the grant read again under its fence.
func (wk *realWorker) sendable(ctx context.Context, operation string) (ledger.Evidence, error) {
	err := wk.w.run.coord.Current(ctx, wk.grant)
	if err == nil {
		wk.record(Event{Kind: KindFenceRead, Operation: operation, Effect: "send", Detail: "grant current as the call leaves"})
		return ledger.Evidence{}, nil
	}
	d := coordinator.DispositionOf(err)
	if d.Class() != coordinator.ClassRefused {
		return ledger.Evidence{}, ledger.Ambiguous(fmt.Errorf("fence check before the call, not sent: %w", err))
	}
	wk.record(Event{Kind: KindRefused, Operation: operation, Effect: "send",
		Detail: string(d) + ": the grant is no longer current as the call leaves; nothing sent to the provider"})
	b, _ := json.Marshal(map[string]string{"gateway": "not sent: " + string(d)})
	return ledger.Evidence{}, ledger.Refused("not sent: "+string(d), ledger.Evidence{Detail: b, At: time.Now()})
}

func (wk *realWorker) fenced() error {
	if err := wk.acquire(); err != nil {
		return err
	}
	p := wk.w.prov
	led, err := ledger.New(wk.w.run.coord,
		ledger.WithAdapters(realTap{inner: p.pg, wk: wk, promote: true}, realTap{inner: p.up, wk: wk}),
		ledger.WithPolling(250*time.Millisecond, time.Second, 8),
		ledger.WithCallTimeout(realCallTimeout),
		ledger.WithLogger(wk.w.run.cfg.Logger))
	if err != nil {
		return err
	}
	l := inProcess{led}
	if err := wk.reconcile(l); err != nil {
		return err
	}
	if err := wk.promote(l); err != nil {
		return err
	}
	if err := wk.traffic(l); err != nil {
		return err
	}
	wk.release()
	return nil
}

// check copies the journal and says whether the worker may go on (the
// sim's worker.check).
func (wk *realWorker) check(op string, err error) error {
	wk.w.syncJournal()
	if err == nil {
		return nil
	}
	switch d := coordinator.DispositionOf(err); d {
	case coordinator.StaleOwner, coordinator.ExpiredOwner, coordinator.GenerationMismatch:
		wk.record(Event{Kind: KindRefused, Effect: op, Detail: string(d) + ": refused at the gateway; the worker stops"})
		return fmt.Errorf("%w: %s refused: %w", errStop, op, err)
	}
	return fmt.Errorf("%s by %s: %w", op, wk.name, err)
}

// hold stops the worker for the incident commander, traffic held.
func (wk *realWorker) hold(reason, format string, args ...any) error {
	wk.w.setHeld(true)
	why := fmt.Sprintf(format, args...)
	wk.record(Event{Kind: KindHold, Effect: reason, Value: wk.w.recordNow(), Detail: why})
	return fmt.Errorf("%w: holds for the commander (%s): %s", errStop, reason, why)
}

// reconcile settles what an earlier owner left, until nothing is UNKNOWN
// (bounded).
func (wk *realWorker) reconcile(l gateway) error {
	for range 10 {
		recs, err := l.Reconcile(wk.w.ctx, wk.grant)
		if err := wk.check("reconcile", err); err != nil {
			return err
		}
		if !slices.ContainsFunc(recs, func(r ledger.Record) bool { return r.State == ledger.Unknown }) {
			return nil
		}
		wk.sleep(500 * time.Millisecond)
	}
	return nil
}

// existing returns the task's records of kind.
func (wk *realWorker) existing(l gateway, kind string) ([]ledger.Record, error) {
	recs, err := l.List(wk.w.ctx, wk.w.run.tenant(wk.w.design), wk.w.task, "")
	if err := wk.check("list", err); err != nil {
		return nil, err
	}
	var out []ledger.Record
	for _, r := range recs {
		if r.Effect.Kind == kind {
			out = append(out, r)
		}
	}
	return out, nil
}

// promote drives the promotion to an end, as fenced.go's promote does.
func (wk *realWorker) promote(l gateway) error {
	ctx, p := wk.w.ctx, wk.w.prov
	for n := 1; n <= promotionIntents; n++ {
		found, err := wk.existing(l, kindPromote)
		if err != nil {
			return err
		}
		rec, adopted := adoptable(found)
		switch {
		case adopted:
			wk.note("adopts promotion %s (%s) from the ledger", rec.Operation, rec.State)
		case len(found) > 0 && found[len(found)-1].State != ledger.Failed:
			rec = found[len(found)-1]
		default:
			e, err := p.pg.Effect(realTarget, maxLoss.String(), policyPromote)
			if err != nil {
				return err
			}
			pre, err := p.pg.Precondition(ctx, e)
			if err != nil {
				return fmt.Errorf("topology before the proposal: %w", err)
			}
			id := "promote/" + wk.w.task
			if n := len(found) + 1; n > 1 {
				id += fmt.Sprintf("/%d", n)
			}
			rec, err = l.Propose(ctx, wk.grant, id, e, pre)
			if err := wk.check("propose", err); err != nil {
				return err
			}
		}
		rec, err = wk.drive(l, rec, approver{name: commander, decide: wk.commanderApprovesReal,
			note: "approve promotion of " + realTarget + " within loss bound " + maxLoss.String()})
		if err == nil && rec.State == ledger.ManualReview {
			rec, err = wk.review(l, rec)
		}
		if err != nil {
			return err
		}
		wk.note("promotion %s ends %s", rec.Operation, rec.State)
		switch rec.State {
		case ledger.Confirmed, ledger.Superseded:
			return nil
		case ledger.ManualReview:
			return wk.hold(holdManualReview, "promotion %s stays in MANUAL_REVIEW: traffic held for the commander", rec.Operation)
		case ledger.Rejected:
			return wk.hold(holdCommanderRefused, "the commander refused promotion %s: traffic held", rec.Operation)
		case ledger.Failed:
			if slices.Equal(wk.w.writers(), []string{realTarget}) {
				return nil
			}
			continue
		}
		return wk.hold(holdManualReview, "promotion %s ends %s", rec.Operation, rec.State)
	}
	return wk.hold(holdManualReview, "no promotion applied after %d intents", promotionIntents)
}

// commanderApprovesReal is the commander's rule on the real topology: the
// target answers as a standby and no other node answers as a writer.
func (wk *realWorker) commanderApprovesReal(rec ledger.Record) (bool, string) {
	wk.step()
	t := wk.w.prov.pg.Topology(wk.w.ctx)
	n, _ := t.Node(realTarget)
	switch {
	case !n.Reachable:
		return false, realTarget + " does not answer: not approved"
	case !n.InRecovery:
		return false, realTarget + " is a writer already: nothing to approve"
	case len(t.Writers()) > 0:
		return false, fmt.Sprintf("%v answers as writer: not approved (fence it first)", t.Writers())
	}
	return true, fmt.Sprintf("approves promotion of %s: a standby on timeline %d, no writer answers", realTarget, n.Timeline)
}

// review is the commander's decision on a record in MANUAL_REVIEW, from
// the servers' own records: CONFIRMED when the standby's log shows a
// pg_promote under the operation's id and the target is the writer;
// FAILED when the target is still a standby, no pg_promote under the id is
// logged, and the dispatch is older than the ledger's call bound plus the
// promote's wait (nothing of it can still be in flight). Otherwise it
// looks again, and in the end decides nothing.
func (wk *realWorker) review(l gateway, rec ledger.Record) (ledger.Record, error) {
	w := wk.w
	wk.record(Event{Kind: KindNote, Actor: "commander", Operation: rec.Operation,
		Detail: "reviews " + rec.Operation + " in MANUAL_REVIEW: the topology was inconclusive"})
	kind := realEffect(rec.Operation)
	for range 60 {
		wk.sleep(500 * time.Millisecond)
		to, ev, why := wk.verdict(rec, kind)
		if to == "" {
			continue
		}
		r, err := l.Resolve(w.ctx, wk.grant, rec.Operation, to, ev, commander, why)
		if err == nil {
			wk.record(Event{Kind: KindDecision, Actor: commander, Operation: rec.Operation, Effect: decisionResolve, Value: ReasonEvidence, To: string(to), Detail: why})
		}
		return r, wk.check("resolve", err)
	}
	wk.record(Event{Kind: KindDecision, Actor: commander, Operation: rec.Operation, Effect: decisionHold, Value: ReasonNoEvidence,
		To: string(ledger.ManualReview), Detail: "the commander found no evidence either way: it stays in MANUAL_REVIEW"})
	return rec, nil
}

// verdict is the commander's reading of the servers on rec.
func (wk *realWorker) verdict(rec ledger.Record, kind string) (ledger.State, ledger.Evidence, string) {
	w := wk.w
	age := time.Since(rec.DispatchedAt)
	quiet := age > realCallTimeout+realPromoteWait
	if kind == "promote" {
		t := w.prov.pg.Topology(w.ctx)
		n, _ := t.Node(realTarget)
		logged := w.promotesLogged(rec.Operation)
		d, _ := json.Marshal(map[string]any{"statements_under_id": logged, "target": n})
		switch {
		case n.Reachable && !n.InRecovery && logged > 0:
			return ledger.Confirmed, ledger.Evidence{ProviderIDs: []string{fmt.Sprintf("%s@timeline-%d", realTarget, n.Timeline)}, Detail: d, At: time.Now()},
				fmt.Sprintf("the standby's log shows pg_promote under %s and %s is the writer on timeline %d", rec.Operation, realTarget, n.Timeline)
		case n.Reachable && n.InRecovery && logged == 0 && quiet:
			return ledger.Failed, ledger.Evidence{Detail: d, At: time.Now()},
				fmt.Sprintf("no pg_promote under %s in the standby's log %v after its dispatch, and %s is still a standby: it never applied", rec.Operation, age.Round(time.Second), realTarget)
		}
		return "", ledger.Evidence{}, ""
	}
	var p dnsupdate.Params
	_ = json.Unmarshal(rec.Effect.Params, &p)
	rr, err := w.prov.up.Read(w.ctx, realRecord, "A")
	if err != nil {
		return "", ledger.Evidence{}, ""
	}
	d, _ := json.Marshal(rr)
	var approved dnsupdate.RRset
	_ = json.Unmarshal(rec.Precondition.Detail, &approved)
	switch {
	case slices.Equal(rr.Values, []string{p.Value}):
		return "", ledger.Evidence{}, "" // the reconciler's history read decides an applied change
	case quiet && slices.Equal(rr.Values, approved.Values):
		return ledger.Failed, ledger.Evidence{Detail: d, At: time.Now(), ProviderIDs: []string{fmt.Sprintf("%s serial %d", w.prov.dns.Zone, rr.Serial)}},
			fmt.Sprintf("the record still holds the approved %v %v after the dispatch: the update never applied, and none can land now", approved.Values, age.Round(time.Second))
	}
	return "", ledger.Evidence{}, ""
}

// drive takes one operation as far as it goes (fenced.go's drive, in real
// time): approval, dispatch through the gateway (a hold while the provider
// cannot be observed: tried again), reconciliation of an unknown outcome.
func (wk *realWorker) drive(l gateway, rec ledger.Record, by approver) (ledger.Record, error) {
	// decided records the commander's decision as the world's: on real
	// providers the commander still runs beside the built-in worker (see
	// docs/drill.md), by the same rules, and no other design runs there.
	decided := func(decision, reason, why string, to ledger.State) {
		wk.record(Event{Kind: KindDecision, Actor: by.name, Operation: rec.Operation, Effect: decision, Value: reason, To: string(to), Detail: why})
	}
	ctx := wk.w.ctx
	holds := 0
	for range 20 {
		var err error
		op := ""
		switch rec.State {
		case ledger.Proposed:
			if by.decide != nil {
				if ok, why := by.decide(rec); !ok {
					rec, err = l.Reject(ctx, wk.grant, rec.Operation, by.name, why)
					if err := wk.check("reject", err); err != nil {
						return rec, err
					}
					decided(decisionReject, ReasonTarget, why, ledger.Rejected)
					continue
				}
			}
			op = "authorize"
			rec, err = l.Authorize(ctx, wk.grant, rec.Operation, ledger.Approval{Approver: by.name,
				ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, At: time.Now(), Note: by.note})
			if err == nil {
				reason := ReasonRule
				if rec.Effect.Kind == kindTraffic && wk.resumedFrom != "" {
					reason = ReasonHoldingAction
				}
				decided(decisionApprove, reason, by.note, ledger.Authorized)
			}
		case ledger.Authorized:
			wk.step()
			if rec.Effect.Kind == kindPromote && wk.first {
				wk.w.remote.call(linkMsg{Op: opStopStandby})
			}
			op = "dispatch"
			var r ledger.Record
			r, err = l.Dispatch(ctx, wk.grant, rec.Operation)
			if err != nil && coordinator.DispositionOf(err).Class() != coordinator.ClassRefused && holds < 40 {
				holds++
				wk.note("dispatch held (%s): the provider cannot show the world now; tries again", coordinator.DispositionOf(err))
				wk.w.syncJournal()
				wk.sleep(500 * time.Millisecond)
				continue
			}
			if r.Operation != "" {
				rec = r
			}
		case ledger.Dispatching, ledger.Unknown:
			if err := wk.reconcile(l); err != nil {
				return rec, err
			}
			op = "read"
			rec, _, err = l.Record(ctx, rec.Tenant, rec.Task, rec.Operation)
			if err == nil && (rec.State == ledger.Unknown || rec.State == ledger.Dispatching) {
				return rec, wk.check(op, nil)
			}
		default:
			return rec, nil
		}
		if err := wk.check(op, err); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// approver is who approves an operation's exact digests in the
// real-provider world, and, for a person with a rule, the decision (nil:
// approve).
type approver struct {
	name, note string
	decide     func(ledger.Record) (bool, string)
}

// lastLeftReal is the place the workflow last left the record at: the
// newest traffic operation that may have reached the server, else the
// original writer.
func lastLeftReal(found []ledger.Record) string {
	for i := len(found) - 1; i >= 0; i-- {
		switch found[i].State {
		case ledger.Confirmed, ledger.Dispatching, ledger.Unknown, ledger.ManualReview:
			var p dnsupdate.Params
			if json.Unmarshal(found[i].Effect.Params, &p) == nil {
				return realName([]string{p.Value})
			}
		}
	}
	return realOriginal
}

// editedOutOfBand holds for the commander when the record is not what the
// workflow last left it (fenced.go's rule: a maintenance-page edit is
// resumed from after the commander confirms it; any other stands).
func (wk *realWorker) editedOutOfBand(found []ledger.Record) error {
	now, want := wk.w.recordNow(), lastLeftReal(found)
	if now == want || now == wk.resumedFrom {
		return nil
	}
	held := wk.hold(holdOperatorEdit, "%s was edited out of band to %s (the workflow left %s): not overwritten; traffic held for the commander", realRecord, now, want)
	if now != maintenance {
		wk.record(Event{Kind: KindDecision, Actor: commander, Effect: decisionHold, Value: ReasonOperatorTookOver, Detail: fmt.Sprintf(
			"the operator pointed %s at %s by hand: a routing decision that stands until a person decides otherwise", realRecord, now)})
		return held
	}
	wk.sleep(wk.w.plan.resumeAfter)
	wk.w.setHeld(false)
	wk.resumedFrom = now
	wk.record(Event{Kind: KindResume, Actor: "commander", Value: now, Detail: fmt.Sprintf(
		"the operator confirms %s was a holding action: the workflow goes on from it", now)})
	return nil
}

// settledWriter waits (bounded) until exactly one node answers as writer.
func (wk *realWorker) settledWriter() (string, error) {
	for range 40 {
		if ws := wk.w.writers(); len(ws) == 1 {
			return ws[0], nil
		}
		wk.sleep(250 * time.Millisecond)
	}
	return "", wk.hold(holdManualReview, "no single writer answers: traffic held")
}

// traffic points the record at the writer as its own operation (fenced.go's
// traffic), respecting an operator's edit, and verifies it.
func (wk *realWorker) traffic(l gateway) error {
	ctx, p := wk.w.ctx, wk.w.prov
	for range trafficAttempts {
		found, err := wk.existing(l, kindTraffic)
		if err != nil {
			return err
		}
		var rec ledger.Record
		if len(found) > 0 {
			rec = found[len(found)-1]
		}
		if rec.State == ledger.ManualReview {
			if rec, err = wk.review(l, rec); err != nil {
				return err
			}
			if rec.State == ledger.ManualReview {
				return wk.hold(holdManualReview, "traffic %s stays in MANUAL_REVIEW", rec.Operation)
			}
			continue
		}
		if err := wk.editedOutOfBand(found); err != nil {
			return err
		}
		switch {
		case rec.State != "" && !rec.State.Terminal():
			wk.note("adopts traffic operation %s (%s)", rec.Operation, rec.State)
		case rec.State == ledger.Confirmed:
			if done, err := wk.verify(found); done || err != nil {
				return err
			}
			fallthrough
		default:
			writer, err := wk.settledWriter()
			if err != nil {
				return err
			}
			e, err := p.up.Effect(realRecord, "A", realAddr[writer], 60, policyTraffic)
			if err != nil {
				return err
			}
			pre, err := p.up.Precondition(ctx, e)
			if err != nil {
				return fmt.Errorf("record before the proposal: %w", err)
			}
			rec, err = l.Propose(ctx, wk.grant, fmt.Sprintf("traffic/%s/%d", wk.w.task, len(found)+1), e, pre)
			if err := wk.check("propose", err); err != nil {
				return err
			}
		}
		if _, err := wk.drive(l, rec, approver{name: "traffic-policy", note: "traffic follows the confirmed writer"}); err != nil {
			return err
		}
	}
	found, err := wk.existing(l, kindTraffic)
	if err != nil {
		return err
	}
	if done, err := wk.verify(found); err != nil || !done {
		wk.note("traffic does not follow the writer after %d operations; stops for review", trafficAttempts)
		return err
	}
	return nil
}

// verify reads the record and the writer from their servers; when they
// agree the incident is closed.
func (wk *realWorker) verify(found []ledger.Record) (bool, error) {
	record, writers := wk.w.recordNow(), wk.w.writers()
	if len(writers) == 1 && record == writers[0] {
		wk.note("verified: %s points at the writer %s; incident closed", realRecord, record)
		return true, nil
	}
	if err := wk.editedOutOfBand(found); err != nil {
		return false, err
	}
	wk.note("verify: %s points at %s, the writers are %v", realRecord, record, writers)
	return false, nil
}
