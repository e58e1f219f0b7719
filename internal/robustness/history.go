package robustness

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasegate/leasegate/coordinator"
)

// never is the return time of an operation whose outcome is unknown: it
// may take effect at any time after its call.
const never = math.MaxInt64

// History records operations as clients run them. It is safe for
// concurrent use.
type History struct {
	start time.Time

	mu    sync.Mutex
	ops   []porcupine.Operation
	acked map[string]string // operation -> task, for every commit acknowledged
	stats Stats
}

// Stats counts what a run did.
type Stats struct {
	Operations   int            // recorded operations
	Unknown      int            // of which outcome_unknown
	Acknowledged int            // commits acknowledged (committed or historical_retry)
	Faults       map[string]int // faults injected, by kind
}

func (s Stats) String() string {
	var kinds []string
	total := 0
	for k, n := range s.Faults {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		total += n
	}
	sort.Strings(kinds)
	return fmt.Sprintf("operations=%d unknown=%d acknowledged-commits=%d faults=%d (%s)",
		s.Operations, s.Unknown, s.Acknowledged, total, strings.Join(kinds, " "))
}

// NewHistory starts an empty history; its clock starts now.
func NewHistory() *History {
	return &History{start: time.Now(), acked: map[string]string{}, stats: Stats{Faults: map[string]int{}}}
}

// Now is the history's clock.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Record adds one operation called at call (History.Now) that ended with
// out.
func (h *History) Record(client int, in Input, call int64, out Output) {
	ret := h.Now()
	if out.Unknown {
		ret = never
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.stats.Operations++
	if out.Unknown {
		h.stats.Unknown++
	}
	if in.Kind == Commit && (out.Disposition == coordinator.Committed || out.Disposition == coordinator.HistoricalRetry) {
		h.acked[in.Operation] = in.Task
		h.stats.Acknowledged++
	}
}

// Fault counts one injected fault.
func (h *History) Fault(kind string) {
	h.mu.Lock()
	h.stats.Faults[kind]++
	h.mu.Unlock()
}

// Stats is a copy of the counts so far.
func (h *History) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stats
	s.Faults = map[string]int{}
	for k, n := range h.stats.Faults {
		s.Faults[k] = n
	}
	return s
}

// Acknowledged lists every acknowledged commit: operation -> task.
func (h *History) Acknowledged() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]string, len(h.acked))
	for k, v := range h.acked {
		out[k] = v
	}
	return out
}

// Operations is a copy of the recorded operations.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Check runs porcupine on the history. Unknown (the check timed out) is
// reported as such, never as Ok.
func (h *History) Check(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	return porcupine.CheckOperationsVerbose(Model.ToModel(), ops, timeout)
}

// OutputOf turns a call's error into what its client learned.
func OutputOf(done coordinator.Disposition, err error) Output {
	d := coordinator.DispositionOf(err)
	if err == nil {
		d = done
	}
	out := Output{Disposition: d, Unknown: d == coordinator.OutcomeUnknown}
	var e *coordinator.Error
	if d == coordinator.Busy && errors.As(err, &e) && e.Holder != nil {
		out.Holder, out.Epoch = OwnerID(e.Holder.Owner, e.Holder.Lease), e.Holder.Epoch
	}
	return out
}

// OwnerID is a session's identity in the model: owner label and lease.
func OwnerID(owner string, lease int64) string { return fmt.Sprintf("%s/%x", owner, lease) }
