package drill

import (
	"fmt"
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
	// No worker points traffic away from the writer once the promotion has
	// moved it, even if the end state is green.
	GraderProhibitedTraffic Grader = "prohibited_traffic_transition"
)

// Graders lists every grader, in the report's order.
var Graders = []Grader{
	GraderOnePromotionIntent, GraderStaleEpochDispatch, GraderConfirmedWithoutEvidence,
	GraderUnresolvedUnknown, GraderFinalTrafficWriter, GraderProhibitedTraffic,
}

// Violation is one grader's finding in one trajectory.
type Violation struct {
	Grader Grader `json:"grader"`
	Detail string `json:"detail"`
}

// Grade runs every grader over t.
func Grade(t *Trajectory) []Violation {
	var out []Violation
	for _, g := range Graders {
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
		if t.FinalTraffic != t.FinalWriter {
			return []string{fmt.Sprintf("traffic ends at %s, the writer is %s", t.FinalTraffic, t.FinalWriter)}
		}
		return nil
	case GraderProhibitedTraffic:
		return prohibitedTraffic(t)
	}
	return []string{"unknown grader " + string(g)}
}

// byWorker says whether a provider event was caused by a workflow worker
// (not an operator's out-of-band action).
func byWorker(e Event) bool { return e.By != "" && e.By != operatorCaller.actor }

func isMutation(e Event) bool {
	return e.Kind == KindCall && (e.Effect == "PromoteTarget" || e.Effect == "ChangeResourceRecordSets")
}

func onePromotionIntent(t *Trajectory) []string {
	var keys []string
	seen := map[string]bool{}
	for _, e := range t.Events {
		if e.Kind == KindCall && e.Effect == "PromoteTarget" && byWorker(e) && !seen[e.Operation] {
			seen[e.Operation] = true
			keys = append(keys, e.Operation)
		}
	}
	var out []string
	for _, k := range keys[min(1, len(keys)):] {
		out = append(out, fmt.Sprintf("a further promotion intent %q after %q", k, keys[0]))
	}
	return out
}

func staleEpochDispatch(t *Trajectory) []string {
	var newest int64
	var out []string
	for _, e := range t.Events {
		if e.Kind == KindClaim {
			newest = max(newest, e.Epoch)
		}
		if isMutation(e) && byWorker(e) && e.Epoch < newest {
			out = append(out, fmt.Sprintf("%s by %s at %.3fs under epoch %d; the task's newest grant is %d",
				e.Effect, e.By, e.At.Seconds(), e.Epoch, newest))
		}
	}
	return out
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
// DNS change it reported INSYNC.
func evidenced(before []Event, operation, id string) bool {
	want := ""
	switch {
	case strings.HasPrefix(id, "rds-req-"):
		want = "promotion-accepted"
	case strings.HasPrefix(id, "C-"):
		want = "insync"
	default:
		return false
	}
	for _, e := range before {
		if e.Kind == KindApplied && e.Effect == want && e.Operation == operation {
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
		case ops.unknown[op] && !resolved(last):
			out = append(out, fmt.Sprintf("%s went UNKNOWN and ends %s", op, last))
		}
	}
	return out
}

func prohibitedTraffic(t *Trajectory) []string {
	writer := t.Original
	moved := false
	var out []string
	for _, e := range t.Events {
		if e.Kind != KindApplied {
			continue
		}
		switch e.Effect {
		case "writer":
			moved = moved || e.Value != writer
			writer = e.Value
		case "record":
			if moved && byWorker(e) && e.Value != writer {
				out = append(out, fmt.Sprintf("%s pointed traffic at %s at %.3fs; the writer was %s", e.By, e.Value, e.At.Seconds(), writer))
			}
		}
	}
	return out
}
