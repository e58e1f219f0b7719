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

	mu       sync.Mutex
	ops      []porcupine.Operation
	acked    map[string]string          // operation -> task, for every commit acknowledged
	receipts map[string][]ClientReceipt // operation -> every receipt a client was given
	gateway  map[int]bool               // clients that go through the gateway
	stats    Stats
}

// ReceiptSeen is what a receipt says: committed version, epoch, revision.
type ReceiptSeen struct{ Version, Epoch, Revision int64 }

// ClientReceipt is a receipt one client was given.
type ClientReceipt struct {
	Client int
	ReceiptSeen
}

// Stats counts what a run did.
type Stats struct {
	Operations   int            // recorded operations
	Unknown      int            // of which outcome_unknown
	Holds        int            // of which authority_unavailable (nothing written)
	Acknowledged int            // commits acknowledged (committed or historical_retry)
	Retried      int            // of which historical_retry (a retry answered with the original receipt)
	Fenced       int            // commits refused stale_owner or expired_owner
	Gateway      PathStats      // of all these, those of clients through the gateway
	FailedOver   int            // gateway calls served by a replica other than the worker's own (it was down)
	Faults       map[string]int // faults injected, by kind
}

// PathStats counts the operations of the clients that go through the
// gateway.
type PathStats struct {
	Operations, Unknown, Holds, Acknowledged, Retried, Fenced int
}

func (p *PathStats) add(q PathStats) {
	p.Operations += q.Operations
	p.Unknown += q.Unknown
	p.Holds += q.Holds
	p.Acknowledged += q.Acknowledged
	p.Retried += q.Retried
	p.Fenced += q.Fenced
}

// Add adds t's counts to s.
func (s *Stats) Add(t Stats) {
	s.Operations += t.Operations
	s.Unknown += t.Unknown
	s.Holds += t.Holds
	s.Acknowledged += t.Acknowledged
	s.Retried += t.Retried
	s.Fenced += t.Fenced
	s.Gateway.add(t.Gateway)
	s.FailedOver += t.FailedOver
	if s.Faults == nil {
		s.Faults = map[string]int{}
	}
	for k, n := range t.Faults {
		s.Faults[k] += n
	}
}

func (s Stats) String() string {
	var kinds []string
	total := 0
	for k, n := range s.Faults {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		total += n
	}
	sort.Strings(kinds)
	return fmt.Sprintf("operations=%d unknown=%d holds=%d acknowledged-commits=%d (retried %d) fenced-commits=%d; through the gateway: operations=%d unknown=%d holds=%d acknowledged-commits=%d (retried %d) fenced-commits=%d, calls failed over to another replica=%d; faults=%d (%s)",
		s.Operations, s.Unknown, s.Holds, s.Acknowledged, s.Retried, s.Fenced,
		s.Gateway.Operations, s.Gateway.Unknown, s.Gateway.Holds, s.Gateway.Acknowledged, s.Gateway.Retried, s.Gateway.Fenced, s.FailedOver,
		total, strings.Join(kinds, " "))
}

// NewHistory starts an empty history; its clock starts now.
func NewHistory() *History {
	return &History{start: time.Now(), acked: map[string]string{}, receipts: map[string][]ClientReceipt{},
		gateway: map[int]bool{}, stats: Stats{Faults: map[string]int{}}}
}

// Gatewayed marks client as one that goes through the gateway (its
// operations are counted apart as well).
func (h *History) Gatewayed(client int) {
	h.mu.Lock()
	h.gateway[client] = true
	h.mu.Unlock()
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
	var n PathStats
	n.Operations = 1
	switch {
	case out.Unknown:
		n.Unknown = 1
	case out.Disposition == coordinator.AuthorityUnavailable:
		n.Holds = 1
	}
	if in.Kind == Commit && (out.Disposition == coordinator.Committed || out.Disposition == coordinator.HistoricalRetry) {
		h.acked[in.Operation] = in.Task
		h.receipts[in.Operation] = append(h.receipts[in.Operation],
			ClientReceipt{Client: client, ReceiptSeen: ReceiptSeen{Version: out.Version, Epoch: out.Epoch, Revision: out.Revision}})
		n.Acknowledged = 1
		if out.Disposition == coordinator.HistoricalRetry {
			n.Retried = 1
		}
	}
	if in.Kind == Commit && (out.Disposition == coordinator.StaleOwner || out.Disposition == coordinator.ExpiredOwner) {
		n.Fenced = 1
	}
	h.stats.add(n)
	if h.gateway[client] {
		h.stats.Gateway.add(n)
	}
}

func (s *Stats) add(n PathStats) {
	s.Operations += n.Operations
	s.Unknown += n.Unknown
	s.Holds += n.Holds
	s.Acknowledged += n.Acknowledged
	s.Retried += n.Retried
	s.Fenced += n.Fenced
}

// Receipts lists, per operation, every receipt a client was given.
func (h *History) Receipts() map[string][]ClientReceipt {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]ClientReceipt, len(h.receipts))
	for k, v := range h.receipts {
		out[k] = append([]ClientReceipt(nil), v...)
	}
	return out
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
	if err != nil {
		out.Detail = err.Error()
	}
	var e *coordinator.Error
	if d == coordinator.Busy && errors.As(err, &e) && e.Holder != nil {
		out.Holder, out.Epoch = OwnerID(e.Holder.Owner, e.Holder.Lease), e.Holder.Epoch
	}
	return out
}

// OwnerID is a session's identity in the model: owner label and lease.
func OwnerID(owner string, lease int64) string { return fmt.Sprintf("%s/%x", owner, lease) }
