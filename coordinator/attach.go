package coordinator

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A gateway (leasegate serve) acts for workers that hold its sessions over
// the network: it grants a worker's lease in one call, renews it only when
// that worker asks, and claims under it in later calls — maybe on another
// replica. It keeps no Session between calls. detach, attach and renewLease
// are what it builds on, lent to it as core.Detach, core.Attach and
// core.RenewLease (they are no part of the public API); the lease stays
// etcd's, and every Txn still decides.

// detach stops this process watching s: its local deadline timer is stopped
// and it leaves the metrics, but its lease is neither renewed nor revoked.
// A session without keepalive (WithoutKeepAlive) that a gateway opened for
// a worker is detached at once: the worker's renewals may reach any replica.
func (s *Session) detach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.c.metrics.sessionEnded(s, "")
}

// attach is a Session over lease, granted earlier for owner (by NewSession
// here or in another process), that this process neither keeps alive nor
// revokes except by Close. Its local deadline is deadline, as the caller
// knows it (the send time of the last confirmed renewal, plus the TTL, minus
// a margin): past it the session refuses to act before any I/O. It asks
// nothing of etcd: a lease that is gone is found by the first Txn
// (expired_owner).
func (c *Coordinator) attach(owner string, lease int64, ttl time.Duration, deadline time.Time) (*Session, error) {
	if err := CheckLabel("owner", owner); err != nil {
		return nil, Invalid("session", "%v", err)
	}
	if lease <= 0 {
		return nil, Invalid("session", "lease %d must be positive", lease)
	}
	if err := CheckTTL(ttl); err != nil {
		return nil, Invalid("session", "%v", err)
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

// renewLease renews lease once (one keepalive request) and returns the TTL
// etcd gave it and when the request was sent: a deadline computed from the
// send time cannot be later than etcd's expiry. A lease etcd no longer
// knows is expired_owner; a renewal whose answer was lost is
// outcome_unknown (renew again to learn).
func (c *Coordinator) renewLease(ctx context.Context, lease int64) (time.Duration, time.Time, error) {
	if lease <= 0 {
		return 0, time.Time{}, Invalid("renew", "lease %d must be positive", lease)
	}
	sent := time.Now()
	var resp *clientv3.LeaseKeepAliveResponse
	err := c.do(ctx, request{op: "renew", mutating: true}, func(ctx context.Context) (err error) {
		resp, err = c.client.KeepAliveOnce(ctx, clientv3.LeaseID(lease))
		return err
	})
	if err != nil {
		return 0, sent, err
	}
	if resp.TTL <= 0 {
		return 0, sent, newError(ExpiredOwner, "renew", "", "", fmt.Sprintf("lease %s has no TTL left", FormatLeaseID(lease)), nil)
	}
	c.metrics.count("keepalive", Renewed)
	return time.Duration(resp.TTL) * time.Second, sent, nil
}
