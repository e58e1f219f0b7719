package gateway

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
)

// DefaultDispatchLeaseTTL is the TTL of a replica's dispatch lease: how
// long after a replica dies its claimed dispatches wait before their
// owner can settle them.
const DefaultDispatchLeaseTTL = 10 * time.Second

// dispatchLease is this replica's own etcd lease, which every dispatch
// claim it makes carries (ledger.WithDispatchLease). The replica keeps it
// alive for as long as its etcd client lives — it is the replica's
// liveness, not a worker's: a worker's lease is still renewed only by its
// worker. When the replica dies (killed, partitioned, its client closed)
// the lease expires within its TTL, and etcd then shows every dispatch it
// had claimed as orphaned: the task's owner, through any replica, settles
// it. A lease found dead (its keepalive ended) is replaced by a new one at
// the next claim.
type dispatchLease struct {
	cli *clientv3.Client
	ttl time.Duration
	lg  *zap.Logger

	mu   sync.Mutex
	id   clientv3.LeaseID
	dead chan struct{} // closed when id's keepalive ended
}

// get is the current lease, granted (and kept alive) when there is none
// or the last one's keepalive ended.
func (d *dispatchLease) get(ctx context.Context) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.id != 0 {
		select {
		case <-d.dead:
		default:
			return int64(d.id), nil
		}
	}
	resp, err := d.cli.Grant(ctx, int64(d.ttl/time.Second))
	if err != nil {
		return 0, err
	}
	// The keepalive runs for as long as the client does: it is this
	// process's liveness, ended by its death or its client's Close.
	ch, err := d.cli.KeepAlive(context.WithoutCancel(ctx), resp.ID)
	if err != nil {
		return 0, err
	}
	dead := make(chan struct{})
	go func() {
		for range ch { //nolint:revive // drain: the channel closes when the keepalive ends
		}
		close(dead)
	}()
	d.id, d.dead = resp.ID, dead
	d.lg.Info("dispatch lease granted", zap.String("lease-id", coordinator.FormatLeaseID(int64(resp.ID))), zap.Duration("ttl", d.ttl))
	return int64(resp.ID), nil
}
