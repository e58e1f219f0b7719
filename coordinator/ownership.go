package coordinator

import (
	"context"
	"encoding/json"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/internal/core"
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
			clientv3.OpGet(k.TaskPrefix(KindFence, tenant), clientv3.WithPrefix()),
			clientv3.OpGet(k.TaskPrefix(KindOwner, tenant), clientv3.WithPrefix()),
			clientv3.OpGet(k.TaskPrefix(KindState, tenant), clientv3.WithPrefix()),
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
	var st core.StateRecord
	if err := json.Unmarshal(kv.Value, &st); err == nil {
		o.StateVersion, o.LastOperation = st.Version, st.Operation
	} else {
		o.StateVersion = kv.Version
	}
}
