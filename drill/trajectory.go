package drill

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

var epochWord = regexp.MustCompile(`epoch [0-9]+`)

// Kind is what an Event records.
type Kind string

// The kinds of trajectory events.
const (
	KindFault      Kind = "fault"      // a fault fired
	KindClaim      Kind = "claim"      // a worker was granted the incident task
	KindLost       Kind = "lost"       // a worker's grant ended (lease expired or revoked, release)
	KindTransition Kind = "transition" // an operation changed state in the design's journal
	KindRefused    Kind = "refused"    // the gateway refused a worker's request
	KindCall       Kind = "call"       // a provider received a call
	KindApplied    Kind = "applied"    // a provider changed the world
	KindNote       Kind = "note"       // what a worker decided, and why
	KindFenceRead  Kind = "fence-read" // the gateway read the grant current as a call left
	KindHold       Kind = "hold"       // a worker says it stopped for the incident commander (the design's word: it excuses nothing)
	KindResume     Kind = "resume"     // a worker says it goes on after a hold (the design's word)
	// KindDecision is the world's incident commander (or traffic policy)
	// deciding by its written rule on the world's own state: Effect is
	// approve, reject, resolve or hold; Value the rule's reason (see the
	// reason constants in commander.go); To the state it moved the
	// operation to. The graders' only source of a legitimate hold.
	KindDecision Kind = "decision"
)

// Event is one step of a trial's trajectory, in simulated time.
type Event struct {
	At    time.Duration `json:"at"`
	Kind  Kind          `json:"kind"`
	Actor string        `json:"actor"`
	// By is, for a provider's event, who made the call.
	By string `json:"by,omitempty"`
	// Epoch is the grant epoch the actor acted under (0: none). It is an
	// etcd revision: it differs between runs of the same seed.
	Epoch     int64  `json:"epoch,omitempty"`
	Operation string `json:"operation,omitempty"`
	// Effect is "promote" or "traffic" for an operation, the method for a
	// provider call.
	Effect string `json:"effect,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	// Value is the cluster a promotion targets or a record points at.
	Value string `json:"value,omitempty"`
	// Evidence lists the provider ids a CONFIRMED transition cites.
	Evidence []string `json:"evidence,omitempty"`
	Detail   string   `json:"detail,omitempty"`
}

// Trajectory is everything a trial did, in order: claims, journal
// transitions, provider calls and changes, faults. Graders read it.
type Trajectory struct {
	Trial  int    `json:"trial"`
	Design Design `json:"design"`
	// Scenario names the scenario replayed ("" for a trial).
	Scenario Scenario `json:"scenario,omitempty"`
	Events   []Event  `json:"events"`
	// Final is the world when the trial ended, every change settled.
	FinalWriter  string `json:"final_writer"`
	FinalTraffic string `json:"final_traffic"`
	// Original is the writer before the incident.
	Original string `json:"original_writer"`
}

func (t *Trajectory) add(e Event) { t.Events = append(t.Events, e) }

// Render prints the trajectory one event per line. Epochs are shown by
// their order of appearance in the trial (e1, e2, ...), followed by the
// etcd revision unless canonical is set: two runs of the same seed render
// the same canonical text.
func (t *Trajectory) Render(canonical bool) string {
	order := t.epochOrder()
	var b strings.Builder
	fmt.Fprintf(&b, "trial %d design %s: writer before the incident %s\n", t.Trial, t.Design, t.Original)
	for _, e := range t.Events {
		b.WriteString(eventLine(e, order, canonical))
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "end: writer %s, traffic %s\n", t.FinalWriter, t.FinalTraffic)
	return b.String()
}

// eventLine is one event as Render prints it.
func eventLine(e Event, order map[int64]int, canonical bool) string {
	var b strings.Builder
	epoch := "-"
	if e.Epoch != 0 {
		epoch = fmt.Sprintf("e%d", order[e.Epoch])
		if !canonical {
			epoch += fmt.Sprintf("(rev %d)", e.Epoch)
		}
	}
	fmt.Fprintf(&b, "%9.3fs  %-10s %-9s %-14s", e.At.Seconds(), e.Kind, e.Actor, epoch)
	if e.By != "" {
		fmt.Fprintf(&b, " by=%s", e.By)
	}
	if e.Operation != "" {
		fmt.Fprintf(&b, " op=%s", e.Operation)
	}
	if e.Effect != "" {
		fmt.Fprintf(&b, " %s", e.Effect)
	}
	if e.From != "" || e.To != "" {
		fmt.Fprintf(&b, " %s->%s", orDash(e.From), orDash(e.To))
	}
	if e.Value != "" {
		fmt.Fprintf(&b, " value=%s", e.Value)
	}
	if len(e.Evidence) > 0 {
		fmt.Fprintf(&b, " evidence=%s", strings.Join(e.Evidence, ","))
	}
	if d := e.Detail; d != "" {
		if canonical { // the ledger's reasons name epochs too
			d = canonicalEpochs(order, d)
		}
		fmt.Fprintf(&b, " (%s)", d)
	}
	return b.String()
}

// epochOrder numbers the trajectory's epochs by order of appearance
// (their revisions' order): 1, 2, ...
func (t *Trajectory) epochOrder() map[int64]int {
	order := map[int64]int{}
	var epochs []int64
	for _, e := range t.Events {
		if e.Epoch != 0 {
			if _, ok := order[e.Epoch]; !ok {
				order[e.Epoch] = 0
				epochs = append(epochs, e.Epoch)
			}
		}
	}
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] < epochs[j] })
	for i, ep := range epochs {
		order[ep] = i + 1
	}
	return order
}

// canonicalEpochs rewrites "epoch <revision>" in s as "epoch e<n>" (and
// "newest grant is <revision>" likewise), and a dispatch id (a random
// UUID) as <dispatch-id>: what differs between two runs of one trial.
func canonicalEpochs(order map[int64]int, s string) string {
	s = epochWord.ReplaceAllStringFunc(s, func(w string) string {
		if v, err := strconv.ParseInt(strings.TrimPrefix(w, "epoch "), 10, 64); err == nil && order[v] > 0 {
			return fmt.Sprintf("epoch e%d", order[v])
		}
		return w
	})
	s = uuidWord.ReplaceAllString(s, "<dispatch-id>") // the ledger's dispatch ids are random
	return newestWord.ReplaceAllStringFunc(s, func(w string) string {
		if v, err := strconv.ParseInt(strings.TrimPrefix(w, "newest grant is "), 10, 64); err == nil && order[v] > 0 {
			return fmt.Sprintf("newest grant is e%d", order[v])
		}
		return w
	})
}

var (
	newestWord = regexp.MustCompile(`newest grant is [0-9]+`)
	uuidWord   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
