package coordinator

import (
	"context"
	"encoding/json"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Grant is an owner's evidence of one claim: a plain value, checked by the
// authority at every use and never authority by itself. Any Coordinator of
// the same realm can check it.
type Grant struct {
	Realm  string `json:"realm"`
	Tenant string `json:"tenant"`
	Task   string `json:"task"`
	Owner  string `json:"owner"`
	Epoch  int64  `json:"epoch"`
	Lease  int64  `json:"lease"`
}

// Validate reports why g cannot be a grant at all.
func (g Grant) Validate() error {
	if g.Realm == "" {
		return fmt.Errorf("grant has no realm")
	}
	if err := CheckTask(g.Tenant, g.Task); err != nil {
		return err
	}
	if err := CheckLabel("owner", g.Owner); err != nil {
		return err
	}
	if g.Epoch <= 0 {
		return fmt.Errorf("grant epoch %d must be positive", g.Epoch)
	}
	if g.Lease <= 0 {
		return fmt.Errorf("grant lease %d must be positive", g.Lease)
	}
	return nil
}

// fields are the log fields of a grant; taskFields leave out owner and
// lease, for a logger that already carries them (a session's).
func (g Grant) fields() []zap.Field {
	return append(g.taskFields(), zap.String("owner", g.Owner), zap.Int64("lease-id", g.Lease))
}

func (g Grant) taskFields() []zap.Field {
	return []zap.Field{zap.String("tenant", g.Tenant), zap.String("task", g.Task), zap.Int64("epoch", g.Epoch)}
}

// Guard is the set of compares that hold exactly while g is the current,
// live grant of its task: same realm, fence not moved since g's claim, the
// owner key of that very claim, same owner, same lease (expiry or revocation
// deletes the key). Put them in the If of a Txn of your own, and
// GuardReads in its Else, to fence your own writes.
func (c *Coordinator) Guard(g Grant) []clientv3.Cmp {
	k := c.keys
	owner := k.Owner(g.Tenant, g.Task)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(k.Realm()), "=", g.Realm),
		clientv3.Compare(clientv3.ModRevision(k.Fence(g.Tenant, g.Task)), "=", g.Epoch),
		clientv3.Compare(clientv3.ModRevision(owner), "=", g.Epoch),
		clientv3.Compare(clientv3.Value(owner), "=", g.Owner),
		clientv3.Compare(clientv3.LeaseValue(owner), "=", clientv3.LeaseID(g.Lease)),
	}
}

// GuardReads are the reads CheckGuard classifies: realm, fence, owner.
func (c *Coordinator) GuardReads(g Grant) []clientv3.Op {
	k := c.keys
	return []clientv3.Op{
		clientv3.OpGet(k.Realm()),
		clientv3.OpGet(k.Fence(g.Tenant, g.Task)),
		clientv3.OpGet(k.Owner(g.Tenant, g.Task)),
	}
}

// CheckGuard classifies the responses of GuardReads, read atomically with a
// failed Guard: nil if g is current, else the first of
// authority_generation_mismatch, stale_owner, expired_owner.
func (c *Coordinator) CheckGuard(op string, g Grant, rs []*pb.ResponseOp) error {
	if len(rs) < 3 {
		return Invalid(op, "the Txn's Else does not start with GuardReads")
	}
	realm, fence, owner := firstKV(rs[0]), firstKV(rs[1]), firstKV(rs[2])
	refuse := func(d Disposition, format string, args ...any) error {
		e := newError(d, op, g.Tenant, g.Task, fmt.Sprintf(format, args...), nil)
		e.Holder = holderOf(g.Tenant, g.Task, fence, owner)
		return e
	}
	switch {
	case realm == nil:
		return refuse(GenerationMismatch, "the authority has no realm (keyspace wiped or wrong prefix)")
	case string(realm.Value) != g.Realm:
		return refuse(GenerationMismatch, "grant realm %s, authority realm %s", g.Realm, realm.Value)
	case fence == nil:
		return refuse(StaleOwner, "no grant was ever published for this task")
	case fence.ModRevision != g.Epoch:
		return refuse(StaleOwner, "the fence is at epoch %d, the grant's epoch is %d", fence.ModRevision, g.Epoch)
	}
	var fr FenceRecord
	if err := json.Unmarshal(fence.Value, &fr); err != nil || fr.Owner != g.Owner || fr.Lease != g.Lease {
		return refuse(StaleOwner, "epoch %d belongs to owner %q lease %d, not %q lease %d", g.Epoch, fr.Owner, fr.Lease, g.Owner, g.Lease)
	}
	if owner == nil {
		return refuse(ExpiredOwner, "the owner key of epoch %d is gone (lease expired or revoked, or released)", g.Epoch)
	}
	if owner.ModRevision != g.Epoch || string(owner.Value) != g.Owner || owner.Lease != g.Lease {
		return refuse(StaleOwner, "the owner key is %q at epoch %d", owner.Value, owner.ModRevision)
	}
	return nil
}

// Renew keeps g's lease alive once, if g is still the current grant. It
// cannot revive an expired lease: etcd answers a keepalive of a lease past
// its TTL with "lease not found" once it revokes it.
func (c *Coordinator) Renew(ctx context.Context, g Grant) error {
	if err := g.Validate(); err != nil {
		return Invalid("renew", "%v", err)
	}
	if err := c.checkCurrent(ctx, "renew", g); err != nil {
		return err
	}
	r := request{op: "renew", tenant: g.Tenant, task: g.Task, mutating: true}
	err := r.do(ctx, func(ctx context.Context) error {
		_, err := c.client.KeepAliveOnce(ctx, clientv3.LeaseID(g.Lease))
		return err
	})
	if err != nil {
		return err
	}
	c.lg.Debug("renewed", g.fields()...)
	return nil
}

// checkCurrent returns nil if g is the current grant, read linearizably.
func (c *Coordinator) checkCurrent(ctx context.Context, op string, g Grant) error {
	resp, err := c.Txn(ctx, TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		If: c.Guard(g), Else: c.GuardReads(g)})
	if err != nil {
		return err
	}
	if resp.Succeeded {
		return nil
	}
	return c.CheckGuard(op, g, resp.Responses)
}

// Release deletes g's owner key if, and only if, g is still the current
// grant: a stale release never deletes a newer owner's key. The fence stays,
// so the released epoch is refused from then on. The lease is not revoked
// (a session may hold other tasks on it).
func (c *Coordinator) Release(ctx context.Context, g Grant) error {
	if err := g.Validate(); err != nil {
		return Invalid("release", "%v", err)
	}
	resp, err := c.Txn(ctx, TxnRequest{Op: "release", Tenant: g.Tenant, Task: g.Task,
		If: c.Guard(g), Then: []clientv3.Op{clientv3.OpDelete(c.keys.Owner(g.Tenant, g.Task))}, Else: c.GuardReads(g)})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return c.CheckGuard("release", g, resp.Responses)
	}
	c.lg.Info("released", g.fields()...)
	return nil
}

func firstKV(r *pb.ResponseOp) *mvccpb.KeyValue {
	if r == nil {
		return nil
	}
	rr := r.GetResponseRange()
	if rr == nil || len(rr.Kvs) == 0 {
		return nil
	}
	return rr.Kvs[0]
}

// holderOf describes the task's current owner from its fence and owner keys
// (TTL unknown).
func holderOf(tenant, task string, fence, owner *mvccpb.KeyValue) *Ownership {
	o := &Ownership{Tenant: tenant, Task: task, TTLLeft: -1}
	if fence != nil {
		o.Fence = fence.ModRevision
	}
	if owner != nil {
		o.Owner, o.Epoch, o.Lease = holderFields(owner)
	}
	return o
}

// holderFields reads owner, epoch and lease off an owner key.
func holderFields(owner *mvccpb.KeyValue) (string, int64, int64) {
	return string(owner.Value), owner.ModRevision, owner.Lease
}
