package store

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RenewLease renews lease once (one keepalive request) and returns the TTL
// etcd gave it and when the request was sent: a deadline computed from the
// send time cannot be later than etcd's expiry. A lease etcd no longer
// knows is expired_owner; a renewal whose answer was lost is
// outcome_unknown (renew again to learn). The gateway renews its workers'
// leases with it, the drill its workers'.
func (s *Store) RenewLease(ctx context.Context, lease int64) (time.Duration, time.Time, error) {
	if lease <= 0 {
		return 0, time.Time{}, NewError(InvalidInput, "renew", "", "", fmt.Sprintf("lease %d must be positive", lease), nil)
	}
	sent := time.Now()
	var resp *clientv3.LeaseKeepAliveResponse
	err := s.Do(ctx, Request{Op: "renew", Mutating: true}, func(ctx context.Context) (err error) {
		resp, err = s.client.KeepAliveOnce(ctx, clientv3.LeaseID(lease))
		return err
	})
	if err != nil {
		return 0, sent, err
	}
	if resp.TTL <= 0 {
		return 0, sent, NewError(ExpiredOwner, "renew", "", "", fmt.Sprintf("lease %s has no TTL left", FormatLeaseID(lease)), nil)
	}
	s.metrics.Count("keepalive", Renewed)
	return time.Duration(resp.TTL) * time.Second, sent, nil
}
