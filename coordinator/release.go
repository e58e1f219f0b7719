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
