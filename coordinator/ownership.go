package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Ownership is what the authority shows of one task at one revision.
type Ownership struct {
	Tenant  string `json:"tenant"`
	Task    string `json:"task"`
	Owner   string `json:"owner"`            // "" when nobody holds the task
	Epoch   int64  `json:"epoch"`            // the holder's epoch; 0 when unowned
	Lease   int64  `json:"lease"`            // the holder's lease; 0 when unowned; in JSON a hex string ("" for none)
	TTLLeft int64  `json:"ttl_left_seconds"` // seconds left on the lease; -1 when unowned, stale or unknown
	// Stale marks an owner key written before the current realm (before a
	// realm rotate): it is still in etcd, on its lease, but holds nothing —
	// every grant of it is refused and any session may claim the task.
	// Owner, Epoch and Lease then describe that key; Owned() is false.
	Stale         bool   `json:"stale"`
	Fence         int64  `json:"fence_epoch"`   // the published floor: the last epoch granted
	StateVersion  int64  `json:"state_version"` // protected state version (0: never committed)
	LastOperation string `json:"last_operation,omitempty"`
	Revision      int64  `json:"revision"` // the etcd revision this was read at
}

// Owned reports whether somebody holds the task: an owner key of the
// current realm.
func (o Ownership) Owned() bool { return o.Owner != "" && !o.Stale }

// ownershipJSON is Ownership's JSON shape: the lease as a hex string.
type ownershipJSON struct {
	plainOwnership
	Lease leaseJSON `json:"lease"`
}

type plainOwnership Ownership

// MarshalJSON writes the lease as a hex string, as etcdctl prints it.
func (o Ownership) MarshalJSON() ([]byte, error) {
	return json.Marshal(ownershipJSON{plainOwnership: plainOwnership(o), Lease: leaseJSON(o.Lease)})
}

// UnmarshalJSON reads an Ownership whose lease is a hex string or a number.
func (o *Ownership) UnmarshalJSON(b []byte) error {
	var j ownershipJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*o = Ownership(j.plainOwnership)
	o.Lease = int64(j.Lease)
	return nil
}

// markStale marks o stale if its owner key is older than the realm key.
func markStale(o *Ownership, realm *mvccpb.KeyValue) {
	if o.Owner != "" && realm != nil && o.Epoch < realm.ModRevision {
		o.Stale = true
	}
}

// Owner reads one task's ownership linearizably.
func (c *Coordinator) Owner(ctx context.Context, tenant, task string) (Ownership, error) {
	if err := CheckTask(tenant, task); err != nil {
		return Ownership{}, Invalid("status", "%v", err)
	}
	k := c.keys
	var resp *clientv3.TxnResponse
	err := c.do(ctx, request{op: "status", tenant: tenant, task: task}, func(ctx context.Context) (err error) {
		resp, err = c.client.Txn(ctx).Then(
			clientv3.OpGet(k.Fence(tenant, task)),
			clientv3.OpGet(k.Owner(tenant, task)),
			clientv3.OpGet(k.State(tenant, task)),
			clientv3.OpGet(k.Realm()),
		).Commit()
		return err
	})
	if err != nil {
		return Ownership{}, err
	}
	o := *holderOf(tenant, task, firstKV(resp.Responses[0]), firstKV(resp.Responses[1]))
	o.Revision = resp.Header.Revision
	applyState(&o, firstKV(resp.Responses[2]))
	markStale(&o, firstKV(resp.Responses[3]))
	if o.Owned() {
		o.TTLLeft = c.ttlLeft(ctx, o.Lease)
	}
	return o, nil
}

// List reads every task of tenant (every tenant when tenant is "") that was
// ever claimed, owned or not, at one revision, sorted by tenant and task.
func (c *Coordinator) List(ctx context.Context, tenant string) ([]Ownership, error) {
	if tenant != "" {
		if err := CheckLabel("tenant", tenant); err != nil {
			return nil, Invalid("list", "%v", err)
		}
	}
	k := c.keys
	var resp *clientv3.TxnResponse
	err := c.do(ctx, request{op: "list", tenant: tenant}, func(ctx context.Context) (err error) {
		resp, err = c.client.Txn(ctx).Then(
			clientv3.OpGet(k.TaskPrefix("fence", tenant), clientv3.WithPrefix()),
			clientv3.OpGet(k.TaskPrefix("owner", tenant), clientv3.WithPrefix()),
			clientv3.OpGet(k.TaskPrefix("state", tenant), clientv3.WithPrefix()),
			clientv3.OpGet(k.Realm()),
		).Commit()
		return err
	})
	if err != nil {
		return nil, err
	}
	type id struct{ tenant, task string }
	byTask := map[id]*Ownership{}
	get := func(kv *mvccpb.KeyValue) *Ownership {
		_, t, task, ok := k.ParseTask(string(kv.Key))
		if !ok {
			return nil
		}
		o := byTask[id{t, task}]
		if o == nil {
			o = &Ownership{Tenant: t, Task: task, TTLLeft: -1, Revision: resp.Header.Revision}
			byTask[id{t, task}] = o
		}
		return o
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if o := get(kv); o != nil {
			o.Fence = kv.ModRevision
		}
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if o := get(kv); o != nil {
			o.Owner, o.Epoch, o.Lease = holderFields(kv)
		}
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		if o := get(kv); o != nil {
			applyState(o, kv)
		}
	}
	ttls := map[int64]int64{}
	out := make([]Ownership, 0, len(byTask))
	realm := firstKV(resp.Responses[3])
	for _, o := range byTask {
		markStale(o, realm)
		if o.Owned() {
			ttl, ok := ttls[o.Lease]
			if !ok {
				ttl = c.ttlLeft(ctx, o.Lease)
				ttls[o.Lease] = ttl
			}
			o.TTLLeft = ttl
		}
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Task < out[j].Task
	})
	return out, nil
}

func applyState(o *Ownership, kv *mvccpb.KeyValue) {
	if kv == nil {
		return
	}
	var st StateRecord
	if err := json.Unmarshal(kv.Value, &st); err == nil {
		o.StateVersion, o.LastOperation = st.Version, st.Operation
	} else {
		o.StateVersion = kv.Version
	}
}

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

// watchRetry is how long Watch waits before re-listing after etcd cut its
// watch short.
const watchRetry = 500 * time.Millisecond

// Watch streams ownership changes of tenant's tasks (every tenant when
// tenant is ""): first the current owners as "owned", then "claimed" and
// "vacated" as they happen. If etcd compacts past the watch, or the watch is
// cut, it re-lists and reports the difference, so no change is silently
// lost. The channel is closed when ctx is done.
func (c *Coordinator) Watch(ctx context.Context, tenant string) (<-chan OwnershipEvent, error) {
	if tenant != "" {
		if err := CheckLabel("tenant", tenant); err != nil {
			return nil, Invalid("watch", "%v", err)
		}
	}
	known, rev, err := c.listOwners(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make(chan OwnershipEvent, 16)
	go c.watchLoop(ctx, tenant, known, rev, out)
	return out, nil
}

func (c *Coordinator) watchLoop(ctx context.Context, tenant string, known map[string]Ownership, rev int64, out chan<- OwnershipEvent) {
	defer close(out)
	send := func(ev OwnershipEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, key := range sortedKeys(known) {
		if !send(OwnershipEvent{Type: EventOwned, Ownership: known[key]}) {
			return
		}
	}
	prefix := c.keys.TaskPrefix("owner", tenant)
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := c.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV())
		// A realm rotation vacates every owner key older than the new realm
		// without touching them: the realm key is watched too.
		rch := c.client.Watch(wctx, c.keys.Realm(), clientv3.WithRev(rev+1), clientv3.WithFilterDelete())
		cut := false
		for {
			var resp clientv3.WatchResponse
			var ok bool
			select {
			case resp, ok = <-wch:
			case resp, ok = <-rch:
			}
			if !ok {
				break
			}
			if err := resp.Err(); err != nil {
				c.lg.Info("ownership watch cut; re-listing", zap.Error(err), zap.Bool("compacted", errors.Is(err, rpctypes.ErrCompacted)))
				cut = true
				break
			}
			for _, ev := range resp.Events {
				if string(ev.Kv.Key) == c.keys.Realm() {
					for _, key := range sortedKeys(known) {
						if o := known[key]; o.Epoch < ev.Kv.ModRevision {
							o.Stale, o.TTLLeft, o.Revision = true, -1, ev.Kv.ModRevision
							delete(known, key)
							if !send(OwnershipEvent{Type: EventVacated, Ownership: o}) {
								cancel()
								return
							}
						}
					}
					continue
				}
				o, key, ok := c.eventOwnership(ev)
				if !ok {
					continue
				}
				t := EventClaimed
				if ev.Type == mvccpb.DELETE {
					if _, had := known[key]; !had {
						continue // a stale key going away: it was vacated at the rotation
					}
					t = EventVacated
					delete(known, key)
				} else {
					known[key] = o
				}
				if !send(OwnershipEvent{Type: t, Ownership: o}) {
					cancel()
					return
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if !cut {
			// The watch channel closed without an error: wait a little
			// before re-listing, so a dead client does not spin.
			select {
			case <-ctx.Done():
				return
			case <-time.After(watchRetry):
			}
		}
		now, nrev, err := c.listOwners(ctx, tenant)
		if err != nil {
			continue
		}
		for _, key := range sortedKeys(known) {
			if _, still := now[key]; !still || now[key].Epoch != known[key].Epoch {
				gone := known[key]
				gone.Revision = nrev
				if !send(OwnershipEvent{Type: EventVacated, Ownership: gone}) {
					return
				}
			}
		}
		for _, key := range sortedKeys(now) {
			if old, had := known[key]; !had || old.Epoch != now[key].Epoch {
				if !send(OwnershipEvent{Type: EventOwned, Ownership: now[key]}) {
					return
				}
			}
		}
		known, rev = now, nrev
	}
}

func (c *Coordinator) eventOwnership(ev *clientv3.Event) (Ownership, string, bool) {
	key := string(ev.Kv.Key)
	_, tenant, task, ok := c.keys.ParseTask(key)
	if !ok {
		return Ownership{}, "", false
	}
	var o *Ownership
	if ev.Type == mvccpb.DELETE {
		o = holderOf(tenant, task, nil, ev.PrevKv)
	} else {
		o = holderOf(tenant, task, ev.Kv, ev.Kv) // a claim writes fence and owner at one revision
	}
	o.Revision = ev.Kv.ModRevision
	return *o, key, true
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
		o := holderOf(t, task, kv, kv)
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
