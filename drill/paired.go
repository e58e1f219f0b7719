package drill

import "time"

// The cost of safety, paired: the same seed and trial in both designs —
// the same fault plan — fenced minus naive. Seed 003: "During ambiguous
// cases, Northstar kept checkout read-only for another 45 to 90 seconds.
// More orders entered a queue instead of receiving an immediate answer."

// The customer's side in the seed's units.
const (
	// ordersPerMinute is the seed's Saturday peak: 48,000 order operations
	// a minute, each queued while writes are held.
	ordersPerMinute = 48_000
	// The seed's incident queued 11,842 operations and showed 1,906
	// shoppers a checkout warning: the drill's model of warnings is that
	// ratio of the orders queued (the seed gives no finer model).
	seedQueued, seedWarned = 11_842, 1_906
)

// Paired is the cost of safety over the trials both designs ran, trial by
// trial (the same plan), fenced minus naive.
type Paired struct {
	// Recovery: time to traffic on the writer, over the trials both
	// designs recovered.
	Recovery Seconds `json:"recovery_delta_seconds"`
	// WritesHeld: time with writes held, over every trial both ran.
	WritesHeld Seconds `json:"writes_held_delta_seconds"`
	// OrdersQueued and Warned: the customer's side of WritesHeld, in the
	// seed's units (orders queued at 48,000 a minute; shoppers warned at
	// the seed's ratio of warnings to queued orders), as distributions of
	// per-trial counts (their Seconds fields carry counts here).
	OrdersQueued Seconds `json:"orders_queued_delta"`
	Warned       Seconds `json:"shoppers_warned_delta"`
}

// paired pairs two designs' per-trial costs by trial number (nil if no
// trial ran in both).
func paired(fenced, naive *DesignReport) *Paired {
	var rec, held, orders, warned []time.Duration
	for trial, f := range fenced.costs {
		n, ok := naive.costs[trial]
		if !ok {
			continue
		}
		if f.recovered && n.recovered {
			rec = append(rec, f.recovery-n.recovery)
		}
		d := f.held - n.held
		held = append(held, d)
		q := queued(f.held) - queued(n.held)
		orders = append(orders, time.Duration(q)*time.Second)
		warned = append(warned, time.Duration(q*seedWarned/seedQueued)*time.Second)
	}
	if len(held) == 0 {
		return nil
	}
	return &Paired{Recovery: distribution(rec), WritesHeld: distribution(held), OrdersQueued: distribution(orders), Warned: distribution(warned)}
}

// queued is the orders queued while writes are held for d.
func queued(d time.Duration) int64 { return int64(d) * ordersPerMinute / int64(time.Minute) }
