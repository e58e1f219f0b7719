package drill

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/leasegate/leasegate/timeline"
)

// SVG draws a trajectory as a timeline (package timeline): one lane per
// actor — the workers first, each with its epochs as bars from its claim
// to the end of its grant, then the commander, the operator, the naive
// design's workflow engine, the providers and the rest; Aurora's lane
// carries the writer (and a promotion in progress) as bars, Route 53's
// where traffic points and each change PENDING until INSYNC. Every step of
// the incident's story (claims, leases ending, faults, the journal's
// transitions, the calls that change something, what the providers did,
// refusals, holds, the commander's and the workers' decisions) is a
// numbered badge in its actor's lane and a numbered line in the list under
// the chart, which says what happened in words; reads and polls are dots.
// Every event carries its whole trajectory line (as Render prints it
// canonically) as its <title>. Faults are red with a dashed line across the
// lanes. A legend names the colours; the end state and the graders'
// violations close the picture.
//
// The picture is laid out for 800 px (timeline.DefaultWidth), the width a
// README shows it at, with no text under 11 px and no two labels
// overlapping (checked in a real browser by the drill's tests). The output
// is a function of the trajectory alone (epochs are named by order), so the
// same trial draws the same picture.
func (t *Trajectory) SVG(w io.Writer) error {
	return t.Chart().SVG(w)
}

// laneNames are the lanes' names and second lines, by actor.
var laneNames = map[string][2]string{
	"commander":          {"commander", "approves, repairs"},
	"incident-commander": {"commander", "the world's approver"},
	"traffic-policy":     {"traffic policy", "approves traffic"},
	"operator":           {"operator", "a person's edits"},
	"temporal":           {"workflow", "the naive engine"},
	"aurora":             {"Aurora", "bar: the writer"},
	"route53":            {"Route 53", "bar: traffic to"},
	"audit":              {"audit", "provider logs"},
	"network":            {"network", ""},
}

// stateMeaning explains a journal state for the picture's key.
var stateMeaning = map[string]string{
	"PROPOSED":      "written, waiting for the commander's approval",
	"AUTHORIZED":    "approved",
	"DISPATCHING":   "the call to the provider is going out",
	"CONFIRMED":     "the provider's evidence shows it took effect",
	"UNKNOWN":       "the answer was lost: it may or may not have happened",
	"MANUAL_REVIEW": "left for a person to resolve",
	"REJECTED":      "refused before any call",
	"SUPERSEDED":    "replaced; it never took effect",
	"FAILED":        "the attempt failed",
	"STARTED":       "a workflow activity started",
}

// designStory says what a design is, for the picture's subtitle.
var designStory = map[Design]string{
	Naive:  "Naive design (the seed's): each attempt sends a fresh request key, the workflow's checkpoint is trusted as the present, nothing stops a paused worker that wakes up.",
	Fenced: "Fenced design (leasegate): every effect goes through the gateway, which checks the worker's epoch and keeps each operation's record (its journal); a replacement adopts what the record says.",
}

// Chart is the trajectory as a timeline.Chart: what SVG draws.
func (t *Trajectory) Chart() timeline.Chart {
	order := t.epochOrder()
	what := fmt.Sprintf("Trial %d", t.Trial)
	if t.Scenario != "" {
		what = fmt.Sprintf("Scenario %s", t.Scenario)
	}
	c := timeline.Chart{
		Title: fmt.Sprintf("%s, %s design: the writer was %s; at the end the writer is %s and traffic points at %s (%d traffic moves)",
			what, t.Design, t.Original, t.FinalWriter, t.FinalTraffic, trafficMoves(t)),
		Subtitle: "A regional failover of the checkout database: workers in turn hold the incident task (a lease, under an epoch) and must promote the " +
			clusterSecondary + " secondary (Aurora), then point checkout's traffic at it (Route 53). " + designStory[t.Design] +
			"\nTime runs left to right (a long quiet gap is drawn narrow, its length under the axis); each number is explained in the list below.",
		Width:  timeline.DefaultWidth,
		Styles: drillStyles(),
	}
	// Lanes: the workers first, then by rank; Aurora and Route 53 always.
	var workers, others []string
	seen := map[string]bool{}
	for _, e := range t.Events {
		if seen[e.Actor] {
			continue
		}
		seen[e.Actor] = true
		if strings.HasPrefix(e.Actor, "worker-") {
			workers = append(workers, e.Actor)
		} else {
			others = append(others, e.Actor)
		}
	}
	for _, want := range []string{"aurora", "route53"} {
		if !seen[want] {
			others = append(others, want)
		}
	}
	sort.Strings(workers)
	rank := func(a string) int {
		for i, x := range []string{"commander", "incident-commander", "traffic-policy", "operator", "temporal", "aurora", "route53", "audit", "network"} {
			if a == x {
				return i
			}
		}
		return 99
	}
	sort.SliceStable(others, func(i, j int) bool { return rank(others[i]) < rank(others[j]) })
	actors := append(workers, others...)
	lane := map[string]int{}
	for i, a := range actors {
		lane[a] = i
		name, sub := a, ""
		if strings.HasPrefix(a, "worker-") {
			name, sub = "worker "+who(a), "bar: its grant"
		} else if n, ok := laneNames[a]; ok {
			name, sub = n[0], n[1]
		}
		c.Lanes = append(c.Lanes, timeline.Lane{Name: name, Sub: sub})
	}
	// Every event; the story's steps numbered and explained.
	states := map[string]bool{}
	for i, e := range t.Events {
		ev := timeline.Event{
			At:    simTime(e.At),
			Class: eventClass(e),
			Title: strings.TrimSpace(eventLine(e, order, true)),
			Data:  map[string]string{"index": strconv.Itoa(i), "kind": string(e.Kind), "at": fmt.Sprintf("%.3f", e.At.Seconds())},
		}
		if label, text, ok := explain(e, order); ok {
			ev.Label, ev.Explain = label, text
		}
		ev.Across = e.Kind == KindFault
		if e.Kind == KindTransition {
			states[e.To] = true
		}
		l := &c.Lanes[lane[e.Actor]]
		l.Events = append(l.Events, ev)
	}
	t.grantSpans(&c, lane, order)
	t.providerSpans(&c, lane)
	// The key: what the journal's states mean, those this picture shows.
	var key []string
	for _, s := range []string{"STARTED", "PROPOSED", "AUTHORIZED", "DISPATCHING", "CONFIRMED", "UNKNOWN", "FAILED", "REJECTED", "SUPERSEDED", "MANUAL_REVIEW"} {
		if states[s] {
			key = append(key, s+" = "+stateMeaning[s])
		}
	}
	if len(key) > 0 {
		c.Key = []string{"Record states: " + strings.Join(key, "; ") + "."}
	}
	// The end and the graders' verdict.
	c.Notes = append(c.Notes, timeline.Note{Text: fmt.Sprintf("End: writer %s, traffic to %s, %d traffic moves.", t.FinalWriter, t.FinalTraffic, trafficMoves(t))})
	vs := Grade(t)
	if len(vs) == 0 {
		c.Notes = append(c.Notes, timeline.Note{Text: "graders: no violation", Tone: timeline.Good, Class: "verdict"})
	}
	for _, v := range vs {
		c.Notes = append(c.Notes, timeline.Note{Text: "VIOLATION " + string(v.Grader) + ": " + canonicalEpochs(order, v.Detail), Tone: timeline.Bad, Class: "violation"})
	}
	return c
}

// kindWorldDecision is the kind of the world's commander's and traffic
// policy's decisions (approve, reject, hold, resolve) in a trajectory.
const kindWorldDecision Kind = "decision"

// clusterClass is the colour class of a cluster or record value.
func clusterClass(v string) string { return "value-" + v }

func drillStyles() map[string]timeline.Style {
	return map[string]timeline.Style{
		"epoch":                        {Legend: "a worker holds the incident task (its lease) under this epoch"},
		clusterClass(clusterPrimary):   {Fill: "#cfd8dc", Text: "#263238", Legend: clusterPrimary + ": the original writer, in the impaired region"},
		clusterClass(clusterSecondary): {Fill: "#bbdefb", Text: "#0d47a1", Legend: clusterSecondary + ": the secondary, promoted to writer"},
		clusterClass(maintenance):      {Fill: "#ffe0b2", Text: "#e65100", Legend: maintenance + ": checkout's maintenance page"},
		clusterClass(staticFallback):   {Fill: "#e1bee7", Text: "#4a148c", Legend: staticFallback + ": an operator's static fallback"},
		"promoting":                    {Fill: "#b2dfdb", Text: "#004d40", Legend: "a promotion Aurora accepted, not yet the writer"},
		"pending":                      {Legend: "a DNS change PENDING until INSYNC (applied everywhere)"},
		"claim":                        {Legend: "a worker is granted the task"},
		"lost":                         {Legend: "a worker's grant ends"},
		"transition":                   {Legend: "an operation's record changes state"},
		"call":                         {Legend: "a call that changes something reaches a provider"},
		"change":                       {Legend: "a provider changed the world"},
		"fault":                        {Legend: "an injected fault (dashed across the lanes)"},
		"refused":                      {Legend: "the gateway refused a worker"},
		"hold":                         {Legend: "a worker holds for the commander"},
		"note":                         {Legend: "a decision, and why"},
		"decision":                     {Fill: "#0277bd", Text: "#ffffff", Legend: "the world's commander or traffic policy decides"},
		"read":                         {Legend: "a read or a poll (dot, no number)"},
	}
}

// eventClass is the colour class of an event.
func eventClass(e Event) string {
	switch e.Kind {
	case KindClaim:
		return "claim"
	case KindLost:
		return "lost"
	case KindTransition:
		return "transition"
	case KindFault:
		return "fault"
	case KindRefused:
		return "refused"
	case KindHold, KindResume:
		return "hold"
	case KindApplied:
		return "change"
	case KindCall:
		if isMutation(e) {
			return "call"
		}
		return "read"
	case KindNote:
		return "note"
	case kindWorldDecision:
		return "decision"
	}
	return "read"
}

// explain is an event's short label and its sentence for the list, for
// the steps that tell the incident (as the side-by-side replay tells it);
// reads, polls and routine notes are not explained.
func explain(e Event, order map[int64]int) (label, text string, ok bool) {
	epoch := func() string {
		if e.Epoch == 0 {
			return ""
		}
		return fmt.Sprintf("e%d", order[e.Epoch])
	}
	switch e.Kind {
	case KindClaim:
		return "claim " + epoch(), fmt.Sprintf("%s claims the incident task: it holds the task's lease under epoch %s", who(e.Actor), epoch()), true
	case KindLost:
		return "grant ends", fmt.Sprintf("%s: %s", who(e.Actor), canonicalEpochs(order, e.Detail)), true
	case KindFault:
		return "FAULT " + e.Effect, canonicalEpochs(order, e.Detail), true
	case KindTransition:
		from := e.From
		if from == "" {
			from = "new"
		}
		whose := who(e.Actor) + "'s"
		if e.Actor == "temporal" {
			whose = "the workflow engine's"
		}
		return e.To, fmt.Sprintf("%s record %s: %s → %s", whose, e.Operation, from, e.To), true
	case KindCall:
		if isMutation(e) {
			return e.Effect, fmt.Sprintf("%s calls %s(%s) with request key %s", who(e.By), e.Effect, e.Value, orDash(e.Operation)), true
		}
	case KindApplied:
		ids := strings.Join(e.Evidence, ",")
		switch e.Effect {
		case "promotion-accepted":
			return ids, fmt.Sprintf("Aurora accepts %s: promote %s (the writer changes when it completes)", ids, e.Value), true
		case "writer":
			return "writer", fmt.Sprintf("Aurora: the writer is now %s", e.Value), true
		case "record":
			return ids, fmt.Sprintf("Route 53 accepts change %s: traffic %s → %s (asked by %s)", ids, e.From, e.To, who(e.By)), true
		case "insync":
			return ids + " INSYNC", fmt.Sprintf("Route 53: change %s is INSYNC, applied everywhere", ids), true
		}
	case KindRefused:
		return "REFUSED", fmt.Sprintf("%s refused at the gateway (%s): %s", who(e.Actor), e.Effect, canonicalEpochs(order, e.Detail)), true
	case KindHold:
		return "HOLD", fmt.Sprintf("%s holds for the commander: %s", who(e.Actor), canonicalEpochs(order, e.Detail)), true
	case KindResume:
		return "resume", "commander: " + canonicalEpochs(order, e.Detail), true
	case kindWorldDecision:
		name := e.Actor
		if n, ok := laneNames[e.Actor]; ok {
			name = n[0]
		}
		text := fmt.Sprintf("%s decides: %s %s", name, e.Effect, orDash(e.Operation))
		if e.Value != "" {
			text += " (" + e.Value + ")"
		}
		if e.Detail != "" {
			text += ": " + canonicalEpochs(order, e.Detail)
		}
		return e.Effect, text, true
	case KindNote:
		if e.Actor == "commander" || strings.Contains(e.Detail, "adopts") || strings.Contains(e.Detail, "wakes up") ||
			strings.Contains(e.Detail, "late activity") || strings.Contains(e.Detail, "verified") {
			return "", fmt.Sprintf("%s: %s", who(e.Actor), canonicalEpochs(order, e.Detail)), true
		}
	}
	return "", "", false
}

// grantSpans draws each worker's grants: from its claim to the end of its
// grant (lease expired, released), or the end of the trial.
func (t *Trajectory) grantSpans(c *timeline.Chart, lane map[string]int, order map[int64]int) {
	start := map[string]int{}
	band := func(actor string, from int, to int) {
		e := t.Events[from]
		s := timeline.Span{From: simTime(e.At), Label: fmt.Sprintf("%s holds epoch e%d", who(actor), order[e.Epoch]), Class: "epoch"}
		if to >= 0 {
			s.To = simTime(t.Events[to].At)
		}
		c.Lanes[lane[actor]].Spans = append(c.Lanes[lane[actor]].Spans, s)
	}
	for i, e := range t.Events {
		switch e.Kind {
		case KindClaim:
			start[e.Actor] = i
		case KindLost:
			if from, ok := start[e.Actor]; ok {
				band(e.Actor, from, i)
				delete(start, e.Actor)
			}
		}
	}
	open := make([]string, 0, len(start))
	for a := range start {
		open = append(open, a)
	}
	sort.Strings(open) // the same picture every time
	for _, a := range open {
		band(a, start[a], -1)
	}
}

// providerSpans draws Aurora's writer (and a promotion in progress) and
// Route 53's record value and each change PENDING until INSYNC.
func (t *Trajectory) providerSpans(c *timeline.Chart, lane map[string]int) {
	if len(t.Events) == 0 {
		return
	}
	begin := simTime(t.Events[0].At)
	add := func(actor string, s timeline.Span) {
		c.Lanes[lane[actor]].Spans = append(c.Lanes[lane[actor]].Spans, s)
	}
	// Aurora: the writer.
	writer, from := t.Original, begin
	promoting, pFrom := "", begin
	for _, e := range t.Events {
		if e.Kind != KindApplied {
			continue
		}
		switch e.Effect {
		case "promotion-accepted":
			promoting, pFrom = e.Value, simTime(e.At)
		case "writer":
			add("aurora", timeline.Span{From: from, To: simTime(e.At), Label: "writer " + writer, Class: clusterClass(writer)})
			if promoting != "" {
				add("aurora", timeline.Span{From: pFrom, To: simTime(e.At), Label: "promoting " + promoting, Class: "promoting", Row: 1})
				promoting = ""
			}
			writer, from = e.Value, simTime(e.At)
		}
	}
	add("aurora", timeline.Span{From: from, Label: "writer " + writer, Class: clusterClass(writer)})
	if promoting != "" {
		add("aurora", timeline.Span{From: pFrom, Label: "promoting " + promoting, Class: "promoting", Row: 1})
	}
	// Route 53: where traffic points, and each change PENDING then INSYNC.
	value, vFrom := t.Original, begin
	pending := map[string]int{}
	var ids []string
	for i, e := range t.Events {
		if e.Kind != KindApplied {
			continue
		}
		switch e.Effect {
		case "record":
			add("route53", timeline.Span{From: vFrom, To: simTime(e.At), Label: "→ " + value, Class: clusterClass(value)})
			value, vFrom = e.Value, simTime(e.At)
			if len(e.Evidence) > 0 {
				pending[e.Evidence[0]] = i
				ids = append(ids, e.Evidence[0])
			}
		case "insync":
			if len(e.Evidence) > 0 {
				if from, ok := pending[e.Evidence[0]]; ok {
					add("route53", timeline.Span{From: simTime(t.Events[from].At), To: simTime(e.At), Label: e.Evidence[0] + " PENDING", Class: "pending", Row: 1})
					delete(pending, e.Evidence[0])
				}
			}
		}
	}
	add("route53", timeline.Span{From: vFrom, Label: "→ " + value, Class: clusterClass(value)})
	for _, id := range ids { // changes never INSYNC, in order
		if from, ok := pending[id]; ok {
			add("route53", timeline.Span{From: simTime(t.Events[from].At), Label: id + " PENDING", Class: "pending", Row: 1})
		}
	}
}
