package gateway

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Limits bound what one identity holds at once through the gateway: its
// open sessions, the tasks it holds (grants claimed through the gateway)
// and its open WatchOwnership streams. They are counted in etcd, so every
// replica on one keyspace counts the same units: each unit is a key
// (store.Keys.Limit) on the lease that ends it — a session's on the
// session's lease, a grant's on the grant's session lease, a watch
// stream's on the serving replica's dispatch lease — so a session that
// closes or expires, a released grant and an ended stream (or a replica
// that dies) free their units. A call that would take its caller past a
// limit is refused with limit_exceeded naming the limit, and writes
// nothing. A zero field is the default (DefaultLimits); there is no
// "unlimited": give a large number.
type Limits struct {
	Sessions int `json:"sessions,omitempty"` // open sessions (etcd leases) at once
	Grants   int `json:"grants,omitempty"`   // tasks held at once, claimed through the gateway
	Watches  int `json:"watches,omitempty"`  // WatchOwnership streams open at once, on every service
}

// The default limits of an identity: a worker process needs one session
// and a stream or two; the defaults leave room for a fleet of replicas
// sharing one identity, and still stop a runaway loop long before etcd
// feels it (each session is an etcd lease the gateway keeps in etcd for
// its TTL, up to 24 h).
const (
	DefaultSessionLimit = 100
	DefaultGrantLimit   = 1000
	DefaultWatchLimit   = 32
)

// DefaultLimits are the limits of an identity that names none, in a
// gateway given none (WithLimits).
func DefaultLimits() Limits {
	return Limits{Sessions: DefaultSessionLimit, Grants: DefaultGrantLimit, Watches: DefaultWatchLimit}
}

// check refuses a negative limit.
func (l Limits) check() error {
	for _, f := range []struct {
		what string
		n    int
	}{{"sessions", l.Sessions}, {"grants", l.Grants}, {"watches", l.Watches}} {
		if f.n < 0 {
			return fmt.Errorf("limits.%s is %d: a limit is positive (omit it, or 0, for the default)", f.what, f.n)
		}
	}
	return nil
}

// or is l with every zero field taken from d.
func (l Limits) or(d Limits) Limits {
	if l.Sessions == 0 {
		l.Sessions = d.Sessions
	}
	if l.Grants == 0 {
		l.Grants = d.Grants
	}
	if l.Watches == 0 {
		l.Watches = d.Watches
	}
	return l
}

// What the limits count: the path segment of their units' keys.
const (
	limitSessions = "sessions"
	limitGrants   = "grants"
	limitWatches  = "watches"
)

// WithLimits sets the limits of every identity that names none of its
// own (Identity.Limits); a zero field is DefaultLimits'.
func WithLimits(l Limits) Option {
	return func(o *options) error {
		if err := l.check(); err != nil {
			return err
		}
		o.limits = l
		return nil
	}
}

// Limits are the limits of an identity that names none of its own.
func (s *Server) Limits() Limits { return s.opts.limits.or(DefaultLimits()) }

// limitOf is id's limit of what: its own, else the server's, else the
// default.
func (s *Server) limitOf(id Identity, what string) int {
	l := s.Limits()
	if id.Limits != nil {
		l = id.Limits.or(l)
	}
	switch what {
	case limitSessions:
		return l.Sessions
	case limitGrants:
		return l.Grants
	}
	return l.Watches
}

// maxLimitRounds bounds how often take reads and tries again when other
// units of the same identity were taken between its read and its write:
// every round at least one of the contenders wins, so more rounds than
// this mean more than this many calls of one identity at once.
const maxLimitRounds = 64

// take puts the unit key of what on lease for id, unless id already holds
// its limit of what: then it is limit_exceeded, and nothing is written.
// The count is exact across replicas: the put's Txn compares that no unit
// of id's was created or changed since the count was read (a range
// compare of ModRevision over the identity's units; a deletion only
// lowers the count), and reads again when one was. A unit already on
// lease (a retried claim) is taken already: nothing is written.
//
// first, when not nil, runs once, after the first count found room and
// before anything is written: OpenSession grants the session's lease
// there, so a refused OpenSession grants none. It returns the lease and
// the unit's key. took reports that this call wrote the unit.
func (s *Server) take(ctx context.Context, op string, id Identity, what string, first func() (int64, string, error), lease int64, key string) (took bool, err error) {
	if s.opts.noLimits { // the benchmark's baseline (export_test.go)
		if first != nil {
			_, _, err = first()
		}
		return false, err
	}
	st := store.Of(s.c)
	prefix := st.Keys().LimitPrefix(what, id.ID)
	limit := s.limitOf(id, what)
	for round := 0; ; round++ {
		then := []clientv3.Op{clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())}
		if key != "" {
			then = append(then, clientv3.OpGet(key))
		}
		resp, err := st.Txn(ctx, store.TxnRequest{Op: op, ReadOnly: true, Then: then})
		if err != nil {
			return false, err
		}
		n := resp.Responses[0].GetResponseRange().Count
		if key != "" {
			if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
				if kvs[0].Lease == lease {
					return false, nil // held already
				}
				n-- // the put moves this unit to lease: it adds none
			}
		}
		if n >= int64(limit) {
			return false, s.limitExceeded(op, id, what, limit, n)
		}
		if first != nil {
			if lease, key, err = first(); err != nil {
				return false, err
			}
			first = nil
		}
		put, err := st.Txn(ctx, store.TxnRequest{Op: op,
			If:   []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(prefix).WithPrefix(), "<", resp.Header.Revision+1)},
			Then: []clientv3.Op{clientv3.OpPut(key, "", clientv3.WithLease(clientv3.LeaseID(lease)))}})
		switch {
		case err != nil:
			return false, err
		case put.Succeeded:
			return true, nil
		case round+1 >= maxLimitRounds:
			return false, store.NewError(coordinator.AuthorityUnavailable, op, "", "",
				fmt.Sprintf("%d rounds of counting %q's %s lost to its other calls at once; nothing was written", maxLimitRounds, id.ID, what), nil)
		}
	}
}

// limitExceeded is the refusal of a unit past id's limit of what.
func (s *Server) limitExceeded(op string, id Identity, what string, limit int, n int64) error {
	s.lg.Info("limit reached", zap.String("identity", id.ID), zap.String("limit", what), zap.Int("of", limit), zap.String("op", op))
	return refuseCaller(store.NewError(store.LimitExceeded, op, "", "",
		fmt.Sprintf("identity %q holds %d %s, its limit (limits.%s %d): %s", id.ID, n, what, what, limit, limitAdvice[what]), nil))
}

// limitAdvice says how a caller frees a unit of each limit.
var limitAdvice = map[string]string{
	limitSessions: "close sessions it no longer uses (CloseSession); an abandoned one is freed when its lease expires",
	limitGrants:   "release tasks it no longer acts for (Release); a session's are freed when it closes or expires",
	limitWatches:  "end WatchOwnership streams it no longer reads",
}

// free deletes a unit's key if it is still on lease (best effort: a unit
// left behind is freed with its lease). It logs, never fails its call: the
// call it frees for has done its work.
func (s *Server) free(ctx context.Context, op, key string, lease int64) {
	if s.opts.noLimits {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.callTimeout)
	defer cancel()
	_, err := store.Of(s.c).Txn(ctx, store.TxnRequest{Op: op,
		If:   []clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", clientv3.LeaseID(lease))},
		Then: []clientv3.Op{clientv3.OpDelete(key)}})
	if err != nil {
		s.lg.Warn("limit unit not freed; its lease frees it", zap.String("key", key), zap.String("lease-id", coordinator.FormatLeaseID(lease)), zap.Error(err))
	}
}

// grantUnit is the unit name of a grant of tenant/task, one per task (so a
// retried claim finds its unit): each label path-escaped, so that tenant
// "a/b" task "c" and tenant "a" task "b/c" are two units.
func grantUnit(tenant, task string) string {
	return url.PathEscape(tenant) + "/" + url.PathEscape(task)
}

// watchSeq numbers this process's watch streams, for their units' names.
var watchSeq atomic.Uint64

// watchUnit is a new stream's unit name on the replica's lease.
func watchUnit(lease int64) string {
	return fmt.Sprintf("%s-%d", coordinator.FormatLeaseID(lease), watchSeq.Add(1))
}
