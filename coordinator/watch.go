package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// EventType says what an OwnershipEvent reports.
type EventType string

// The ownership event types.
const (
	// EventOwned reports an owner present when the watch started or resynced.
	EventOwned EventType = "owned"
	// EventClaimed reports a new grant.
	EventClaimed EventType = "claimed"
	// EventVacated reports an owner key deleted: released, expired or revoked.
	EventVacated EventType = "vacated"
)

// OwnershipEvent is one change of a task's owner.
type OwnershipEvent struct {
	Type      EventType `json:"type"`
	Ownership Ownership `json:"ownership"`
}

// watchRetry is how long Watch waits before it watches again after etcd cut
// its watch short, or before it retries a listing that failed.
const watchRetry = 500 * time.Millisecond

// Watch streams ownership changes of tenant's tasks (every tenant when
// tenant is ""): first the current owners as "owned", then "claimed" and
// "vacated" as they happen, each at the etcd revision it happened at
// (Ownership.Revision), in revision order.
//
// When etcd cuts the watch (lost leader, quorum loss, a member gone), it
// resumes from the last revision it delivered: nothing is reported twice and
// nothing is skipped. Only when etcd compacted past that revision does it
// re-list, retrying the listing until etcd answers, and report the
// difference ("vacated", "owned", at the listing's revision): changes
// between the two listings collapse into one. An event is never older than
// one already reported for its task, so a consumer never sees ownership go
// back. The channel is closed when ctx is done.
func (c *Coordinator) Watch(ctx context.Context, tenant string) (<-chan OwnershipEvent, error) {
	if tenant != "" {
		if err := CheckLabel("tenant", tenant); err != nil {
			return nil, store.NewError(InvalidInput, "watch", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	known, rev, err := c.listOwners(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make(chan OwnershipEvent, 16)
	w := &ownershipWatch{c: c, ctx: ctx, tenant: tenant, out: out, known: known, rev: rev, last: map[string]OwnershipEvent{}}
	go w.run()
	return out, nil
}

// ownershipWatch is one Watch's state: the owners it reported, the revision
// it has delivered everything up to, and the revision of the last event it
// reported for each task.
type ownershipWatch struct {
	c      *Coordinator
	ctx    context.Context
	tenant string
	out    chan<- OwnershipEvent
	known  map[string]Ownership      // owner key -> the owner last reported
	rev    int64                     // every change up to rev was delivered
	last   map[string]OwnershipEvent // owner key -> the last event reported
}

// newer reports whether ev may follow prev, the last event reported for its
// task: a later revision and no lower epoch, or — at one revision, a
// listing's — an owner of a later epoch after the old one's vacating.
func newer(ev, prev OwnershipEvent) bool {
	o, p := ev.Ownership, prev.Ownership
	switch {
	case o.Epoch < p.Epoch:
		return false
	case o.Revision > p.Revision:
		return true
	}
	return o.Revision == p.Revision && prev.Type == EventVacated && ev.Type == EventOwned && o.Epoch > p.Epoch
}

// send reports ev unless it is older than, or the same as, the last event
// reported for its task; false once ctx is done.
func (w *ownershipWatch) send(key string, ev OwnershipEvent) bool {
	if prev, ok := w.last[key]; ok && !newer(ev, prev) {
		w.c.lg.Warn("ownership watch: dropped an event not newer than one already reported",
			zap.String("key", key), zap.String("type", string(ev.Type)), zap.Int64("revision", ev.Ownership.Revision),
			zap.Int64("epoch", ev.Ownership.Epoch), zap.Int64("reported_revision", prev.Ownership.Revision))
		return true
	}
	select {
	case w.out <- ev:
		w.last[key] = ev
		return true
	case <-w.ctx.Done():
		return false
	}
}

func (w *ownershipWatch) run() {
	defer close(w.out)
	for _, key := range sortedKeys(w.known) {
		if !w.send(key, OwnershipEvent{Type: EventOwned, Ownership: w.known[key]}) {
			return
		}
	}
	for w.ctx.Err() == nil {
		compacted, ok := w.watch()
		if !ok {
			return
		}
		if compacted {
			if !w.relist() {
				return
			}
			continue
		}
		// Cut without a compaction: watch again from w.rev after a pause,
		// so a dead client or a leaderless member does not spin.
		if !w.pause() {
			return
		}
	}
}

// watch watches owner keys and the realm key from w.rev+1 until etcd cuts
// the watch; compacted says it cut it because w.rev is compacted. ok is
// false once ctx is done.
func (w *ownershipWatch) watch() (compacted, ok bool) {
	k := w.c.keys
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(w.ctx))
	defer cancel()
	// One watch of one range, so that its events come in revision order:
	// from the tenant's owner keys to the realm key (a realm rotation
	// vacates every owner key older than the new realm without touching
	// them). Between the two lie only owner keys (of tenants sorting after
	// this one, skipped) and the realm key.
	wch := w.c.client.Watch(wctx, k.TaskPrefix(KindOwner, w.tenant), clientv3.WithRange(k.Realm()+"\x00"),
		clientv3.WithRev(w.rev+1), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			compacted = errors.Is(err, rpctypes.ErrCompacted)
			w.c.lg.Info("ownership watch cut", zap.Error(err), zap.Bool("compacted", compacted), zap.Int64("revision", w.rev))
			return compacted, w.ctx.Err() == nil
		}
		for _, ev := range resp.Events {
			if !w.apply(ev) {
				return false, false
			}
		}
		// Advance as clientv3 resumes its own watches: to the last event
		// delivered, or to the header of a response without events (a
		// progress notification). The header of a response with events can
		// be ahead of what was delivered (etcd sends a long catch-up in
		// batches, each with the current revision).
		if n := len(resp.Events); n > 0 {
			w.rev = max(w.rev, resp.Events[n-1].Kv.ModRevision)
		} else if resp.Header.Revision > 0 {
			w.rev = max(w.rev, resp.Header.Revision)
		}
	}
	return false, w.ctx.Err() == nil
}

// apply reports what ev changed; false once ctx is done.
func (w *ownershipWatch) apply(ev *clientv3.Event) bool {
	key := string(ev.Kv.Key)
	if key == w.c.keys.Realm() {
		if ev.Type == mvccpb.DELETE {
			return true // a wiped keyspace: every grant is refused, and the owner keys' deletes follow
		}
		for _, k := range sortedKeys(w.known) {
			if o := w.known[k]; o.Epoch < ev.Kv.ModRevision {
				o.Stale, o.TTLLeft, o.Revision = true, -1, ev.Kv.ModRevision
				delete(w.known, k)
				if !w.send(k, OwnershipEvent{Type: EventVacated, Ownership: o}) {
					return false
				}
			}
		}
		return true
	}
	if !w.mine(key) {
		return true
	}
	o, ok := w.c.eventOwnership(ev)
	if !ok {
		return true
	}
	t := EventClaimed
	if ev.Type == mvccpb.DELETE {
		if _, had := w.known[key]; !had {
			return true // a stale key going away: it was vacated at the rotation
		}
		t = EventVacated
		delete(w.known, key)
	} else {
		w.known[key] = o
	}
	return w.send(key, OwnershipEvent{Type: t, Ownership: o})
}

// mine reports whether key is an owner key of the watched tenant.
func (w *ownershipWatch) mine(key string) bool {
	kind, tenant, _, ok := w.c.keys.ParseTask(key)
	return ok && kind == KindOwner && (w.tenant == "" || tenant == w.tenant)
}

// relist lists the owners again, retrying until etcd answers, and reports
// what changed since the owners last reported; false once ctx is done.
func (w *ownershipWatch) relist() bool {
	for {
		now, nrev, err := w.c.listOwners(w.ctx, w.tenant)
		if err == nil {
			return w.resync(now, nrev)
		}
		w.c.lg.Info("ownership watch: re-listing failed; retrying", zap.Error(err))
		if !w.pause() {
			return false
		}
	}
}

// resync reports the difference between the owners last reported and now,
// listed at nrev, and resumes from there.
func (w *ownershipWatch) resync(now map[string]Ownership, nrev int64) bool {
	for _, key := range sortedKeys(w.known) {
		if cur, still := now[key]; !still || cur.Epoch != w.known[key].Epoch {
			gone := w.known[key]
			gone.Revision = nrev
			if !w.send(key, OwnershipEvent{Type: EventVacated, Ownership: gone}) {
				return false
			}
		}
	}
	for _, key := range sortedKeys(now) {
		if old, had := w.known[key]; !had || old.Epoch != now[key].Epoch {
			if !w.send(key, OwnershipEvent{Type: EventOwned, Ownership: now[key]}) {
				return false
			}
		}
	}
	w.known, w.rev = now, nrev
	return true
}

// pause waits watchRetry; false if ctx is done first.
func (w *ownershipWatch) pause() bool {
	t := time.NewTimer(watchRetry)
	defer t.Stop()
	select {
	case <-w.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (c *Coordinator) eventOwnership(ev *clientv3.Event) (Ownership, bool) {
	_, tenant, task, ok := c.keys.ParseTask(string(ev.Kv.Key))
	if !ok {
		return Ownership{}, false
	}
	var o *Ownership
	if ev.Type == mvccpb.DELETE {
		o = store.HolderOf(tenant, task, nil, ev.PrevKv)
	} else {
		o = store.HolderOf(tenant, task, ev.Kv, ev.Kv) // a claim writes fence and owner at one revision
	}
	o.Revision = ev.Kv.ModRevision
	return *o, true
}

// listOwners reads the current owner keys under tenant, leaving out stale
// ones (older than the realm: they hold nothing).
func (c *Coordinator) listOwners(ctx context.Context, tenant string) (map[string]Ownership, int64, error) {
	kvs, realm, rev, err := c.ownerKeys(ctx, "watch", tenant)
	if err != nil {
		return nil, 0, err
	}
	owners := map[string]Ownership{}
	for _, kv := range kvs {
		_, t, task, ok := c.keys.ParseTask(string(kv.Key))
		if !ok {
			continue
		}
		o := store.HolderOf(t, task, kv, kv)
		o.Revision = rev
		if markStale(o, realm); o.Stale {
			continue
		}
		owners[string(kv.Key)] = *o
	}
	return owners, rev, nil
}

func sortedKeys(m map[string]Ownership) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
