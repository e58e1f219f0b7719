package drill

import (
	"math"
	"slices"
	"strings"
	"time"
)

// The cost of safety (seed 003: "During ambiguous cases, Northstar kept
// checkout read-only for another 45 to 90 seconds"), measured per trial in
// simulated time from the incident's start (the trial's time zero, when
// the primary's impairment is noticed).

// trialCost is one trial's cost of safety.
type trialCost struct {
	// recovered: traffic ends safely on the writer (the record points at
	// the final writer, off the impaired original, its change INSYNC);
	// recovery is when that last became and stayed true.
	recovered bool
	recovery  time.Duration
	// held is the time, until recovery (or the trial's end), during which
	// an operation's outcome was ambiguous (UNKNOWN or MANUAL_REVIEW):
	// protected writes stay held while the design establishes the truth.
	held time.Duration
	// commander: the incident commander had to do more than approve (a
	// MANUAL_REVIEW, a refusal, a hold); hold: the trial ended in a hold.
	commander, hold bool
	// holdReason is the world's hold the trial ended in (worldHold), ""
	// if none.
	holdReason string
}

func costOf(t *Trajectory) trialCost {
	var c trialCost
	writer, record, latest := t.Original, t.Original, ""
	insync := map[string]bool{}
	since := time.Duration(-1)
	ambiguous := map[string]bool{} // operations in UNKNOWN or MANUAL_REVIEW
	var ambiguousFrom, end time.Duration
	for _, e := range t.Events {
		end = max(end, e.At)
		switch {
		case e.Kind == KindApplied && e.Effect == "writer":
			writer = e.Value
		case e.Kind == KindApplied && e.Effect == "record":
			record, latest = e.Value, first(e.Evidence)
		case e.Kind == KindApplied && e.Effect == "insync":
			insync[first(e.Evidence)] = true
		case e.Kind == KindTransition:
			before := len(ambiguous) > 0
			if e.To == "UNKNOWN" || e.To == "MANUAL_REVIEW" {
				ambiguous[opKey(e)] = true
			} else {
				delete(ambiguous, opKey(e))
			}
			if e.To == "MANUAL_REVIEW" || e.To == "REJECTED" || strings.HasPrefix(e.Detail, "resolve:") {
				c.commander = true
			}
			switch now := len(ambiguous) > 0; {
			case !before && now:
				ambiguousFrom = e.At
			case before && !now && since < 0:
				c.held += e.At - ambiguousFrom
			}
		case isWorldDecision(e) && e.Effect != decisionApprove:
			c.commander = true
		}
		safe := record == writer && writer != t.Original && insync[latest]
		switch {
		case safe && since < 0:
			since = e.At
			if len(ambiguous) > 0 {
				c.held += e.At - ambiguousFrom
				ambiguousFrom = e.At
			}
		case !safe:
			since = -1
		}
	}
	c.recovered = since >= 0 && t.FinalTraffic == t.FinalWriter
	if c.recovered {
		c.recovery = since
	} else {
		if len(ambiguous) > 0 {
			c.held += end - ambiguousFrom
		}
		c.holdReason = worldHold(t).reason(t)
		c.hold = c.holdReason != ""
	}
	return c
}

func first(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// Seconds is a distribution of simulated seconds over some trials.
type Seconds struct {
	Trials int     `json:"trials"`
	P50    float64 `json:"p50"`
	P95    float64 `json:"p95"`
	Max    float64 `json:"max"`
}

func distribution(ds []time.Duration) Seconds {
	if len(ds) == 0 {
		return Seconds{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))].Seconds()
	}
	return Seconds{Trials: len(s), P50: at(0.5), P95: at(0.95), Max: s[len(s)-1].Seconds()}
}

// Cost is a design's cost of safety over its trials.
type Cost struct {
	// Recovery: from the incident's start to traffic safely on the writer,
	// over the trials that got there.
	Recovery Seconds `json:"recovery_seconds"`
	// WritesHeld: time with protected writes held while an outcome was
	// ambiguous, over the trials that had an ambiguous outcome.
	WritesHeld Seconds `json:"writes_held_seconds"`
	// Commander: trials where the commander had to do more than approve;
	// Holds: trials that ended in a hold (traffic held for the commander).
	Commander int `json:"commander_trials"`
	Holds     int `json:"hold_trials"`
	// HoldReasons counts the holds by reason.
	HoldReasons map[string]int `json:"hold_reasons"`

	recovery, held []time.Duration
}

func (c *Cost) add(tc trialCost) {
	if tc.recovered {
		c.recovery = append(c.recovery, tc.recovery)
	}
	if tc.held > 0 {
		c.held = append(c.held, tc.held)
	}
	if tc.commander {
		c.Commander++
	}
	if tc.hold {
		c.Holds++
		if c.HoldReasons == nil {
			c.HoldReasons = map[string]int{}
		}
		c.HoldReasons[tc.holdReason]++
	}
}

func (c *Cost) finish() { c.Recovery, c.WritesHeld = distribution(c.recovery), distribution(c.held) }
