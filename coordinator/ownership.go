package coordinator

import (
	"context"
	"fmt"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/internal/store"
)

// Ownership is what the authority shows of one task at one revision: its
// Owner ("" when nobody holds it), the holder's Epoch and Lease, the
// seconds left on that lease (TTLLeft, -1 when unknown), whether the owner
// key predates the current realm (Stale), the Fence (the last epoch
// granted), the protected state's StateVersion and LastOperation, and the
// Revision it was read at. Owned reports whether somebody holds the task.
type Ownership = store.Ownership

// markStale marks o stale if its owner key is older than the realm key.
func markStale(o *Ownership, realm *mvccpb.KeyValue) {
	if o.Owner != "" && realm != nil && o.Epoch < realm.ModRevision {
		o.Stale = true
	}
}

// Owner reads one task's ownership linearizably.
func (c *Coordinator) Owner(ctx context.Context, tenant, task string) (Ownership, error) {
	if err := CheckTask(tenant, task); err != nil {
		return Ownership{}, store.NewError(InvalidInput, "status", "", "", fmt.Sprintf("%v", err), nil)
	}
	k := c.keys
	var resp *clientv3.TxnResponse
	err := c.s.Do(ctx, store.Request{Op: "status", Tenant: tenant, Task: task}, func(ctx context.Context) (err error) {
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
	o := *store.HolderOf(tenant, task, store.FirstKV(resp.Responses[0]), store.FirstKV(resp.Responses[1]))
	o.Revision = resp.Header.Revision
	store.ApplyState(&o, store.FirstKV(resp.Responses[2]))
	markStale(&o, store.FirstKV(resp.Responses[3]))
	if o.Owned() {
		o.TTLLeft = c.s.TTLLeft(ctx, o.Lease)
	}
	return o, nil
}

// List reads every task of tenant (every tenant when tenant is "") that was
// ever claimed, owned or not, at one revision, sorted by tenant and task.
func (c *Coordinator) List(ctx context.Context, tenant string) ([]Ownership, error) {
	if tenant != "" {
		if err := CheckLabel("tenant", tenant); err != nil {
			return nil, store.NewError(InvalidInput, "list", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	k := c.keys
	var resp *clientv3.TxnResponse
	err := c.s.Do(ctx, store.Request{Op: "list", Tenant: tenant}, func(ctx context.Context) (err error) {
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
			o.Owner, o.Epoch, o.Lease = store.HolderFields(kv)
		}
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		if o := get(kv); o != nil {
			store.ApplyState(o, kv)
		}
	}
	ttls := map[int64]int64{}
	out := make([]Ownership, 0, len(byTask))
	realm := store.FirstKV(resp.Responses[3])
	for _, o := range byTask {
		markStale(o, realm)
		if o.Owned() {
			ttl, ok := ttls[o.Lease]
			if !ok {
				ttl = c.s.TTLLeft(ctx, o.Lease)
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
