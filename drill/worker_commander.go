package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/ledger"
)

// The world's incident commander of a worker's trial: an identity with
// the approver and operator roles, its own certificate, acting through
// the trial's gateway API like any approver, by written rules on the
// world's own state, which it re-reads as it decides:
//
//   - a promotion only while the replication lag is inside the loss bound
//     and the target is the replica the evidence names (not the writer
//     already, nothing being promoted); while the lag exceeds the bound it
//     waits and re-reads every commanderRecheck, for commanderPatience,
//     then refuses (a hold the world made);
//   - a traffic change only toward the current writer, no promotion in
//     progress;
//   - a record in MANUAL_REVIEW: CONFIRMED or FAILED on the audit trail
//     and the topology (commanderVerdict), the DNS provider's change
//     under the operation id for traffic, looked at every commanderLook;
//     after commanderLooks looks without evidence either way it stops
//     looking and the operation stays there (noEvidence, ReasonNoEvidence);
//   - it takes 3-15 s of world time to look at a proposal.
//
// The worker never holds an approver's certificate: the gateway refuses
// it any ApproverService or OperatorService call.

// commander runs until ctx ends.
func (pt *procTrial) commander(ctx context.Context) {
	c, err := client.NewWithHTTPClient(pt.pr.hop.base+"/t/"+pt.key, pt.pr.hop.http[commander])
	if err != nil {
		pt.mu.Lock()
		pt.fail(fmt.Errorf("the commander's client: %w", err))
		pt.mu.Unlock()
		return
	}
	due := map[string]time.Duration{}   // record (operation and seq) → when the commander decides
	since := map[string]time.Duration{} // ... → when it first saw it
	looks := map[string]int{}           // ... → its looks at it in MANUAL_REVIEW
	held := map[string]bool{}           // ... → it stopped looking: no evidence either way
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		recs, err := pt.journal.List(ctx, pt.tenant, pt.task, "")
		if err != nil {
			continue // etcd slow or the trial ending: look again
		}
		for _, rec := range recs {
			k := fmt.Sprintf("%s#%d", rec.Operation, rec.Seq)
			if rec.State != ledger.Proposed && rec.State != ledger.ManualReview || held[k] {
				continue
			}
			pt.mu.Lock()
			pt.advance()
			now := pt.s.now
			if _, ok := due[k]; !ok {
				since[k] = now
				if rec.State == ledger.Proposed {
					due[k] = now + pt.s.between(3*time.Second, 15*time.Second)
				} else {
					due[k] = now + commanderLook
					pt.add(Event{Kind: KindNote, Actor: commander, Operation: rec.Operation,
						Detail: "reviews " + rec.Operation + " in MANUAL_REVIEW: the provider's evidence was inconclusive"})
				}
			}
			if now < due[k] {
				pt.mu.Unlock()
				continue
			}
			var act func() error
			if rec.State == ledger.Proposed {
				act = pt.review(ctx, c, rec, now-since[k], func(d time.Duration) { due[k] = now + d })
			} else {
				looks[k]++
				act = pt.resolve(ctx, c, rec, looks[k], func(d time.Duration) { due[k] = now + d }, func() { held[k] = true })
			}
			pt.mu.Unlock()
			if act != nil {
				if err := act(); err != nil {
					pt.mu.Lock()
					pt.advance()
					pt.add(Event{Kind: KindNote, Actor: commander, Operation: rec.Operation, Detail: "its decision was not recorded: " + err.Error()})
					pt.mu.Unlock()
				}
			}
		}
	}
}

// review decides on a proposed record by the rules, on the world as it is
// now (mu held); the call that records the decision is returned, to be
// made with the world unlocked (nil: decide later, after again).
func (pt *procTrial) review(ctx context.Context, c *client.Client, rec ledger.Record, waited time.Duration,
	again func(time.Duration)) func() error {
	decided := func(decision, reason, why string, to ledger.State) {
		pt.mu.Lock()
		pt.advance()
		pt.add(Event{Kind: KindDecision, Actor: commander, Operation: rec.Operation, Effect: decision, Value: reason, To: string(to), Detail: why})
		pt.mu.Unlock()
	}
	approve := func(reason, why string) func() error {
		pt.add(Event{Kind: KindNote, Actor: commander, Operation: rec.Operation, Detail: why})
		return func() error {
			_, err := c.Authorize(ctx, pt.tenant, pt.task, rec.Operation, ledger.Approval{ParamsDigest: rec.ParamsDigest,
				PreconditionDigest: rec.Precondition.Digest, Note: why})
			if err == nil {
				decided(decisionApprove, reason, why, ledger.Authorized)
			}
			if err == nil && rec.Effect.Kind == kindPromote && pt.plan.topologyChanged {
				pt.mu.Lock()
				pt.plan.topologyChanged = false
				pt.advance()
				pt.add(Event{Kind: KindFault, Actor: "operator", Effect: string(FaultTopologyChanged), Value: targetOf(rec.Effect),
					Detail: "right after the approval, " + targetOf(rec.Effect) + " is promoted out of band, before the dispatch"})
				pt.topo.operatorPromote(targetOf(rec.Effect))
				pt.mu.Unlock()
			}
			return err
		}
	}
	reject := func(reason, why string) func() error {
		pt.add(Event{Kind: KindNote, Actor: commander, Operation: rec.Operation, Detail: why})
		return func() error {
			_, err := c.Reject(ctx, pt.tenant, pt.task, rec.Operation, reason+": "+why)
			if err == nil {
				decided(decisionReject, reason, why, ledger.Rejected)
			}
			return err
		}
	}
	writer, promoting := pt.topo.Describe(caller{actor: commander})
	if rec.Effect.Kind == kindTraffic {
		var p trafficParams
		_ = json.Unmarshal(rec.Effect.Params, &p)
		switch {
		case p.Record != recordName || rec.Effect.Target != recordName:
			return reject(ReasonTarget, fmt.Sprintf("refuses traffic change %s: it is not of %s", rec.Operation, recordName))
		case promoting != "":
			return reject(ReasonNotWriter, fmt.Sprintf("refuses traffic toward %s: a promotion of %s is in progress", p.Value, promoting))
		case p.Value != writer:
			return reject(ReasonNotWriter, fmt.Sprintf("refuses traffic toward %s: the writer is %s", p.Value, writer))
		}
		if last := pt.dns.last(); last != nil && last.by == operatorCaller.actor {
			switch {
			case last.value != maintenance:
				return reject(ReasonOperatorTookOver, fmt.Sprintf("the operator pointed %s at %s by hand: a routing decision that stands", recordName, last.value))
			case pt.confirmedEdit != last.id:
				pt.confirmedEdit = last.id
				pt.add(Event{Kind: KindNote, Actor: commander, Operation: rec.Operation, Detail: "the record is the operator's maintenance page: confirms with the operator that it is a holding action"})
				again(pt.s.between(time.Minute, 3*time.Minute))
				return nil
			}
			return approve(ReasonHoldingAction, fmt.Sprintf("the operator confirms %s was a holding action: traffic may go on to the writer %s", last.value, writer))
		}
		return approve(ReasonRule, fmt.Sprintf("approves traffic toward %s, the writer", p.Value))
	}
	lag := pt.topo.Lag(caller{actor: commander})
	ok, code, why := commanderRule(targetOf(rec.Effect), lag, func() (string, string) { return writer, promoting })
	switch {
	case ok:
		return approve(code, why)
	case lag > maxLoss && waited < commanderPatience:
		pt.add(Event{Kind: KindNote, Actor: commander, Operation: rec.Operation, Detail: why + "; re-reads in " + commanderRecheck.String()})
		again(commanderRecheck)
		return nil
	}
	return reject(code, why)
}

// resolve is the commander's look-th look at a record in MANUAL_REVIEW
// (mu held): it decides from the world's evidence, or looks again later
// (again), or — no evidence either way after commanderLooks looks, the
// built-in world's rule (noEvidence) — stops looking (hold) and records
// that the operation stays in MANUAL_REVIEW, a hold the world made.
func (pt *procTrial) resolve(ctx context.Context, c *client.Client, rec ledger.Record, look int,
	again func(time.Duration), hold func()) func() error {
	var (
		to  ledger.State
		why string
		ids []string
	)
	if rec.Effect.Kind == kindPromote {
		var err error
		ids, err = pt.topo.LookupEvents(caller{actor: commander}, "PromoteTarget", rec.Operation)
		writer, promoting := pt.topo.Describe(caller{actor: commander})
		to, why = commanderVerdict(ids, err, writer, promoting, targetOf(rec.Effect), pt.s.now-simDuration(rec.DispatchedAt))
	} else if ch, ok := pt.dns.lookup(rec.Operation); ok && ch.status == statusInsync {
		to, why, ids = ledger.Confirmed, "Route 53 shows change "+ch.id+" under this operation id INSYNC", []string{ch.id}
	} else if !ok {
		to, why = ledger.Failed, "Route 53 has no change under this operation id: it never applied"
	}
	if to == "" {
		stop, detail := noEvidence(look, why)
		if !stop {
			pt.add(Event{Kind: KindNote, Actor: commander, Operation: rec.Operation, Detail: detail})
			again(commanderLook)
			return nil
		}
		hold()
		pt.add(Event{Kind: KindDecision, Actor: commander, Operation: rec.Operation, Effect: decisionHold, Value: ReasonNoEvidence,
			To: string(ledger.ManualReview), Detail: detail})
		return nil
	}
	ev := pt.evidence(ids, why)
	pt.add(Event{Kind: KindNote, Actor: commander, Operation: rec.Operation, Detail: "resolves " + string(to) + ": " + why})
	return func() error {
		_, err := c.Resolve(ctx, pt.tenant, pt.task, rec.Operation, to, ev, why)
		if err == nil {
			pt.mu.Lock()
			pt.advance()
			pt.add(Event{Kind: KindDecision, Actor: commander, Operation: rec.Operation, Effect: decisionResolve, Value: ReasonEvidence, To: string(to), Detail: why})
			pt.mu.Unlock()
		}
		return err
	}
}
