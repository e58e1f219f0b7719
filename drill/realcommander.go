package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// The world's side of a fenced real trial, in the drill's process: the
// incident commander (an approver and operator identity of the gateway,
// with a certificate of its own — never the worker's process), and the
// watch on the servers that fills the trajectory from their own records.
// Every realCommanderTick it reads the servers (the standby's statement
// log, each node's role, the zone), copies the ledger journal, fires the
// faults that strike at the world's moments, and decides what waits for
// it, by the rules of the simulated commander (commander.go) read on the
// real servers:
//
//   - a promotion is approved while the target answers as a standby and no
//     node answers as a writer (realPromotionRule); else refused
//     (ReasonTarget).
//   - a traffic change is approved only toward the single writer (else
//     ReasonNotWriter); over an operator's maintenance page once the
//     commander confirmed it with the operator (ReasonHoldingAction); over
//     the operator's static fallback it is refused: the operator took the
//     record over (ReasonOperatorTookOver).
//   - a record in MANUAL_REVIEW is resolved on the servers' evidence
//     (realVerdict), looked for every realReviewLook, at most
//     realReviewLooks times; then it stays there (ReasonNoEvidence).

const (
	realCommanderTick = 100 * time.Millisecond
	realReviewLook    = 500 * time.Millisecond
	realReviewLooks   = 60
)

// realCommander is one fenced real trial's commander.
type realCommander struct {
	w *realWorld
	c *client.Client
	// decided: proposals decided (or that moved on); looks and lookedAt:
	// the commander's looks at each MANUAL_REVIEW; confirmed: the
	// operator's maintenance page was confirmed as a holding action.
	decided   map[string]bool
	looks     map[string]int
	lookedAt  map[string]time.Time
	confirmed bool
}

// runCommander is the world's loop of a fenced real trial, until stop.
func (w *realWorld) runCommander(c *client.Client, stop <-chan struct{}) {
	rc := &realCommander{w: w, c: c, decided: map[string]bool{}, looks: map[string]int{}, lookedAt: map[string]time.Time{}}
	t := time.NewTicker(realCommanderTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		rc.round()
	}
}

// watchAll reads what the servers recorded since the last look, and
// reports the promote's connection cut when it was.
func (w *realWorld) watchAll() {
	w.provMu.Lock()
	defer w.provMu.Unlock()
	w.watch("", 0, "")
	if w.plan.cut && w.prov.proxy.Cuts() > w.cutsBefore && w.once("cut") {
		w.add(Event{Kind: KindFault, Actor: "network", Effect: string(FaultResponseDropped),
			Detail: "the promote's connection was cut after send: the server ran it, its answer is lost"})
	}
}

// round is one look of the world: the servers, the journal, the faults at
// their moments, and the commander's decisions.
func (rc *realCommander) round() {
	w := rc.w
	w.watchAll()
	w.syncJournal()
	recs, err := w.journal.List(context.WithoutCancel(w.ctx), w.run.tenant(w.design), w.task, "")
	if err != nil {
		w.fail(fmt.Errorf("the commander's read of the ledger: %w", err))
		return
	}
	for _, rec := range recs {
		if rec.Effect.Kind == dnsupdate.Kind && (rec.State == ledger.Authorized || rec.State == ledger.Dispatching) &&
			w.plan.operatorEdit && w.plan.operatorAtCall && w.once("operator") {
			// The operator's edit as the first traffic change is dispatched.
			w.provMu.Lock()
			w.operatorEdit()
			w.provMu.Unlock()
		}
	}
	for _, rec := range recs {
		switch {
		case rec.State == ledger.Proposed && !rc.decided[rec.Operation]:
			rc.decide(rec)
			return
		case rec.State == ledger.ManualReview:
			rc.review(rec)
		}
	}
}

func (rc *realCommander) note(operation, format string, args ...any) {
	rc.w.add(Event{Kind: KindNote, Actor: commander, Operation: operation, Detail: fmt.Sprintf(format, args...)})
}

// decide is the commander's decision on a proposal, made on the servers
// as they are now, after the time a person takes.
func (rc *realCommander) decide(rec ledger.Record) {
	w := rc.w
	rc.sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
	cur, _, err := w.journal.Record(context.WithoutCancel(w.ctx), rec.Tenant, rec.Task, rec.Operation)
	if err != nil || cur.State != ledger.Proposed {
		return
	}
	if cur.Effect.Kind != dnsupdate.Kind {
		ok, why := realPromotionRule(w.prov.pg.Topology(context.WithoutCancel(w.ctx)))
		if ok {
			rc.call(cur, decisionApprove, ReasonRule, why)
		} else {
			rc.call(cur, decisionReject, ReasonTarget, why)
		}
		return
	}
	value, writer := realTrafficValue(cur), oneWriter(w.writers())
	switch {
	case writer == "" || value != writer:
		rc.call(cur, decisionReject, ReasonNotWriter, fmt.Sprintf("traffic to %s refused: the writers are %v", value, w.writers()))
		return
	case w.recordByOperator():
		now := w.recordNow()
		if now != maintenance {
			rc.call(cur, decisionReject, ReasonOperatorTookOver, fmt.Sprintf("the operator pointed %s at %s by hand: a routing decision that stands", realRecord, now))
			return
		}
		if !rc.confirmed {
			rc.note(cur.Operation, "the record is the operator's %s: confirms with the operator that it is a holding action", now)
			rc.sleep(w.plan.resumeAfter)
			rc.confirmed = true
			return // decided on the next round, on the world re-read
		}
		rc.call(cur, decisionApprove, ReasonHoldingAction, fmt.Sprintf("the operator confirms %s was a holding action: traffic may go on from it to the writer %s", now, writer))
		return
	}
	rc.call(cur, decisionApprove, ReasonRule, "traffic follows the writer "+writer)
}

// call makes one decision at the gateway's approver API under the
// commander's certificate, and records it. While nobody holds the task
// (the gateway decides under its current owner) it is tried on a later
// round.
func (rc *realCommander) call(rec ledger.Record, decision, reason, why string) {
	w := rc.w
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
	defer cancel()
	var err error
	to := ledger.Authorized
	switch decision {
	case decisionApprove:
		_, err = rc.c.Authorize(ctx, rec.Tenant, rec.Task, rec.Operation, ledger.Approval{ParamsDigest: rec.ParamsDigest,
			PreconditionDigest: rec.Precondition.Digest, At: time.Now(), Note: why})
	case decisionReject:
		to = ledger.Rejected
		_, err = rc.c.Reject(ctx, rec.Tenant, rec.Task, rec.Operation, reason+": "+why)
	}
	w.syncJournal()
	if err == nil {
		rc.decided[rec.Operation] = true
		w.add(Event{Kind: KindDecision, Actor: commander, Operation: rec.Operation, Effect: decision, Value: reason, To: string(to), Detail: why})
		return
	}
	switch coordinator.DispositionOf(err) {
	case coordinator.ExpiredOwner, coordinator.StaleOwner, coordinator.GenerationMismatch:
		rc.note(rec.Operation, "%s of %s waits for an owner of the task (%s)", decision, rec.Operation, coordinator.DispositionOf(err))
		return
	}
	if cur, _, rerr := w.journal.Record(ctx, rec.Tenant, rec.Task, rec.Operation); rerr == nil && cur.State != rec.State {
		rc.decided[rec.Operation] = true // it moved on: no decision needed
		return
	}
	w.fail(fmt.Errorf("the commander's %s of %s: %w", decision, rec.Operation, err))
}

// review is one look of the commander at a record in MANUAL_REVIEW, every
// realReviewLook: a decision on the servers' evidence, or, after
// realReviewLooks looks without one, none (ReasonNoEvidence).
func (rc *realCommander) review(rec ledger.Record) {
	w, op := rc.w, rec.Operation
	if rc.looks[op] > realReviewLooks || time.Since(rc.lookedAt[op]) < realReviewLook {
		return
	}
	if rc.looks[op] == 0 {
		rc.note(op, "reviews %s in MANUAL_REVIEW: the servers' evidence was inconclusive", op)
	}
	rc.looks[op]++
	rc.lookedAt[op] = time.Now()
	if rc.looks[op] > realReviewLooks {
		w.add(Event{Kind: KindDecision, Actor: commander, Operation: op, Effect: decisionHold, Value: ReasonNoEvidence,
			To: string(ledger.ManualReview), Detail: "the commander found no evidence either way: it stays in MANUAL_REVIEW"})
		return
	}
	to, ev, why := w.realVerdict(rec)
	if to == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
	defer cancel()
	_, err := rc.c.Resolve(ctx, rec.Tenant, rec.Task, op, to, ev, why)
	w.syncJournal()
	switch {
	case err == nil:
		rc.looks[op] = realReviewLooks + 1
		w.add(Event{Kind: KindDecision, Actor: commander, Operation: op, Effect: decisionResolve, Value: ReasonEvidence, To: string(to), Detail: why})
	case coordinator.DispositionOf(err).Class() == coordinator.ClassRefused:
		rc.note(op, "resolve of %s waits for an owner of the task (%s)", op, coordinator.DispositionOf(err))
	default:
		w.fail(fmt.Errorf("the commander's resolve of %s: %w", op, err))
	}
}

// sleep waits d of real time (or until the trial's end).
func (rc *realCommander) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-rc.w.ctx.Done():
	}
}

// realVerdict is the commander's reading of the servers on rec in
// MANUAL_REVIEW: CONFIRMED when the standby's log shows a pg_promote under
// the operation's id and the target is the writer; FAILED when the target
// is still a standby, no pg_promote under the id is logged, and the
// dispatch is older than the ledger's call bound plus the promote's wait
// (nothing of it can still be in flight). A traffic change: FAILED when
// the record still holds the approved value that long after. Otherwise
// nothing ("").
func (w *realWorld) realVerdict(rec ledger.Record) (ledger.State, ledger.Evidence, string) {
	ctx := context.WithoutCancel(w.ctx)
	age := time.Since(rec.DispatchedAt)
	quiet := age > realCallTimeout+realPromoteWait
	if rec.Effect.Kind != dnsupdate.Kind {
		t := w.prov.pg.Topology(ctx)
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
	rr, err := w.prov.up.Read(ctx, realRecord, "A")
	if err != nil {
		return "", ledger.Evidence{}, ""
	}
	d, _ := json.Marshal(rr)
	var approved dnsupdate.RRset
	_ = json.Unmarshal(rec.Precondition.Detail, &approved)
	if quiet && !slices.Equal(rr.Values, []string{p.Value}) && slices.Equal(rr.Values, approved.Values) {
		return ledger.Failed, ledger.Evidence{Detail: d, At: time.Now(), ProviderIDs: []string{fmt.Sprintf("%s serial %d", w.prov.dns.Zone, rr.Serial)}},
			fmt.Sprintf("the record still holds the approved %v %v after the dispatch: the update never applied, and none can land now", approved.Values, age.Round(time.Second))
	}
	return "", ledger.Evidence{}, "" // an applied change: the reconciler's history read decides it
}

// creditTraffic is who changed the record to value through the gateway:
// the newest traffic operation of the journal toward it that may have
// reached the server, its dispatch's epoch and the worker that held it.
func (w *realWorld) creditTraffic(value string) (by string, epoch int64, operation string) {
	recs, err := w.journal.List(context.WithoutCancel(w.ctx), w.run.tenant(w.design), w.task, "")
	if err != nil {
		return "", 0, ""
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Effect.Kind != dnsupdate.Kind || realTrafficValue(r) != value {
			continue
		}
		switch r.State {
		case ledger.Dispatching, ledger.Confirmed, ledger.Unknown, ledger.ManualReview:
			return w.ownerOf(r.Epoch), r.Epoch, r.Operation
		}
	}
	return "", 0, ""
}

// recordByOperator: the record's last change was the operator's.
func (w *realWorld) recordByOperator() bool {
	w.provMu.Lock()
	defer w.provMu.Unlock()
	return w.recordBy == operatorCaller.actor
}
