package drill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Scenario names a deterministic replay of an incident, run in both
// designs instead of the randomized trials.
type Scenario string

// ScenarioIncident replays seed 003's timeline ("Saturday at 02:13"): A's
// promotion acknowledged and the answer lost before it is persisted; the
// heartbeat timeout; B taking over with key attempt-b and a stale cached
// topology naming the original writer; A's late traffic change A-184 to the
// promoted secondary; B's B-771 back to the original; the commander's repair
// R-009; traffic moving three times.
const ScenarioIncident Scenario = "incident"

// Scenarios lists the named scenarios. It returns a new slice each time:
// the caller may keep or change it.
func Scenarios() []Scenario { return slices.Clone(scenarios) }

var scenarios = []Scenario{ScenarioIncident}

// script fixes a scenario's timings: the marks an actor waits for (until),
// and the providers' delays.
type script struct {
	start          time.Duration            // worker A starts
	marks          map[string]time.Duration // "<actor>/<mark>": when it happens
	promotionDelay time.Duration
	dnsDelay       time.Duration
	auditDelay     time.Duration
	leaseTTL       time.Duration // heartbeat timeout
	takeoverDelay  time.Duration // from the lease's expiry to the replacement polling the task
	attempts       int           // the naive activity's attempts per worker
	changeIDs      map[string]string
	repairAt       time.Duration // the commander's repair of traffic
}

// clock is how the seed's clock reads at simulated time d: the incident's
// time zero is 02:12:00, when the primary region's impairment began.
func clock(d time.Duration) string { return simTime(d).Format("15:04:05") }

func incidentScript() *script {
	at := func(hms string) time.Duration {
		t, _ := time.Parse("15:04:05", hms)
		return t.Sub(time.Date(0, 1, 1, 2, 12, 0, 0, time.UTC))
	}
	return &script{
		start: at("02:13:00"), // Relay assembles the evidence
		marks: map[string]time.Duration{
			commander + "/approval": at("02:13:18"), // Darius approves the exact digest
			"worker-a/dispatch":     at("02:13:24"), // A's handler dispatches (request key attempt-a)
			"worker-a/call":         at("02:13:27"), // AWS accepts and acknowledges; A's connection fails
			"worker-b/hold":         at("02:14:22"), // Route 53 accepts B-771
		},
		promotionDelay: at("02:13:46") - at("02:13:27"), // the topology names the secondary at 02:13:46
		dnsDelay:       20 * time.Second,                // A-184 has left provider processing before 02:14:22
		auditDelay:     30 * time.Second,                // CloudTrail corroborates later
		leaseTTL:       at("02:13:33") - at("02:13:27"), // the heartbeat timeout at 02:13:33
		takeoverDelay:  at("02:13:40") - at("02:13:33"), // B loads the history at 02:13:40
		attempts:       1,
		changeIDs:      map[string]string{"worker-a": "A-184", "worker-b": "B-771", commander: "R-009"},
		repairAt:       at("02:21:08"),
	}
}

// incidentPlan is the incident's faults: A pauses right after AWS accepted
// its promotion (its heartbeats stop; it wakes at 02:13:50), and B's first
// topology read is a stale cache.
func incidentPlan(s *script) plan {
	return plan{stopIn: winPromoteApply, staleCache: true,
		takeoverPause: 23*time.Second - s.leaseTTL, // wakes at 02:13:50
	}
}

// changeID names the provider's n-th DNS change, by who made it.
func (s *script) changeID(actor string, n int) string {
	if id, ok := s.changeIDs[actor]; ok {
		delete(s.changeIDs, actor) // a second change by the same actor gets a plain id
		return id
	}
	return fmt.Sprintf("C-%d", n)
}

// until sleeps until the scenario's mark for this worker, and reports
// whether there was one still ahead (false: go on as the design would).
func (wk *worker) until(mark string) bool {
	sc := wk.w.s.script
	if sc == nil {
		return false
	}
	t, ok := sc.marks[wk.name+"/"+mark]
	if !ok || t < wk.w.s.now {
		return false
	}
	_ = wk.w.sleep(t - wk.w.s.now) // a worker's own wait, or its call's at the gateway
	return true
}

func (w *world) leaseTTL() time.Duration {
	if w.s.script != nil {
		return w.s.script.leaseTTL
	}
	return simLeaseTTL
}

func (w *world) takeoverDelay() time.Duration {
	if w.s.script != nil {
		return w.s.script.takeoverDelay
	}
	return 0
}

func (w *world) naiveAttempts() int {
	if w.s.script != nil {
		return w.s.script.attempts
	}
	return naiveAttempts
}

// attemptKey is the naive activity's request key: a fresh one per attempt
// (the incident's bug). The scenario spells them as the seed does.
func (w *world) attemptKey(worker string, attempt int) string {
	if w.s.script != nil && attempt == 1 {
		return "attempt-" + strings.TrimPrefix(worker, "worker-")
	}
	return fmt.Sprintf("%s-attempt-%d", worker, attempt)
}

// runScenario runs a named scenario in design d.
func (r *runner) runScenario(ctx context.Context, d Design, sc Scenario) (*Trajectory, []error) {
	s := incidentScript()
	t, errs := r.runWorld(ctx, d, 0, incidentPlan(s), s, rand.New(rand.NewPCG(3, 3))) // the scenario does not depend on --seed
	t.Scenario = sc
	return t, errs
}

// commanderRepair is the incident commander's look at the traffic record
// once both change records and the writer topology are joined (02:21:08):
// a record that does not point at the writer gets the repair change R-009
// toward it; one that does needs none.
func (w *world) commanderRepair() {
	writer, _ := w.topo.Describe(caller{actor: commander})
	record := w.dns.Record(caller{actor: commander})
	if record == writer {
		w.traj.add(Event{At: w.s.now, Kind: KindNote, Actor: "commander",
			Detail: fmt.Sprintf("joins the writer topology with the change records: %s points at the writer %s; no repair needed", recordName, writer)})
		return
	}
	w.traj.add(Event{At: w.s.now, Kind: KindNote, Actor: "commander",
		Detail: fmt.Sprintf("joins the writer topology with the change records: %s points at %s, the writer is %s; approves the repair", recordName, record, writer)})
	w.dns.submit(caller{actor: commander, key: "repair"}, writer)
}

// storyLine is one step of a trajectory as the side-by-side replay tells
// it.
type storyLine struct {
	at   time.Duration
	text string
}

// who names an actor in the story: A, B, the commander, a provider.
func who(actor string) string {
	switch actor {
	case "worker-a":
		return "A"
	case "worker-b":
		return "B"
	case "worker-c":
		return "C"
	case "aurora":
		return "Aurora"
	case "route53":
		return "Route 53"
	}
	return actor
}

// story is the trajectory's steps that tell the incident: claims, leases,
// faults, the journal's transitions, mutating calls and what the providers
// did, refusals, holds, the commander's decisions. Reads (topology,
// change status, audit lookups) are left out.
func story(t *Trajectory) []storyLine {
	var out []storyLine
	add := func(e Event, format string, args ...any) {
		out = append(out, storyLine{at: e.At, text: fmt.Sprintf(format, args...)})
	}
	for _, e := range t.Events {
		switch e.Kind {
		case KindClaim:
			add(e, "%s claims the incident task", who(e.Actor))
		case KindLost:
			add(e, "%s: %s", who(e.Actor), e.Detail)
		case KindFault:
			add(e, "FAULT %s: %s", e.Effect, e.Detail)
		case KindTransition:
			from := e.From
			if from == "" {
				from = "(new)"
			}
			add(e, "%s %s %s→%s", who(e.Actor), e.Operation, from, e.To)
		case KindCall:
			if e.Effect == "PromoteTarget" || e.Effect == "ChangeResourceRecordSets" {
				add(e, "%s calls %s(%s) key %s", who(e.By), e.Effect, e.Value, orDash(e.Operation))
			}
		case KindApplied:
			switch e.Effect {
			case "promotion-accepted":
				add(e, "Aurora accepts %s: promote %s", strings.Join(e.Evidence, ","), e.Value)
			case "writer":
				add(e, "Aurora's topology: the writer is %s", e.Value)
			case "record":
				add(e, "Route 53 accepts %s: traffic %s→%s (by %s)", strings.Join(e.Evidence, ","), e.From, e.To, who(e.By))
			case "insync":
				add(e, "Route 53: %s INSYNC", strings.Join(e.Evidence, ","))
			}
		case KindRefused:
			add(e, "%s REFUSED at the gateway (%s): %s", who(e.Actor), e.Effect, e.Detail)
		case KindHold:
			add(e, "%s HOLDS for the commander: %s", who(e.Actor), e.Detail)
		case KindResume:
			add(e, "commander: %s", e.Detail)
		case KindNote:
			if e.Actor == "commander" || strings.Contains(e.Detail, "adopts") || strings.Contains(e.Detail, "wakes up") ||
				strings.Contains(e.Detail, "late activity") || strings.Contains(e.Detail, "verified") {
				add(e, "%s: %s", who(e.Actor), e.Detail)
			}
		}
	}
	return out
}

// SideBySide prints the naive and the fenced trajectory of one scenario in
// two columns against the seed's clock (02:13:00 ...), each followed by
// how it ended and its violations.
func SideBySide(naive, fenced *Trajectory) string {
	const col = 62
	wrap := func(s string) []string {
		var lines []string
		for len(s) > col {
			cut := strings.LastIndex(s[:col], " ")
			if cut <= 0 {
				cut = col
			}
			lines = append(lines, s[:cut])
			s = "  " + strings.TrimLeft(s[cut:], " ")
		}
		return append(lines, s)
	}
	n, f := story(naive), story(fenced)
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s  %-*s  %s\n", "CLOCK", col, "NAIVE (the incident's design)", "FENCED (leasegate's ledger and fence)")
	i, j := 0, 0
	for i < len(n) || j < len(f) {
		at := time.Duration(1<<62 - 1)
		if i < len(n) {
			at = n[i].at.Truncate(time.Second)
		}
		if j < len(f) && f[j].at.Truncate(time.Second) < at {
			at = f[j].at.Truncate(time.Second)
		}
		var left, right []string
		for ; i < len(n) && n[i].at.Truncate(time.Second) == at; i++ {
			left = append(left, wrap(n[i].text)...)
		}
		for ; j < len(f) && f[j].at.Truncate(time.Second) == at; j++ {
			right = append(right, wrap(f[j].text)...)
		}
		for k := 0; k < max(len(left), len(right)); k++ {
			c, l, r := "", "", ""
			if k == 0 {
				c = clock(at)
			}
			if k < len(left) {
				l = left[k]
			}
			if k < len(right) {
				r = right[k]
			}
			fmt.Fprintf(&b, "%-8s  %-*s  %s\n", c, col, l, r)
		}
	}
	ends := func(t *Trajectory) []string {
		out := []string{fmt.Sprintf("end: writer %s, traffic %s, %d moves", t.FinalWriter, t.FinalTraffic, trafficMoves(t))}
		vs := Grade(t)
		if len(vs) == 0 {
			out = append(out, "graders: no violation")
		}
		order := t.epochOrder()
		for _, v := range vs {
			out = append(out, wrap("VIOLATION "+string(v.Grader)+": "+canonicalEpochs(order, v.Detail))...)
		}
		return out
	}
	l, r := ends(naive), ends(fenced)
	for k := 0; k < max(len(l), len(r)); k++ {
		var x, y string
		if k < len(l) {
			x = l[k]
		}
		if k < len(r) {
			y = r[k]
		}
		fmt.Fprintf(&b, "%-8s  %-*s  %s\n", "", col, x, y)
	}
	return b.String()
}

// trafficMoves counts the record's changes of target.
func trafficMoves(t *Trajectory) int {
	n := 0
	for _, e := range t.Events {
		if e.Kind == KindApplied && e.Effect == "record" && e.From != e.To {
			n++
		}
	}
	return n
}
