package drill

import (
	"fmt"
	"slices"
	"strings"
)

// Grader names one trajectory check. Each counts violations; a trial of a
// sound design scores zero on every one.
type Grader string

// The graders of seed 003 ("The tests that cared how it finished").
const (
	// At most one promotion intent (idempotency key) per incident reaches
	// the database provider from the workflow's workers.
	GraderOnePromotionIntent Grader = "one_promotion_intent"
	// No provider call that mutates carries an epoch older than the
	// newest grant of the incident task at the time of the call.
	GraderStaleEpochDispatch Grader = "stale_epoch_dispatch"
	// No CONFIRMED without the provider's evidence: a request the provider
	// accepted, or a DNS change it reported INSYNC, for the same operation,
	// before the confirmation.
	GraderConfirmedWithoutEvidence Grader = "confirmed_without_evidence"
	// Every operation that went UNKNOWN ends CONFIRMED, SUPERSEDED or
	// MANUAL_REVIEW; one left DISPATCHING (a claimed dispatch nobody
	// recorded or reconciled; STARTED in the naive history) is an unknown
	// that never even became one.
	GraderUnresolvedUnknown Grader = "unresolved_unknown"
	// The final traffic target is the final writer.
	GraderFinalTrafficWriter Grader = "final_traffic_not_writer"
	// No worker points traffic at a cluster that is not the writer at that
	// moment (before the promotion moved it as much as after), even if the
	// end state is green.
	GraderProhibitedTraffic Grader = "prohibited_traffic_transition"
	// An operator's out-of-band edit of the record is not overwritten by a
	// worker unless the world's commander approved that very change after
	// the edit (a holding action the operator confirmed).
	GraderOperatorEditOverwritten Grader = "operator_edit_overwritten"
	// The trial recovers: traffic ends on the final writer, off the
	// impaired original, within the trial's bound — unless the world
	// itself made recovery unsafe for the whole window, as its own record
	// shows (worldHold): the commander refused the promotion over the loss
	// bound and the writer never moved; the commander found no evidence
	// either way on an operation left in MANUAL_REVIEW; or the operator
	// took the record over (then the writer must still have moved). A
	// design's own hold, rejection or log line excuses nothing: a design
	// that does nothing, refuses everything, or promotes and leaves traffic
	// on the original fails it.
	GraderLiveness Grader = "liveness"
)

// Graders lists every grader, in the report's order. It returns a new
// slice each time: the caller may keep or change it.
func Graders() []Grader { return slices.Clone(graders) }

var graders = []Grader{
	GraderOnePromotionIntent, GraderStaleEpochDispatch, GraderConfirmedWithoutEvidence,
	GraderUnresolvedUnknown, GraderFinalTrafficWriter, GraderProhibitedTraffic, GraderOperatorEditOverwritten,
	GraderLiveness,
}

// Violation is one grader's finding in one trajectory.
type Violation struct {
	Grader Grader `json:"grader"`
	Detail string `json:"detail"`
}

// Grade runs every grader over t.
func Grade(t *Trajectory) []Violation {
	var out []Violation
	for _, g := range graders {
		for _, d := range grade(g, t) {
			out = append(out, Violation{Grader: g, Detail: d})
		}
	}
	return out
}

func grade(g Grader, t *Trajectory) []string {
	switch g {
	case GraderOnePromotionIntent:
		return onePromotionIntent(t)
	case GraderStaleEpochDispatch:
		return staleEpochDispatch(t)
	case GraderConfirmedWithoutEvidence:
		return confirmedWithoutEvidence(t)
	case GraderUnresolvedUnknown:
		return unresolvedUnknown(t)
	case GraderFinalTrafficWriter:
		if t.FinalTraffic != t.FinalWriter && !worldHold(t).traffic(t) {
			return []string{fmt.Sprintf("traffic ends at %s, the writer is %s", t.FinalTraffic, t.FinalWriter)}
		}
		return nil
	case GraderProhibitedTraffic:
		return prohibitedTraffic(t)
	case GraderOperatorEditOverwritten:
		return operatorEditOverwritten(t)
	case GraderLiveness:
		return liveness(t)
	}
	return []string{"unknown grader " + string(g)}
}

// byWorker says whether a provider event was caused by a workflow worker
// (not an operator's out-of-band action).
func byWorker(e Event) bool { return e.By != "" && e.By != operatorCaller.actor }

func isMutation(e Event) bool {
	return e.Kind == KindCall && (e.Effect == "PromoteTarget" || e.Effect == "ChangeResourceRecordSets")
}

// onePromotionIntent flags a further promotion key from a worker reaching
// the provider while an earlier one is not settled as never applied: a new
// intent is legitimate only after the earlier one ended FAILED, REJECTED or
// SUPERSEDED on evidence, never because an answer went missing.
func onePromotionIntent(t *Trajectory) []string {
	var keys []string
	seen := map[string]bool{}
	state := map[string]string{} // operation -> its promotion's state so far
	var out []string
	for _, e := range t.Events {
		if e.Kind == KindTransition && e.Effect == "promote" {
			state[e.Operation] = e.To
		}
		if e.Kind != KindCall || e.Effect != "PromoteTarget" || !byWorker(e) || seen[e.Operation] {
			continue
		}
		for _, k := range keys {
			switch state[k] {
			case "FAILED", "REJECTED", "SUPERSEDED":
				continue
			}
			out = append(out, fmt.Sprintf("a further promotion intent %q while %q is %s", e.Operation, k, orDash(state[k])))
			break
		}
		seen[e.Operation] = true
		keys = append(keys, e.Operation)
	}
	return out
}

// staleEpochDispatch flags a mutating call that reached a provider under an
// epoch older than the task's newest grant, unless the gateway read that
// grant current as the call left (a fence-read event of the same worker,
// operation and epoch while it was the newest): that call went through the
// residual window between the gateway's last check and the provider, which
// only a provider checking the fence token closes. Those are counted apart
// (residualCalls), not hidden: what they did to the world, the other graders
// judge.
func staleEpochDispatch(t *Trajectory) []string {
	out, _ := staleCalls(t)
	return out
}

// residualCall is a stale call that passed the gateway's fence read while
// current; applied says whether the provider changed the world on it.
type residualCall struct {
	event   Event
	applied bool
}

func staleCalls(t *Trajectory) (violations []string, residual []residualCall) {
	var newest int64
	passed := map[string]bool{} // "by op epoch" read current as the call left
	for i, e := range t.Events {
		switch {
		case e.Kind == KindClaim:
			newest = max(newest, e.Epoch)
		case e.Kind == KindFenceRead && e.Epoch == newest:
			passed[fmt.Sprint(e.Actor, " ", e.Operation, " ", e.Epoch)] = true
		case isMutation(e) && byWorker(e) && e.Epoch < newest:
			key := fmt.Sprint(e.By, " ", e.Operation, " ", e.Epoch)
			if passed[key] {
				residual = append(residual, residualCall{event: e, applied: i+1 < len(t.Events) &&
					t.Events[i+1].Kind == KindApplied && t.Events[i+1].By == e.By && t.Events[i+1].Epoch == e.Epoch})
				continue
			}
			violations = append(violations, fmt.Sprintf("%s by %s at %.3fs under epoch %d; the task's newest grant is %d",
				e.Effect, e.By, e.At.Seconds(), e.Epoch, newest))
		}
	}
	return violations, residual
}

func confirmedWithoutEvidence(t *Trajectory) []string {
	var out []string
	for i, e := range t.Events {
		if e.Kind != KindTransition || e.To != "CONFIRMED" {
			continue
		}
		if len(e.Evidence) == 0 {
			out = append(out, fmt.Sprintf("%s CONFIRMED with no provider evidence", e.Operation))
			continue
		}
		for _, id := range e.Evidence {
			if !evidenced(t.Events[:i], e.Operation, id) {
				out = append(out, fmt.Sprintf("%s CONFIRMED citing %s, which the provider had not shown applied for it", e.Operation, id))
			}
		}
	}
	return out
}

// evidenced says whether the provider's log, before the confirmation,
// shows id applied for operation: a promotion request it accepted, or a
// DNS change it reported INSYNC (a change accepted PENDING is not).
func evidenced(before []Event, operation, id string) bool {
	for _, e := range before {
		if e.Kind == KindApplied && (e.Effect == "promotion-accepted" || e.Effect == "insync") && e.Operation == operation {
			for _, x := range e.Evidence {
				if x == id {
					return true
				}
			}
		}
	}
	return false
}

// opKey names one operation in a journal: its id and effect (the naive
// design's coarse activity has one request key for both of its effects).
func opKey(e Event) string { return e.Operation + " " + e.Effect }

// opStates is every operation of a journal: in order of appearance, with
// its last state and whether it ever went UNKNOWN.
type opStates struct {
	order   []string
	last    map[string]string
	unknown map[string]bool
	review  map[string]bool // it went MANUAL_REVIEW
}

func operations(t *Trajectory) opStates {
	o := opStates{last: map[string]string{}, unknown: map[string]bool{}, review: map[string]bool{}}
	for _, e := range t.Events {
		if e.Kind != KindTransition {
			continue
		}
		k := opKey(e)
		if _, ok := o.last[k]; !ok {
			o.order = append(o.order, k)
		}
		o.last[k] = e.To
		if e.To == "UNKNOWN" {
			o.unknown[k] = true
		}
		if e.To == "MANUAL_REVIEW" {
			o.review[k] = true
		}
	}
	return o
}

// resolved reports whether an UNKNOWN operation ended as it must.
func resolved(state string) bool {
	return state == "CONFIRMED" || state == "SUPERSEDED" || state == "MANUAL_REVIEW"
}

func unresolvedUnknown(t *Trajectory) []string {
	ops := operations(t)
	var out []string
	for _, op := range ops.order {
		last := ops.last[op]
		switch {
		case last == "DISPATCHING" || last == "STARTED":
			out = append(out, fmt.Sprintf("%s ends %s: a dispatch nobody recorded or reconciled", op, last))
		case ops.unknown[op] && !resolved(last) && !ops.review[op]: // from MANUAL_REVIEW, the commander's decision stands
			out = append(out, fmt.Sprintf("%s went UNKNOWN and ends %s", op, last))
		}
	}
	return out
}

// prohibitedTraffic flags every worker's change of the record to a target
// that is not the writer at that moment: before the promotion moved it as
// much as after.
func prohibitedTraffic(t *Trajectory) []string {
	writer := t.Original
	var out []string
	for _, e := range t.Events {
		if e.Kind != KindApplied {
			continue
		}
		switch e.Effect {
		case "writer":
			writer = e.Value
		case "record":
			if byWorker(e) && e.Value != writer {
				out = append(out, fmt.Sprintf("%s pointed traffic at %s at %.3fs; the writer was %s", e.By, e.Value, e.At.Seconds(), writer))
			}
		}
	}
	return out
}

// operatorEditOverwritten flags a worker's change of the record after an
// operator edited it by hand, unless the world's commander approved that
// change (its operation) after the edit as going on from a holding action.
func operatorEditOverwritten(t *Trajectory) []string {
	var edit *Event
	var approved map[string]bool // operations the commander let overwrite the edit
	var out []string
	for i, e := range t.Events {
		if edit != nil && isWorldDecision(e) && e.Effect == decisionApprove && e.Value == ReasonHoldingAction {
			approved[e.Operation] = true
		}
		if e.Kind != KindApplied || e.Effect != "record" {
			continue
		}
		switch {
		case e.By == operatorCaller.actor:
			edit, approved = &t.Events[i], map[string]bool{}
		case edit != nil && byWorker(e) && approved[e.Operation]:
			edit = nil // the workflow goes on from the edit, as the commander decided
		case edit != nil && byWorker(e):
			out = append(out, fmt.Sprintf("%s overwrote the operator's edit (%s at %.3fs) with %s at %.3fs, which the commander did not approve over it",
				e.By, edit.Value, edit.At.Seconds(), e.Value, e.At.Seconds()))
		}
	}
	return out
}

// isWorldDecision: e is a decision of the world's commander or traffic
// policy (never a design's event).
func isWorldDecision(e Event) bool { return e.Kind == KindDecision && worldActors[e.Actor] }

// holds is what the world's record shows of the world itself holding the
// recovery.
type holds struct {
	// lossBound: a promotion's last world decision refused it over the
	// loss bound, and no promotion was approved after.
	lossBound bool
	// noEvidence: an operation ends in MANUAL_REVIEW in the journal, and
	// the commander's last decision on it found no evidence either way.
	noEvidence bool
	// tookOver: the commander ruled that the operator took the record
	// over, and the record ends at the operator's edit, no worker changing
	// it after.
	tookOver bool
	// operatorLast: the last change of the record was the operator's.
	operatorLast bool
}

// worldHold reads the world's record — the commander's decisions, the
// ledger journal, the DNS provider's history — for a hold of the world's
// own making.
func worldHold(t *Trajectory) holds {
	var h holds
	ops := operations(t)
	last := map[string]Event{} // operation -> the world's last decision on it
	refusedOverBound, tookOver := false, false
	lastRecordBy, lastRecordValue := "", ""
	for _, e := range t.Events {
		switch {
		case isWorldDecision(e) && e.Operation == "" && e.Value == ReasonOperatorTookOver:
			tookOver = true
		case isWorldDecision(e):
			last[e.Operation] = e
			if isPromotion(t, e.Operation) {
				switch {
				case e.Effect == decisionReject && e.Value == ReasonLossBound:
					refusedOverBound = true
				case e.Effect == decisionApprove:
					refusedOverBound = false
				}
			}
		case e.Kind == KindApplied && e.Effect == "record":
			lastRecordBy, lastRecordValue = e.By, e.Value
		}
	}
	h.lossBound = refusedOverBound
	for _, op := range ops.order {
		if ops.last[op] != "MANUAL_REVIEW" {
			continue
		}
		id, _, _ := strings.Cut(op, " ")
		if d, ok := last[id]; ok && d.Effect == decisionHold && d.Value == ReasonNoEvidence {
			h.noEvidence = true
		}
	}
	h.operatorLast = lastRecordBy == operatorCaller.actor
	h.tookOver = tookOver && h.operatorLast && lastRecordValue == t.FinalTraffic
	return h
}

// isPromotion: operation is a promotion in the trajectory's journal (or
// the naive design's plan).
func isPromotion(t *Trajectory, operation string) bool {
	if operation == "plan" {
		return true
	}
	for _, e := range t.Events {
		if e.Kind == KindTransition && e.Operation == operation {
			return e.Effect == "promote"
		}
	}
	return strings.HasPrefix(operation, "promote")
}

// traffic: traffic may end off the writer, by the world's own hold: the
// commander holds an operation in MANUAL_REVIEW, or the record ends at the
// operator's hand (a take-over, or any edit while the promotion was
// refused over the loss bound).
func (h holds) traffic(t *Trajectory) bool {
	return h.noEvidence || h.tookOver || (h.operatorLast && h.lossBound && t.FinalWriter == t.Original)
}

// reason names the world's hold for the report ("" if none).
func (h holds) reason(t *Trajectory) string {
	switch {
	case h.noEvidence:
		return ReasonNoEvidence
	case h.lossBound && t.FinalWriter == t.Original:
		return ReasonLossBound
	case h.tookOver:
		return ReasonOperatorTookOver
	}
	return ""
}

// liveness: the trial recovered (traffic on the final writer, off the
// original), or the world's own record shows a hold that made recovery
// unsafe for the whole window.
func liveness(t *Trajectory) []string {
	if t.FinalTraffic == t.FinalWriter && t.FinalWriter != t.Original {
		return nil
	}
	h := worldHold(t)
	switch {
	case h.noEvidence:
		return nil // the commander could not establish what happened
	case h.lossBound && t.FinalWriter == t.Original && (t.FinalTraffic == t.Original || h.operatorLast):
		return nil // no promotion was safe: the lag stayed past the bound
	case h.tookOver && t.FinalWriter != t.Original:
		return nil // the writer moved; the operator owns traffic now
	}
	return []string{fmt.Sprintf("the trial ends with writer %s and traffic %s (the original writer was %s): not recovered, and the world's record shows no hold that made recovery unsafe",
		t.FinalWriter, t.FinalTraffic, t.Original)}
}
