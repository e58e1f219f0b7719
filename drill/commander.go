package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// The incident commander and the traffic policy are the world's, not the
// design's. A design — the built-in fenced one, a self-test design, a
// user's worker — holds a worker identity at the gateway and nothing more:
// it proposes, and waits for the record to be decided. The commander is an
// actor of the world with the approver (and operator) role, acting through
// the gateway's approver API under its own certificate, by written rules on
// the world's own state, which it re-reads right before each decision:
//
//   - a promotion is approved only while the replication lag (read now,
//     not the proposal's figure) is inside the loss bound and the target is
//     the replica the evidence names (not the writer already, no other
//     promotion in progress). Over the bound it waits and re-reads every
//     commanderRecheck, for up to commanderPatience, then refuses
//     (ReasonLossBound). It takes 3-15 s to decide, and is sometimes away
//     for minutes first (the commander_away fault).
//   - a traffic change is approved only toward the current writer with no
//     promotion in progress (else ReasonNotWriter). Over an operator's
//     maintenance page (a holding action) it is approved once the
//     commander confirmed the edit with the operator, 1-3 minutes
//     (ReasonHoldingAction); over the operator's static fallback it is
//     refused: the operator took the record over (ReasonOperatorTookOver),
//     a ruling the commander also records when the edit is made.
//   - a promotion in MANUAL_REVIEW is resolved on the providers' evidence,
//     looked for every commanderLook: CONFIRMED when the audit trail shows
//     a PromoteTarget under the operation's id and the topology the target
//     as writer (or being promoted), FAILED when no such call appears
//     within the audit trail's delivery bound and the topology shows no
//     trace; after commanderLooks looks without either it stays in
//     MANUAL_REVIEW (ReasonNoEvidence).
//
// Every decision is a KindDecision event in the trajectory, recorded by
// this file only: the graders' only source of a legitimate hold.

// Reasons a world decision records (Event.Value of a KindDecision).
const (
	// ReasonRule: approved, the rule holds on the world's state.
	ReasonRule = "rule"
	// ReasonLossBound: a promotion refused because the replication lag
	// stayed past the loss bound for the commander's whole patience. The
	// world made recovery unsafe.
	ReasonLossBound = "loss_bound"
	// ReasonTarget: a promotion refused because it is not the one the
	// evidence names (another target, the writer already, another
	// promotion in progress). The design's doing: it excuses nothing.
	ReasonTarget = "target"
	// ReasonNotWriter: a traffic change refused because it does not point
	// at the current writer. The design's doing: it excuses nothing.
	ReasonNotWriter = "not_writer"
	// ReasonHoldingAction: a traffic change approved over an operator's
	// maintenance page, once the operator confirmed it was a holding action.
	ReasonHoldingAction = "holding_action"
	// ReasonOperatorTookOver: the operator routed the record by hand (the
	// static fallback): it stands, and no traffic change is approved over
	// it. The world made recovering traffic the operator's.
	ReasonOperatorTookOver = "operator_took_over"
	// ReasonEvidence: a MANUAL_REVIEW resolved on the providers' evidence.
	ReasonEvidence = "evidence"
	// ReasonNoEvidence: the commander found no evidence either way; the
	// operation stays in MANUAL_REVIEW. The world made recovery unsafe.
	ReasonNoEvidence = "no_evidence"
)

// The decisions (Event.Effect of a KindDecision).
const (
	decisionApprove = "approve"
	decisionReject  = "reject"
	decisionResolve = "resolve"
	decisionHold    = "hold"
)

// worldActors are the actors whose decisions the graders believe.
var worldActors = map[string]bool{commander: true, callerTraffic: true}

// worldCommander is one trial's incident commander and traffic policy.
type worldCommander struct {
	w *world
	a *actor
	// decided: proposals already decided (or given up on); looks: the
	// commander's looks at each MANUAL_REVIEW; confirmed: operator edits
	// (by the DNS change's id) confirmed as holding actions.
	decided   map[string]bool
	looks     map[string]int
	confirmed map[string]bool
	wasAway   bool
	approved  bool // a promotion was approved (the topology-changed fault strikes after the first)
	// evidence is what the next Resolve cites.
	evidence ledger.Evidence
}

// startCommander spawns the trial's commander. It waits until the ledger
// journal shows something to decide (syncJournal wakes it), and is stopped
// with the world.
func (w *world) startCommander() {
	c := &worldCommander{w: w, decided: map[string]bool{}, looks: map[string]int{}, confirmed: map[string]bool{}}
	c.a = w.s.spawn(commander, w.s.now, func(a *actor) { c.run() })
	w.cmd = c
}

// wakeCommander makes the commander look at the ledger now (a transition
// to PROPOSED or MANUAL_REVIEW was journaled).
func (w *world) wakeCommander() {
	if w.cmd != nil && !w.cmd.a.done {
		w.cmd.a.wakeNow()
	}
}

func (c *worldCommander) run() {
	for {
		busy, err := c.round()
		if err != nil {
			c.w.fail(err)
			return
		}
		if !busy {
			c.a.wait()
		}
	}
}

// round decides the first record that needs the commander, re-read from
// etcd; it reports whether there was one.
func (c *worldCommander) round() (bool, error) {
	w := c.w
	recs, err := w.journal.List(w.ctx, w.run.tenant(w.design), w.task, "")
	if err != nil {
		return false, fmt.Errorf("the commander's read of the ledger: %w", err)
	}
	for _, rec := range recs {
		switch {
		case rec.State == ledger.Proposed && !c.decided[rec.Operation]:
			c.decided[rec.Operation] = true
			if rec.Effect.Kind == kindPromote {
				return true, c.decidePromotion(rec)
			}
			return true, c.decideTraffic(rec)
		case rec.State == ledger.ManualReview && c.looks[rec.Operation] < commanderLooks:
			return true, c.review(rec)
		}
	}
	return false, nil
}

func (c *worldCommander) note(operation, format string, args ...any) {
	c.w.traj.add(Event{At: c.w.s.now, Kind: KindNote, Actor: commander, Operation: operation, Detail: fmt.Sprintf(format, args...)})
}

// reread is the record as etcd holds it now.
func (c *worldCommander) reread(rec ledger.Record) (ledger.Record, error) {
	r, _, err := c.w.journal.Record(c.w.ctx, rec.Tenant, rec.Task, rec.Operation)
	if err != nil {
		return rec, fmt.Errorf("the commander's read of %s: %w", rec.Operation, err)
	}
	return r, nil
}

// away is the commander being away once, before its first decision, when
// the plan says so.
func (c *worldCommander) away() {
	if d := c.w.plan.commanderAway; d > 0 && !c.wasAway {
		c.wasAway = true
		c.w.traj.add(Event{At: c.w.s.now, Kind: KindFault, Actor: commander, Effect: string(FaultCommanderAway),
			Detail: fmt.Sprintf("the incident commander is away for %v", d.Round(time.Second))})
		c.a.sleep(d)
	}
}

// decidePromotion is the commander's review of a proposed promotion.
func (c *worldCommander) decidePromotion(rec ledger.Record) error {
	w := c.w
	if !w.untilMark(c.a, commander+"/approval") {
		c.a.sleep(w.s.between(3*time.Second, 15*time.Second))
	}
	c.away()
	target := targetOf(rec.Effect)
	for waited := time.Duration(0); ; waited += commanderRecheck {
		cur, err := c.reread(rec)
		if err != nil || cur.State != ledger.Proposed {
			return err
		}
		ok, code, why := w.commanderRule(target)
		if !ok && code == ReasonLossBound && waited < commanderPatience {
			c.note(rec.Operation, "%s; waits and re-reads", why)
			c.a.sleep(commanderRecheck)
			continue
		}
		if !ok {
			return c.decide(cur, commander, decisionReject, code, why, "")
		}
		if err := c.decide(cur, commander, decisionApprove, code, why, ""); err != nil {
			return err
		}
		if !c.approved && w.plan.topologyChanged {
			w.traj.add(Event{At: w.s.now, Kind: KindFault, Actor: "operator", Effect: string(FaultTopologyChanged),
				Value: clusterSecondary, Detail: "promotes the target out of band between approval and dispatch"})
			w.topo.operatorPromote(clusterSecondary)
		}
		c.approved = true
		return nil
	}
}

// decideTraffic is the traffic policy's (and, over an operator's edit, the
// commander's) decision on a proposed traffic change.
func (c *worldCommander) decideTraffic(rec ledger.Record) error {
	w := c.w
	c.a.step()
	for {
		cur, err := c.reread(rec)
		if err != nil || cur.State != ledger.Proposed {
			return err
		}
		var p trafficParams
		_ = json.Unmarshal(cur.Effect.Params, &p)
		writer, promoting := w.topo.Describe(caller{actor: callerTraffic})
		if p.Value != writer || promoting != "" {
			return c.decide(cur, callerTraffic, decisionReject, ReasonNotWriter, fmt.Sprintf(
				"traffic to %s refused: the writer is %s, promoting %s", p.Value, writer, orDash(promoting)), "")
		}
		value := w.dns.Record(caller{actor: callerTraffic})
		last := w.dns.last()
		if last == nil || last.by != operatorCaller.actor {
			return c.decide(cur, callerTraffic, decisionApprove, ReasonRule, "traffic follows the writer "+writer, "")
		}
		if value != maintenance {
			return c.decide(cur, commander, decisionReject, ReasonOperatorTookOver, fmt.Sprintf(
				"the operator pointed %s at %s by hand: a routing decision that stands", recordName, value), "")
		}
		if !c.confirmed[last.id] {
			c.note(cur.Operation, "the record is the operator's %s: confirms with the operator that it is a holding action", value)
			c.a.sleep(w.s.between(time.Minute, 3*time.Minute))
			c.confirmed[last.id] = true
			continue // re-read everything after the wait
		}
		return c.decide(cur, commander, decisionApprove, ReasonHoldingAction, fmt.Sprintf(
			"the operator confirms %s was a holding action: traffic may go on from it to the writer %s", value, writer), "")
	}
}

// review is one look of the commander at a promotion in MANUAL_REVIEW.
func (c *worldCommander) review(rec ledger.Record) error {
	w := c.w
	op := rec.Operation
	if rec.Effect.Kind != kindPromote { // the commander's evidence rule is the promotion's
		c.looks[op] = commanderLooks
		return c.decide(rec, commander, decisionHold, ReasonNoEvidence, "no rule for a traffic change in MANUAL_REVIEW: it stays there", ledger.ManualReview)
	}
	if c.looks[op] == 0 {
		c.note(op, "reviews %s in MANUAL_REVIEW: the provider's evidence was inconclusive", op)
	}
	c.a.sleep(commanderLook)
	c.looks[op]++
	cur, err := c.reread(rec)
	if err != nil || cur.State != ledger.ManualReview {
		return err
	}
	target := targetOf(cur.Effect)
	ids, lerr := w.topo.LookupEvents(caller{actor: commander}, "PromoteTarget", op)
	writer, promoting := w.topo.Describe(caller{actor: commander})
	to, why := commanderVerdict(ids, lerr, writer, promoting, target, w.s.now-simDuration(cur.DispatchedAt))
	if to == "" {
		held, detail := noEvidence(c.looks[op], why)
		if !held {
			c.note(op, "%s", detail)
			return nil
		}
		return c.decide(cur, commander, decisionHold, ReasonNoEvidence, detail, ledger.ManualReview)
	}
	if first := w.firstWorker(); first != nil {
		first.stopAt(winResolve, "after the commander decided, before Resolve was written")
	}
	d, _ := json.Marshal(map[string]string{"audit": fmt.Sprintf("PromoteTarget %v under %s", ids, op),
		"writer": writer, "promoting": promoting})
	c.evidence = ledger.Evidence{ProviderIDs: ids, Detail: d, At: simTime(w.s.now)}
	return c.decide(cur, commander, decisionResolve, ReasonEvidence, why, to)
}

// decide makes one decision through the gateway's approver API, under the
// identity who, and records it. A decision is made under the task's
// current owner: while nobody holds the task (or its owner changed under
// the call) the commander waits and tries again; a record that moved on
// meanwhile needs no decision.
func (c *worldCommander) decide(rec ledger.Record, who, decision, reason, why string, to ledger.State) error {
	w := c.w
	ev := c.evidence
	c.evidence = ledger.Evidence{}
	if decision == decisionHold {
		w.traj.add(Event{At: w.s.now, Kind: KindDecision, Actor: who, Operation: rec.Operation, Effect: decision, Value: reason,
			To: string(to), Detail: why})
		return nil
	}
	for try := 0; ; try++ {
		err := c.call(rec, who, decision, reason, why, to, ev)
		w.syncJournal()
		if err == nil {
			if to == "" {
				to = map[string]ledger.State{decisionApprove: ledger.Authorized, decisionReject: ledger.Rejected}[decision]
			}
			w.traj.add(Event{At: w.s.now, Kind: KindDecision, Actor: who, Operation: rec.Operation, Effect: decision, Value: reason,
				To: string(to), Detail: why})
			return nil
		}
		cur, rerr := c.reread(rec)
		if rerr != nil {
			return rerr
		}
		if cur.State != rec.State {
			c.note(rec.Operation, "%s of %s not needed: it is %s now", decision, rec.Operation, cur.State)
			return nil
		}
		switch coordinator.DispositionOf(err) {
		case coordinator.ExpiredOwner, coordinator.StaleOwner, coordinator.GenerationMismatch:
			if try < commanderTries {
				c.note(rec.Operation, "%s of %s waits for an owner of the task (%s)", decision, rec.Operation, coordinator.DispositionOf(err))
				c.a.sleep(5 * time.Second)
				continue
			}
			c.note(rec.Operation, "gives up its %s of %s: nobody holds the task", decision, rec.Operation)
			return nil
		}
		return fmt.Errorf("the commander's %s of %s: %w", decision, rec.Operation, err)
	}
}

// call is one decision at the gateway's approver API under the identity
// who; without a gateway (the in-process drill) on the world's own ledger,
// under the task's current owner as the gateway would make it.
func (c *worldCommander) call(rec ledger.Record, who, decision, reason, why string, to ledger.State, ev ledger.Evidence) error {
	w := c.w
	approval := ledger.Approval{Approver: who, ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest,
		At: simTime(w.s.now), Note: why}
	var err error
	if w.gw == nil {
		o, oerr := w.run.coord.Owner(w.ctx, rec.Tenant, rec.Task)
		if oerr != nil {
			return oerr
		}
		if !o.Owned() {
			return store.NewError(coordinator.ExpiredOwner, decision, rec.Tenant, rec.Task, "nobody holds the task", nil)
		}
		g := coordinator.Grant{Realm: w.run.coord.Realm(), Tenant: rec.Tenant, Task: rec.Task, Owner: o.Owner, Epoch: o.Epoch, Lease: o.Lease}
		switch decision {
		case decisionApprove:
			_, err = w.journal.Authorize(w.ctx, g, rec.Operation, approval)
		case decisionReject:
			_, err = w.journal.Reject(w.ctx, g, rec.Operation, who+": "+reason+": "+why)
		case decisionResolve:
			_, err = w.journal.Resolve(w.ctx, g, rec.Operation, to, ev, who, why)
		}
		return err
	}
	w.approverCall(w.ctx, func(ctx context.Context) {
		cl := w.gw.clients[who]
		switch decision {
		case decisionApprove:
			_, err = cl.Authorize(ctx, rec.Tenant, rec.Task, rec.Operation, approval)
		case decisionReject:
			_, err = cl.Reject(ctx, rec.Tenant, rec.Task, rec.Operation, reason+": "+why)
		case decisionResolve:
			_, err = cl.Resolve(ctx, rec.Tenant, rec.Task, rec.Operation, to, ev, why)
		}
	})
	return err
}

// noEvidence is the commander's rule when its looks-th look at a record
// in MANUAL_REVIEW found no evidence either way (why): it looks again,
// until commanderLooks looks; then it stops looking, and the operation
// stays in MANUAL_REVIEW — a hold the world made (ReasonNoEvidence). It
// returns whether the commander holds, and what it says. The world's
// commander of every trial, built-in or a user's worker's, decides by it.
func noEvidence(looks int, why string) (bool, string) {
	if looks < commanderLooks {
		return false, "no decision: " + why
	}
	return true, fmt.Sprintf("no evidence either way after %d looks (%s): it stays in MANUAL_REVIEW, traffic held", commanderLooks, why)
}

// commanderTries bounds how often the commander tries a decision while
// nobody holds the task.
const commanderTries = 60

// commanderRule is the commander's rule for a promotion of target on the
// world's state now: the replication lag within the loss bound, and the
// target the replica the evidence names (not the writer, nothing being
// promoted). It returns whether it approves, the reason's code and why.
func (w *world) commanderRule(target string) (bool, string, string) {
	lag := w.topo.Lag(caller{actor: commander})
	return commanderRule(target, lag, func() (string, string) { return w.topo.Describe(caller{actor: commander}) })
}

// commanderRule is the rule itself, on a reading of the lag and the
// topology.
func commanderRule(target string, lag time.Duration, topo func() (writer, promoting string)) (bool, string, string) {
	if lag > maxLoss {
		return false, ReasonLossBound, fmt.Sprintf("replication lag %v exceeds the loss bound %v: not approved", lag, maxLoss)
	}
	writer, promoting := topo()
	switch {
	case target == writer:
		return false, ReasonTarget, fmt.Sprintf("the target %s is the writer already: nothing to approve", target)
	case promoting != "":
		return false, ReasonTarget, fmt.Sprintf("a promotion of %s is in progress: not approved", promoting)
	case target != clusterSecondary:
		return false, ReasonTarget, fmt.Sprintf("the evidence names replica %s, not %s: not approved", clusterSecondary, target)
	}
	return true, ReasonRule, fmt.Sprintf("approves promotion of %s: replication lag %v within the loss bound %v", target, lag, maxLoss)
}

// commanderVerdict is the commander's reading of the evidence on a
// promotion in MANUAL_REVIEW dispatched age ago: CONFIRMED, FAILED, or ""
// (no decision), and why.
func commanderVerdict(ids []string, lookupErr error, writer, promoting, target string, age time.Duration) (ledger.State, string) {
	switch {
	case lookupErr != nil:
		return "", "the audit trail does not answer"
	case len(ids) > 0 && (writer == target || promoting == target):
		return ledger.Confirmed, fmt.Sprintf("CloudTrail shows PromoteTarget %s under this operation id, and the topology shows %s as %s",
			strings.Join(ids, ","), target, map[bool]string{true: "the writer", false: "being promoted"}[writer == target])
	case len(ids) == 0 && writer != target && promoting != target && age > auditBound:
		return ledger.Failed, fmt.Sprintf("no PromoteTarget under this operation id %v after its dispatch (the audit trail delivers within %v), and the topology shows writer %s, nothing promoting: it never applied",
			age.Round(time.Second), auditBound, writer)
	}
	return "", fmt.Sprintf("%d audit event(s) under this id, writer %s, promoting %s", len(ids), writer, orDash(promoting))
}

// commanderOnPlan is the commander's review of the naive design's plan (a
// promotion of target, which that design never proposes to a ledger): the
// same rule, the same patience, decided by the world and recorded as its
// decision on the operation "plan". The naive worker waits for it (on a).
func (w *world) commanderOnPlan(a *actor, target string) bool {
	if !w.untilMark(a, commander+"/approval") {
		a.sleep(w.s.between(3*time.Second, 15*time.Second))
	}
	if d := w.plan.commanderAway; d > 0 {
		w.traj.add(Event{At: w.s.now, Kind: KindFault, Actor: commander, Effect: string(FaultCommanderAway),
			Detail: fmt.Sprintf("the incident commander is away for %v", d.Round(time.Second))})
		a.sleep(d)
	}
	for waited := time.Duration(0); ; waited += commanderRecheck {
		ok, code, why := w.commanderRule(target)
		if !ok && code == ReasonLossBound && waited < commanderPatience {
			w.traj.add(Event{At: w.s.now, Kind: KindNote, Actor: commander, Operation: "plan", Detail: why + "; waits and re-reads"})
			a.sleep(commanderRecheck)
			continue
		}
		decision, to := decisionApprove, "AUTHORIZED"
		if !ok {
			decision, to = decisionReject, "REJECTED"
		}
		w.traj.add(Event{At: w.s.now, Kind: KindDecision, Actor: commander, Operation: "plan", Effect: decision, Value: code, To: to, Detail: why})
		if ok && w.plan.topologyChanged {
			w.traj.add(Event{At: w.s.now, Kind: KindFault, Actor: "operator", Effect: string(FaultTopologyChanged),
				Value: clusterSecondary, Detail: "promotes the target out of band between approval and dispatch"})
			w.topo.operatorPromote(clusterSecondary)
		}
		return ok
	}
}

// operatorTookOver is the commander's ruling as the operator edits the
// record by hand to the static fallback: a routing decision of the
// operator's own, which stands.
func (w *world) operatorTookOver(value string) {
	if value == maintenance {
		return
	}
	w.traj.add(Event{At: w.s.now, Kind: KindDecision, Actor: commander, Effect: decisionHold, Value: ReasonOperatorTookOver,
		Detail: fmt.Sprintf("the operator pointed %s at %s by hand: a routing decision that stands until a person decides otherwise", recordName, value)})
}

// firstWorker is worker A while it runs, else nil.
func (w *world) firstWorker() *worker {
	for _, wk := range w.workers {
		if wk.first && !wk.a.done {
			return wk
		}
	}
	return nil
}

// approverCall runs one call of the commander at the trial's gateway, from
// the commander's own goroutine: the gateway's handler hands the world
// back (closes the call's done) before the commander goes on. Approver
// calls never sleep in simulated time.
func (w *world) approverCall(ctx context.Context, call func(ctx context.Context)) {
	cctx, end := w.openHop(ctx)
	call(cctx)
	end()
}

// untilMark sleeps actor a until the scenario's mark key, and reports
// whether there was one still ahead.
func (w *world) untilMark(a *actor, key string) bool {
	sc := w.s.script
	if sc == nil {
		return false
	}
	t, ok := sc.marks[key]
	if !ok || t < w.s.now {
		return false
	}
	a.sleep(t - w.s.now)
	return true
}
