package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/leasegate/leasegate/internal/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A service that holds sessions for workers over the network (leasegate
// serve) grants a worker's lease in one call, renews it only when that
// worker asks, and claims under it in later calls — maybe on another
// replica. It keeps no Session between calls: Detach, Attach and the
// store's RenewLease are what it builds on. The lease stays etcd's, and
// every Txn still decides.

// Detach stops this process watching s: its local deadline timer is stopped
// and it leaves the metrics, but its lease is neither renewed nor revoked
// (etcd's concurrency.Session.Orphan, without the revocation Close does).
// A session without keepalive (WithoutKeepAlive) that a gateway opened for
// a worker is detached at once: the worker's renewals may reach any replica.
func (s *Session) Detach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.c.metrics.sessionEnded(s, "")
}

// Attach is a Session over lease, granted earlier for owner (by NewSession
// here or in another process), that this process neither keeps alive nor
// revokes except by Close. Its local deadline is deadline, as the caller
// knows it (the send time of the last confirmed renewal, plus the TTL, minus
// a margin): past it the session refuses to act before any I/O. It asks
// nothing of etcd: a lease that is gone is found by the first Txn
// (expired_owner).
func (c *Coordinator) Attach(owner string, lease int64, ttl time.Duration, deadline time.Time) (*Session, error) {
	if err := CheckLabel("owner", owner); err != nil {
		return nil, store.NewError(InvalidInput, "session", "", "", fmt.Sprintf("%v", err), nil)
	}
	if lease <= 0 {
		return nil, store.NewError(InvalidInput, "session", "", "", fmt.Sprintf("lease %d must be positive", lease), nil)
	}
	if err := CheckTTL(ttl); err != nil {
		return nil, store.NewError(InvalidInput, "session", "", "", fmt.Sprintf("%v", err), nil)
	}
	s := &Session{
		c: c, owner: owner, lease: clientv3.LeaseID(lease), ttl: ttl,
		lg:       c.lg.Named("session").With(zap.String("owner", owner), zap.String("lease-id", FormatLeaseID(lease))),
		donec:    make(chan struct{}),
		deadline: deadline,
	}
	close(s.donec)
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	return s, nil
}
