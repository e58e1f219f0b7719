package coordinator

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// Renew keeps g's lease alive once, if g is still the current grant. It
// cannot revive an expired lease: etcd answers a keepalive of a lease past
// its TTL with "lease not found" once it revokes it.
func (c *Coordinator) Renew(ctx context.Context, g Grant) error {
	err := c.renew(ctx, g)
	c.metrics.outcome("renew", Renewed, err)
	return err
}

func (c *Coordinator) renew(ctx context.Context, g Grant) error {
	if err := g.Validate(); err != nil {
		return store.NewError(InvalidInput, "renew", "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := c.current(ctx, "renew", g); err != nil {
		return err
	}
	r := store.Request{Op: "renew", Tenant: g.Tenant, Task: g.Task, Mutating: true}
	err := c.s.Do(ctx, r, func(ctx context.Context) error {
		_, err := c.client.KeepAliveOnce(ctx, clientv3.LeaseID(g.Lease))
		return err
	})
	if err != nil {
		return err
	}
	logGrant(c.lg, zap.DebugLevel, "renewed", g, false)
	return nil
}
