package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Ledger keeps the records of external effects of the tasks of one
// coordinator's keyspace, and is the gateway to their providers.
type Ledger struct {
	c        *coordinator.Coordinator
	adapters map[string]Adapter // by kind
	lg       *zap.Logger
	hints    hints
	metrics  *metrics
	options
}

// hints are the records this ledger last wrote or read, so that the next
// transition of an operation can go without a read before its Txn. A hint
// is never an answer: every Txn built from one compares the record's
// ModRevision, so a stale hint only gets that Txn refused, and the Else of
// the refusal reads the record as it is. Only records that a transition can
// still leave are kept, at most maxHints of them.
type hints struct {
	mu sync.Mutex
	m  map[hintKey]Record
}

type hintKey struct{ tenant, task, operation string }

const maxHints = 4096

func (h *hints) get(tenant, task, operation string) (Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rec, ok := h.m[hintKey{tenant, task, operation}]
	return rec, ok
}

func (h *hints) put(rec Record) {
	k := hintKey{rec.Tenant, rec.Task, rec.Operation}
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec.State == "" || rec.State.Terminal() || rec.Revision == 0 {
		delete(h.m, k)
		return
	}
	if h.m == nil {
		h.m = map[hintKey]Record{}
	}
	if _, ok := h.m[k]; !ok && len(h.m) >= maxHints {
		for old := range h.m { // any one: a lost hint costs one read
			delete(h.m, old)
			break
		}
	}
	h.m[k] = rec
}

// New is a ledger on c's keyspace with the given adapters (WithAdapters).
// A ledger without adapters can read records and Resolve them, not
// dispatch.
func New(c *coordinator.Coordinator, opts ...Option) (*Ledger, error) {
	if c == nil {
		return nil, store.NewError(store.InvalidInput, "ledger", "", "", "nil coordinator", nil)
	}
	o := options{now: time.Now, sleep: sleepTimer, pollInitial: DefaultPollInitial, pollMax: DefaultPollMax,
		polls: DefaultPolls, recordTimeout: DefaultRecordTimeout, callTimeout: DefaultCallTimeout, validity: DefaultValidity}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, store.NewError(store.InvalidInput, "ledger", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	l := &Ledger{c: c, adapters: map[string]Adapter{}, options: o}
	for _, a := range o.adapterList {
		if _, dup := l.adapters[a.Kind()]; dup {
			return nil, store.NewError(store.InvalidInput, "ledger", "", "", fmt.Sprintf("two adapters for kind %q", a.Kind()), nil)
		}
		l.adapters[a.Kind()] = a
	}
	if o.logger == nil {
		o.logger = store.Of(c).Logger()
	}
	l.lg = o.logger.Named("ledger")
	if o.registerer != nil {
		m, err := newMetrics(o.registerer)
		if err != nil {
			return nil, store.NewError(store.InvalidInput, "ledger", "", "", fmt.Sprintf("%v", err), nil)
		}
		l.metrics = m
	}
	return l, nil
}

func (l *Ledger) checkGrantOp(op string, g coordinator.Grant, operation string) error {
	if err := g.Validate(); err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := coordinator.CheckLabel("operation", operation); err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	return nil
}

func (l *Ledger) fields(g coordinator.Grant, operation string, extra ...zap.Field) []zap.Field {
	return append([]zap.Field{zap.String("tenant", g.Tenant), zap.String("task", g.Task),
		zap.String("operation", operation), zap.Int64("epoch", g.Epoch), zap.String("owner", g.Owner)}, extra...)
}

func (l *Ledger) stamped(ev Evidence) *Evidence {
	if ev.At.IsZero() {
		ev.At = l.now()
	}
	ev.At = ev.At.UTC()
	return &ev
}

// seen is an observation as a journal reason quotes it: the readable part,
// its detail's fields (key=value, in key order) when the detail is a JSON
// object, else its digest cut to 12 characters.
func seen(o Observation) string {
	var m map[string]any
	if json.Unmarshal(o.Detail, &m) != nil || len(m) == 0 {
		return short(o.Digest)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := fmt.Sprint(m[k])
		if v == "" {
			v = "-"
		}
		parts[i] = k + "=" + v
	}
	s := strings.Join(parts, " ")
	if len(s) > seenLen {
		s = s[:seenLen] + "..."
	}
	return s
}

// seenLen bounds what a reason quotes of one observation.
const seenLen = 120

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func truncate(s string) string {
	if len(s) > MaxTextLen {
		return s[:MaxTextLen]
	}
	return s
}
