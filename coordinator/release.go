package coordinator

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// Release deletes g's owner key if, and only if, g is still the current
// grant: a stale release never deletes a newer owner's key. The fence stays,
// so the released epoch is refused from then on. The lease is not revoked
// (a session may hold other tasks on it).
func (c *Coordinator) Release(ctx context.Context, g Grant) error {
	err := c.release(ctx, g)
	c.metrics.outcome("release", Released, err)
	return err
}

func (c *Coordinator) release(ctx context.Context, g Grant) error {
	if err := g.Validate(); err != nil {
		return store.NewError(InvalidInput, "release", "", "", fmt.Sprintf("%v", err), nil)
	}
	resp, err := c.s.Txn(ctx, store.TxnRequest{Op: "release", Tenant: g.Tenant, Task: g.Task,
		If: c.Guard(g), Then: []clientv3.Op{clientv3.OpDelete(c.keys.Owner(g.Tenant, g.Task))}, Else: c.s.GuardReads(g)})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return c.s.DescribeHolder(ctx, c.s.CheckGuard("release", g, resp.Responses))
	}
	logGrant(c.lg, zap.InfoLevel, "released", g, false)
	return nil
}

// ReleaseTask lets go of a task by name: it deletes the task's owner key if,
// and only if, it is on this session's lease with its owner label, in one
// Txn comparing both — whatever its epoch, so a claim whose answer was lost
// can be released without its grant. The fence stays. A task whose owner
// key is gone is expired_owner; one held by another lease or owner is
// stale_owner, and nothing is deleted.
func (s *Session) ReleaseTask(ctx context.Context, tenant, task string) error {
	if err := CheckTask(tenant, task); err != nil {
		return store.NewError(InvalidInput, "release", "", "", fmt.Sprintf("%v", err), nil)
	}
	owner := s.c.keys.Owner(tenant, task)
	resp, err := s.c.s.Txn(ctx, store.TxnRequest{Op: "release", Tenant: tenant, Task: task,
		If: []clientv3.Cmp{
			clientv3.Compare(clientv3.LeaseValue(owner), "=", s.lease),
			clientv3.Compare(clientv3.Value(owner), "=", s.owner),
		},
		Then: []clientv3.Op{clientv3.OpDelete(owner)},
		Else: []clientv3.Op{clientv3.OpGet(owner)},
	})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		held := store.FirstKV(resp.Responses[0])
		if held == nil {
			return store.NewError(ExpiredOwner, "release", tenant, task, "the session holds no owner key for this task", nil)
		}
		e := store.NewError(StaleOwner, "release", tenant, task,
			fmt.Sprintf("the owner key is %q on lease %s, not this session's", held.Value, FormatLeaseID(held.Lease)), nil)
		e.Holder = store.HolderOf(tenant, task, nil, held)
		return e
	}
	s.lg.Info("released", zap.String("tenant", tenant), zap.String("task", task))
	return nil
}
