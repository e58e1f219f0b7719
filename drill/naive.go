package drill

import (
	"errors"
	"fmt"
	"time"
)

// The naive design is the one the incident ran: a durable workflow history
// (Temporal's, here in memory), a controller lease (real etcd, as the
// Kubernetes Lease was) that nothing downstream checks, and one coarse
// recoverRegion activity that promotes and then points traffic, with a
// fresh request key per attempt. Its history records what it saw; what it
// did not see (an applied call whose answer was lost) it records as an
// attempt with no result — UNKNOWN — and retries as a new attempt.

// naiveAttempts is the activity's retry budget per worker.
const naiveAttempts = 3

// naiveInsyncWait is how long the activity waits for the DNS change before
// it reports completion anyway.
const naiveInsyncWait = 10 * time.Second

// naiveHistory is the workflow's durable history.
type naiveHistory struct {
	completed bool
	open      map[string]string // worker -> its open attempt key
}

// timeout is the workflow engine's heartbeat timeout of a worker's open
// attempt: no result was recorded, so its outcome is unknown.
func (h *naiveHistory) timeout(w *world, worker string) {
	key, ok := h.open[worker]
	if !ok {
		return
	}
	delete(h.open, worker)
	w.traj.add(Event{At: w.s.now, Kind: KindTransition, Actor: "temporal", Operation: key, Effect: "promote",
		From: "STARTED", To: "UNKNOWN", Detail: "activity heartbeat timeout; no result recorded"})
}

func (h *naiveHistory) start(worker, key string) {
	if h.open == nil {
		h.open = map[string]string{}
	}
	h.open[worker] = key
}

func (wk *worker) transition(key, effect, from, to string, evidence ...string) {
	wk.record(Event{Kind: KindTransition, Operation: key, Effect: effect, From: from, To: to, Evidence: evidence})
}

// runNaive is one naive worker: claim the controller lease, then run the
// coarse activity until the history says it completed.
func (wk *worker) runNaive() {
	if err := wk.acquire(); err != nil {
		if !errors.Is(err, errStop) {
			wk.w.fail(err)
		}
		return
	}
	w := wk.w
	h := &w.history
	if h.completed {
		wk.note("history: recovery already completed")
		wk.release()
		return
	}
	if wk.first {
		wk.topology()
		if !wk.until("plan") {
			wk.a.step()
		}
		wk.note("plan: promote %s, then point %s at it", clusterSecondary, recordName)
		if !w.commanderOnPlan(wk.a, clusterSecondary) {
			wk.transition("plan", "promote", "", "REJECTED")
			wk.hold(holdCommanderRefused, "the commander refused the plan: traffic held")
			wk.release()
			return
		}
		wk.note("commander approved the plan")
	} else if wk.loadHistory(); w.audit.count("PromoteTarget") > 0 && !h.completed {
		n := w.audit.count("PromoteTarget")
		// The new controller asks the audit trail whether the promotion
		// reached the provider; if it did, it skips to traffic.
		wk.note("audit trail shows %d PromoteTarget event(s); skipping to traffic", n)
		h.completed = wk.naiveTraffic(fmt.Sprintf("%s-attempt-0", wk.name), wk.topology(), "")
		wk.finishNaive()
		return
	}
	for attempt := 1; attempt <= w.naiveAttempts() && !h.completed; attempt++ {
		key := w.attemptKey(wk.name, attempt) // a fresh key per attempt: the incident's bug
		if !wk.until("dispatch") {
			wk.a.step()
		}
		h.start(wk.name, key)
		wk.transition(key, "promote", "", "STARTED")
		if !wk.until("call") {
			wk.a.step()
		}
		wk.stopAt(winPromoteClaim, "after its attempt started, before the call left")
		req, err := w.topo.Promote(wk.caller(key), clusterSecondary)
		if err == nil {
			wk.stopAt(winPromoteApply, "after the provider accepted the promotion, before anything is recorded")
		}
		if err != nil {
			delete(h.open, wk.name)
			to := "FAILED"
			if errors.Is(err, errResponseLost) {
				to = "UNKNOWN" // the activity timed out; it will be retried as a new attempt
			}
			wk.transition(key, "promote", "STARTED", to)
			// Hold traffic on the writer it knows, then retry.
			known := wk.topology()
			if !wk.until("hold") {
				wk.a.step()
			}
			wk.naiveChange(key+"-hold", known)
			continue
		}
		if wk.naiveTraffic(key, clusterSecondary, req) {
			if wk.failed {
				// The old worker's late completion: the history rejects it,
				// but its provider calls were made.
				wk.note("late activity completion rejected by the workflow history")
				return
			}
			delete(h.open, wk.name)
			h.completed = true
			break
		}
	}
	wk.finishNaive()
}

// loadHistory is the replacement loading the workflow's durable history
// before it decides (seed 003: B "loaded the durable workflow history").
func (wk *worker) loadHistory() {
	if !wk.until("history") {
		wk.a.step()
	}
}

// naiveTraffic points the record at target (the checkpointed plan's
// target: not revalidated), waits a little for INSYNC and records the
// activity completed either way.
func (wk *worker) naiveTraffic(key, target, promotion string) bool {
	if !wk.failed || wk.w.s.script == nil { // the woken worker of the scenario calls at once
		wk.a.step()
	}
	wk.stopAt(winTrafficClaim, "before its traffic call left")
	id, ok := wk.naiveChange(key, target)
	if !ok {
		return false
	}
	wk.stopAt(winTrafficApply, "after the provider accepted the traffic change, before anything is recorded")
	for waited := time.Duration(0); waited < naiveInsyncWait; waited += 2 * time.Second {
		if wk.w.dns.GetChange(wk.caller(key), id) == statusInsync {
			break
		}
		wk.a.sleep(2 * time.Second)
	}
	if wk.failed {
		return true
	}
	if promotion != "" {
		wk.transition(key, "promote", "STARTED", "CONFIRMED", promotion)
	}
	wk.transition(key, "traffic", "", "CONFIRMED", id)
	return true
}

// naiveChange submits a DNS change through the naive gateway, which checks
// who may call the adapter but not whether the caller is still the owner.
func (wk *worker) naiveChange(key, value string) (string, bool) {
	id, _, err := wk.w.dns.Change(wk.caller(key), value, "")
	if err != nil {
		wk.transition(key, "traffic", "", "UNKNOWN")
		return "", false
	}
	return id, true
}

func (wk *worker) finishNaive() {
	if wk.w.history.completed {
		wk.w.closed = true
		wk.note("history: recovery completed")
	} else {
		wk.note("history: recovery not completed after %d attempts", wk.w.naiveAttempts())
	}
	wk.release()
}
