package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// DefaultWindow is the retention window unless WithWindow says otherwise.
const DefaultWindow = 7 * 24 * time.Hour

// pageSize is how many keys one read of a scan returns.
const pageSize = 1000

// batchSize is how many guarded deletes share one Txn: two compares each,
// under etcd's default limit of 128 operations per Txn.
const batchSize = 50

// Kind names what a Candidate is.
type Kind string

// The kinds of key the collector deletes.
const (
	KindOp    Kind = "op"    // <p>/ops/<tenant>/<task>/<operation>
	KindFence Kind = "fence" // <p>/fence/<tenant>/<task>
	KindMark  Kind = "mark"  // <p>/retention/marks/<revision>
	// KindEffect is a resolved ledger record, <p>/effects/<tenant>/<task>/<operation>,
	// deleted together with its journal entries.
	KindEffect Kind = "effect"
)

// Candidate is one key a Plan would delete, with what its guard compares.
type Candidate struct {
	Kind      Kind   `json:"kind"`
	Key       string `json:"key"`
	Tenant    string `json:"tenant,omitempty"`
	Task      string `json:"task,omitempty"`
	Operation string `json:"operation,omitempty"`
	// ModRevision is the key's ModRevision when it was read: the delete
	// applies only if it is unchanged.
	ModRevision int64 `json:"mod_revision"`
	// MinStateVersion (ops only) is the version the operation committed:
	// the record is deleted only while the state key is at or past it.
	MinStateVersion int64 `json:"min_state_version,omitempty"`
}

// Plan is what a collection would delete: everything written at or before
// Horizon, a revision at least one window old.
type Plan struct {
	// Horizon is the revision of the newest mark at least one window old;
	// 0 when there is none yet (nothing is known to be old).
	Horizon int64 `json:"horizon"`
	// HorizonTime is that mark's time.
	HorizonTime time.Time   `json:"horizon_time,omitzero"`
	Window      string      `json:"window"`
	Candidates  []Candidate `json:"candidates"`
}

// Result is what Apply did.
type Result struct {
	Deleted []Candidate `json:"deleted"`
	// Kept are candidates whose guard failed at delete time (the key
	// changed, the task was claimed, the state was reset): not deleted.
	Kept []Candidate `json:"kept"`
}

// Option configures New.
type Option func(*options) error

type options struct {
	window time.Duration
	now    func() time.Time
	lg     *zap.Logger
}

// WithWindow sets the retention window (default DefaultWindow): at least
// one second.
func WithWindow(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Second {
			return fmt.Errorf("retention window %v is shorter than 1s", d)
		}
		o.window = d
		return nil
	}
}

// WithClock sets the clock marks are stamped with and ages are measured
// against (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("nil clock")
		}
		o.now = now
		return nil
	}
}

// WithLogger sets the logger (default: the coordinator's).
func WithLogger(lg *zap.Logger) Option {
	return func(o *options) error {
		if lg == nil {
			return errors.New("nil logger")
		}
		o.lg = lg
		return nil
	}
}

// Collector collects one coordinator's keyspace. It is safe for concurrent
// use, and several collectors (on several hosts) may run at once: every
// deletion is guarded.
type Collector struct {
	c      *coordinator.Coordinator
	keys   coordinator.Keyspace
	lk     store.Keys // the ledger's and retention's keys
	window time.Duration
	now    func() time.Time
	lg     *zap.Logger
}

// New builds a collector of c's keyspace.
func New(c *coordinator.Coordinator, opts ...Option) (*Collector, error) {
	if c == nil {
		return nil, store.NewError(store.InvalidInput, "gc", "", "", "nil coordinator", nil)
	}
	o := options{window: DefaultWindow, now: time.Now, lg: store.Of(c).Logger()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, store.NewError(store.InvalidInput, "gc", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	return &Collector{c: c, keys: c.Keys(), lk: store.Of(c).Keys(), window: o.window, now: o.now, lg: o.lg.Named("retention")}, nil
}

// Window is the retention window.
func (g *Collector) Window() time.Duration { return g.window }

// Run is one scheduled collection: it writes a clock mark, plans and
// applies. Call it periodically; the interval adds to how long records are
// kept past the window.
func (g *Collector) Run(ctx context.Context) (Plan, Result, error) {
	if err := g.Mark(ctx); err != nil {
		return Plan{}, Result{}, err
	}
	p, err := g.Plan(ctx)
	if err != nil {
		return Plan{}, Result{}, err
	}
	r, err := g.Apply(ctx, p)
	return p, r, err
}

// Mark writes a retention clock mark at the current revision. Its time is
// read after etcd applied it, so every key written before the mark was
// written no later than the mark's time.
func (g *Collector) Mark(ctx context.Context) error {
	// Learn a revision first, then read the clock: everything below that
	// revision was applied before the clock was read.
	resp, err := store.Of(g.c).Txn(ctx, store.TxnRequest{Op: "gc mark",
		Then: []clientv3.Op{clientv3.OpPut(g.lk.RetentionClock(), "")}})
	if err != nil {
		return err
	}
	rev := resp.Header.Revision
	at := g.now().UTC()
	_, err = store.Of(g.c).Txn(ctx, store.TxnRequest{Op: "gc mark",
		Then: []clientv3.Op{clientv3.OpPut(g.lk.RetentionMark(rev), at.Format(time.RFC3339Nano))}})
	if err != nil {
		return err
	}
	g.lg.Debug("retention mark", zap.Int64("revision", rev), zap.Time("at", at))
	return nil
}

// horizon finds the newest mark at least one window old, and lists the
// marks older than it (no longer needed: the horizon only moves forward).
func (g *Collector) horizon(ctx context.Context) (rev int64, at time.Time, stale []Candidate, err error) {
	cutoff := g.now().Add(-g.window)
	type mark struct {
		kv  *mvccpb.KeyValue
		rev int64
		at  time.Time
	}
	var old []mark
	err = g.scan(ctx, "gc", g.lk.RetentionMarks(), func(kv *mvccpb.KeyValue) {
		r, perr := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), g.lk.RetentionMarks()), 10, 64)
		t, terr := time.Parse(time.RFC3339Nano, string(kv.Value))
		if perr != nil || terr != nil || t.After(cutoff) {
			return
		}
		old = append(old, mark{kv, r, t})
	})
	if err != nil || len(old) == 0 {
		return 0, time.Time{}, nil, err
	}
	newest := old[0]
	for _, m := range old {
		if m.rev > newest.rev {
			newest = m
		}
	}
	for _, m := range old {
		if m.rev < newest.rev {
			stale = append(stale, Candidate{Kind: KindMark, Key: string(m.kv.Key), ModRevision: m.kv.ModRevision})
		}
	}
	return newest.rev, newest.at, stale, nil
}

// Plan lists what a collection would delete now. It writes nothing.
func (g *Collector) Plan(ctx context.Context) (Plan, error) {
	h, at, marks, err := g.horizon(ctx)
	p := Plan{Horizon: h, HorizonTime: at, Window: g.window.String()}
	if err != nil || h == 0 {
		return p, err
	}
	p.Candidates = append(p.Candidates, marks...)
	err = g.scan(ctx, "gc", g.keys.TaskPrefix(coordinator.KindOps, ""), func(kv *mvccpb.KeyValue) {
		if kv.ModRevision >= h {
			return
		}
		tenant, task, op, ok := g.keys.ParseOp(string(kv.Key))
		if !ok {
			return
		}
		var rec store.OpRecord
		var rc fencedtxn.Receipt
		if json.Unmarshal(kv.Value, &rec) != nil || json.Unmarshal(rec.Receipt, &rc) != nil || rc.CommittedVersion < 1 {
			return // not a record Commit wrote: leave it to an operator
		}
		p.Candidates = append(p.Candidates, Candidate{Kind: KindOp, Key: string(kv.Key), Tenant: tenant, Task: task,
			Operation: op, ModRevision: kv.ModRevision, MinStateVersion: rc.CommittedVersion})
	})
	if err != nil {
		return p, err
	}
	err = g.scan(ctx, "gc", g.lk.TaskPrefix(store.KindEffects, ""), func(kv *mvccpb.KeyValue) {
		if kv.ModRevision >= h {
			return
		}
		tenant, task, op, ok := g.lk.ParseEffect(string(kv.Key))
		if !ok {
			return
		}
		var rec ledger.Record
		if json.Unmarshal(kv.Value, &rec) != nil || !resolved(rec.State) {
			return // unreadable, or not settled: the ledger still needs it
		}
		p.Candidates = append(p.Candidates, Candidate{Kind: KindEffect, Key: string(kv.Key), Tenant: tenant, Task: task,
			Operation: op, ModRevision: kv.ModRevision})
	})
	if err != nil {
		return p, err
	}
	owned := map[string]bool{}
	err = g.scan(ctx, "gc", g.keys.TaskPrefix(coordinator.KindOwner, ""), func(kv *mvccpb.KeyValue) {
		if _, tenant, task, ok := g.keys.ParseTask(string(kv.Key)); ok {
			owned[g.keys.Fence(tenant, task)] = true
		}
	})
	if err != nil {
		return p, err
	}
	err = g.scan(ctx, "gc", g.keys.TaskPrefix(coordinator.KindFence, ""), func(kv *mvccpb.KeyValue) {
		if kv.ModRevision >= h || owned[string(kv.Key)] {
			return
		}
		if kind, tenant, task, ok := g.keys.ParseTask(string(kv.Key)); ok && kind == coordinator.KindFence {
			p.Candidates = append(p.Candidates, Candidate{Kind: KindFence, Key: string(kv.Key), Tenant: tenant, Task: task,
				ModRevision: kv.ModRevision})
		}
	})
	return p, err
}

// guard is the compares under which c may be deleted.
func (g *Collector) guard(c Candidate) ([]clientv3.Cmp, error) {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(c.Key), "=", c.ModRevision)}
	switch c.Kind {
	case KindOp:
		// A retry of this operation expects version MinStateVersion-1; while
		// the state is at or past MinStateVersion its Txn fails the version
		// compare, record or no record.
		cmps = append(cmps, clientv3.Compare(clientv3.Version(g.keys.State(c.Tenant, c.Task)), ">", c.MinStateVersion-1))
	case KindFence:
		// No owner key: nobody holds the task, so no live grant names this
		// fence; a claim rewrites the fence and changes its ModRevision.
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(g.keys.Owner(c.Tenant, c.Task)), "=", 0))
	case KindMark:
	case KindEffect:
		// The record is unchanged, so resolved (the plan read it so; Apply
		// cannot re-read it inside the Txn, but every transition rewrites the
		// record and so changes its ModRevision): its journal entries are all
		// written, none is being written.
	default:
		return nil, fmt.Errorf("candidate %q has unknown kind %q", c.Key, c.Kind)
	}
	return cmps, nil
}

// Apply deletes p's candidates, each only under its guard, re-checked in
// the deleting Txn. A candidate whose guard fails is kept.
func (g *Collector) Apply(ctx context.Context, p Plan) (Result, error) {
	var r Result
	for _, c := range p.Candidates {
		if c.ModRevision <= 0 || !strings.HasPrefix(c.Key, g.keys.Prefix()+"/") {
			return r, store.NewError(store.InvalidInput, "gc", "", "", fmt.Sprintf("candidate %q with revision %d is not a key of %s", c.Key, c.ModRevision, g.keys.Prefix()), nil)
		}
		if c.Kind == KindMark {
			if c.Key != g.keyOf(c) {
				return r, store.NewError(store.InvalidInput, "gc", "", "", fmt.Sprintf("candidate %q is not a retention mark of %s (a key %s<revision>)", c.Key, g.keys.Prefix(), g.lk.RetentionMarks()), nil)
			}
		} else if want := g.keyOf(c); c.Key != want {
			return r, store.NewError(store.InvalidInput, "gc", "", "", fmt.Sprintf("candidate %q is not the %s key of %q/%q/%q (%q)", c.Key, c.Kind, c.Tenant, c.Task, c.Operation, want), nil)
		}
		if c.Kind == KindOp && c.MinStateVersion < 1 {
			return r, store.NewError(store.InvalidInput, "gc", "", "", fmt.Sprintf("operation record %q without the version it committed", c.Key), nil)
		}
		if _, err := g.guard(c); err != nil {
			return r, store.NewError(store.InvalidInput, "gc", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	for start := 0; start < len(p.Candidates); start += batchSize {
		batch := p.Candidates[start:min(start+batchSize, len(p.Candidates))]
		ok, err := g.delete(ctx, batch)
		if err != nil {
			return r, err
		}
		if ok {
			r.Deleted = append(r.Deleted, batch...)
			continue
		}
		for _, c := range batch { // one guard failed: find which, one by one
			ok, err := g.delete(ctx, []Candidate{c})
			if err != nil {
				return r, err
			}
			if ok {
				r.Deleted = append(r.Deleted, c)
			} else {
				r.Kept = append(r.Kept, c)
			}
		}
	}
	for _, c := range r.Deleted {
		g.lg.Debug("collected", zap.String("kind", string(c.Kind)), zap.String("tenant", c.Tenant),
			zap.String("task", c.Task), zap.String("operation", c.Operation))
	}
	if len(r.Deleted)+len(r.Kept) > 0 {
		g.lg.Info("retention applied", zap.Int("deleted", len(r.Deleted)), zap.Int("kept", len(r.Kept)),
			zap.Int64("horizon", p.Horizon))
	}
	return r, nil
}

// keyOf is the key a candidate's tenant, task and operation name; for a
// mark, the mark key of the revision its key names under this keyspace's
// marks prefix ("" if it names none): a mark is only ever a key that Mark
// writes, never another key of the keyspace (an owner key) nor one of a
// sibling keyspace.
func (g *Collector) keyOf(c Candidate) string {
	switch c.Kind {
	case KindMark:
		rest, ok := strings.CutPrefix(c.Key, g.lk.RetentionMarks())
		if !ok {
			return ""
		}
		rev, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || rev <= 0 {
			return ""
		}
		return g.lk.RetentionMark(rev)
	case KindOp:
		return g.keys.Op(c.Tenant, c.Task, c.Operation)
	case KindFence:
		return g.keys.Fence(c.Tenant, c.Task)
	case KindEffect:
		return g.lk.Effect(c.Tenant, c.Task, c.Operation)
	}
	return ""
}

// delete deletes every candidate of batch in one Txn, if every guard holds.
func (g *Collector) delete(ctx context.Context, batch []Candidate) (bool, error) {
	var cmps []clientv3.Cmp
	var dels []clientv3.Op
	for _, c := range batch {
		gc, _ := g.guard(c) // checked by Apply
		cmps = append(cmps, gc...)
		dels = append(dels, clientv3.OpDelete(c.Key))
		if c.Kind == KindEffect {
			dels = append(dels, clientv3.OpDelete(g.lk.JournalOperationPrefix(c.Tenant, c.Task, c.Operation), clientv3.WithPrefix()))
		}
	}
	resp, err := store.Of(g.c).Txn(ctx, store.TxnRequest{Op: "gc", If: cmps, Then: dels})
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// resolved reports whether a ledger record's state is final: CONFIRMED,
// FAILED, SUPERSEDED or REJECTED. MANUAL_REVIEW, UNKNOWN and the states
// before dispatch ends are never collected, nor is a state the ledger does
// not know.
func resolved(s ledger.State) bool {
	known, err := ledger.ParseState(string(s))
	return err == nil && known.Terminal()
}

// scan calls f on every key under prefix, a page at a time.
func (g *Collector) scan(ctx context.Context, op, prefix string, f func(*mvccpb.KeyValue)) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		resp, err := store.Of(g.c).Txn(ctx, store.TxnRequest{Op: op, ReadOnly: true,
			Then: []clientv3.Op{clientv3.OpGet(from, clientv3.WithRange(end), clientv3.WithLimit(pageSize))}})
		if err != nil {
			return err
		}
		rr := resp.Responses[0].GetResponseRange()
		for _, kv := range rr.Kvs {
			f(kv)
		}
		if !rr.More || len(rr.Kvs) == 0 {
			return nil
		}
		from = string(rr.Kvs[len(rr.Kvs)-1].Key) + "\x00"
	}
}
