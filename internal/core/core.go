// Package core holds what package coordinator lends the packages built on
// it — fencedtxn, ledger, retention, the gateway, the CLI, the drill, and
// the module's own tests, tools and benchmarks — and keeps out of its
// public API: the Txn every one of their requests goes through (so that a
// transport failure is classified as the coordinator's own are), GuardReads
// and CheckGuard (the reads that go with coordinator's Guard in a fenced
// Txn, and their classification), the keys of the ledger and of retention,
// the coordinator's logger, the sessions a gateway holds for workers over
// the network (Attach, Detach, RenewLease), the records stored under
// coordinator's keys (records.go), and the one cache of a grant's guard
// that fencedtxn's commits and the ledger's transitions share (guard.go).
//
// The functions are coordinator's own, lent to this package when a
// coordinator is built: coordinator.Coordinator embeds a Lent under an
// unexported name and fills it with Lend. Lent's one method is unexported,
// so a *coordinator.Coordinator is a lender and nothing outside this package
// can reach what it holds; the package's functions take the coordinator and
// call through. G stands for coordinator.Grant and S for
// *coordinator.Session, which this package cannot name (coordinator
// imports it); they are inferred at every call.
package core

import (
	"context"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TxnRequest is one Txn run through Txn.
type TxnRequest struct {
	Op, Tenant, Task string
	If               []clientv3.Cmp
	Then, Else       []clientv3.Op
	ReadOnly         bool // no Then op writes: a failure is authority_unavailable
}

// Plumbing is what a coordinator lends (coordinator/realm.go fills it).
type Plumbing[G comparable, S any] struct {
	// Guard is coordinator's Guard(g), the compares GuardReads go with.
	Guard func(g G) []clientv3.Cmp
	// Txn runs r. Its error, if any, is a *coordinator.Error:
	// authority_unavailable when the request never left this process (or
	// was a read), outcome_unknown when it may have reached etcd,
	// expired_owner when etcd named a lease gone; invalid_input, before any
	// I/O, for a Txn etcd can never accept.
	Txn func(ctx context.Context, r TxnRequest) (*clientv3.TxnResponse, error)
	// CheckGuard classifies the responses of GuardReads(g), read atomically
	// with a failed Guard(g): nil if g is current, else the first of
	// authority_generation_mismatch, stale_owner, expired_owner
	// (coordinator/fence.go).
	CheckGuard func(op string, g G, rs []*pb.ResponseOp) error
	// GuardReads are the reads CheckGuard classifies (realm, fence, owner),
	// first in the Else of a Txn whose If holds coordinator's Guard(g).
	GuardReads func(g G) []clientv3.Op
	// DescribeHolder completes the holder of a refusal (a
	// *coordinator.Error with a Holder, as CheckGuard returns) with the
	// task's state and the holder's TTL, read now, and returns err itself
	// (coordinator/fence.go).
	DescribeHolder func(ctx context.Context, err error) error
	// Outcome counts one finished request of operation by its disposition d
	// (a coordinator.Disposition) in the coordinator's metrics, if it has
	// any (coordinator/metrics.go).
	Outcome func(operation, d string)
	// Keys are the keys of the coordinator's keyspace that only the ledger
	// and retention use.
	Keys Keys
	// Logger is the coordinator's logger, for the packages built on it.
	Logger *zap.Logger
	// Attach is a session (a *coordinator.Session) over lease, granted
	// earlier for owner, that this process neither keeps alive nor revokes
	// except by Close, with the caller's local deadline; it asks nothing of
	// etcd (coordinator/attach.go).
	Attach func(owner string, lease int64, ttl time.Duration, deadline time.Time) (S, error)
	// Detach stops this process watching s (its deadline timer, its
	// metrics) without renewing or revoking its lease.
	Detach func(s S)
	// RenewLease renews lease once and returns the TTL etcd gave it and the
	// send time of the request (expired_owner: the lease is gone;
	// outcome_unknown: the answer was lost).
	RenewLease func(ctx context.Context, lease int64) (time.Duration, time.Time, error)
}

// Keys are the ledger's and retention's keys of one keyspace, built by
// coordinator/keys.go (where the whole layout lives).
type Keys struct {
	// Effect is the ledger record of one external effect of a task.
	Effect func(tenant, task, operation string) string
	// EffectPrefix is the prefix of every ledger record of a task.
	EffectPrefix func(tenant, task string) string
	// ParseEffect splits an effect record's key back into tenant, task and
	// operation.
	ParseEffect func(key string) (tenant, task, operation string, ok bool)
	// JournalEntry is the journal entry of an operation's seq-th ledger
	// transition.
	JournalEntry func(tenant, task, operation string, seq int64) string
	// JournalOperationPrefix is the prefix of every journal entry of one
	// operation.
	JournalOperationPrefix func(tenant, task, operation string) string
	// JournalPrefix is the prefix of every journal entry of a task.
	JournalPrefix func(tenant, task string) string
	// RetentionClock is the key a retention run rewrites to learn the
	// current revision before it reads its clock.
	RetentionClock func() string
	// RetentionMark is the retention clock mark written at revision.
	RetentionMark func(revision int64) string
	// RetentionMarks is the prefix of every retention clock mark.
	RetentionMarks func() string
}

// Lent holds what a coordinator lends, and its guard cache (guard.go);
// coordinator.Coordinator embeds it.
type Lent[G comparable, S any] struct {
	p      Plumbing[G, S]
	mu     sync.Mutex
	guards map[G]guarded
}

func (l *Lent[G, S]) lent() *Lent[G, S] { return l }

// Lend fills l; coordinator calls it once, as it builds a coordinator.
func Lend[G comparable, S any](l *Lent[G, S], p Plumbing[G, S]) { l.p = p }

// lender is a *coordinator.Coordinator.
type lender[G comparable, S any] interface{ lent() *Lent[G, S] }

// Txn runs r through c (Plumbing.Txn).
func Txn[G comparable, S any](c lender[G, S], ctx context.Context, r TxnRequest) (*clientv3.TxnResponse, error) {
	return c.lent().p.Txn(ctx, r)
}

// CheckGuard classifies, for c, the responses of GuardReads(g) read with a
// failed Guard(g) (Plumbing.CheckGuard).
func CheckGuard[G comparable, S any](c lender[G, S], op string, g G, rs []*pb.ResponseOp) error {
	return c.lent().p.CheckGuard(op, g, rs)
}

// GuardReads are the reads CheckGuard classifies, for g on c
// (Plumbing.GuardReads).
func GuardReads[G comparable, S any](c lender[G, S], g G) []clientv3.Op {
	return c.lent().p.GuardReads(g)
}

// DescribeHolder completes err's holder, for c (Plumbing.DescribeHolder).
func DescribeHolder[G comparable, S any](c lender[G, S], ctx context.Context, err error) error {
	return c.lent().p.DescribeHolder(ctx, err)
}

// Outcome counts a finished request of operation with disposition d in
// c's metrics (Plumbing.Outcome).
func Outcome[G comparable, S any, D ~string](c lender[G, S], operation string, d D) {
	c.lent().p.Outcome(operation, string(d))
}

// KeysOf is c's ledger and retention keys.
func KeysOf[G comparable, S any](c lender[G, S]) Keys { return c.lent().p.Keys }

// DialError names the failure of clientv3.New (which logs in when its
// Config has a user), before any coordinator exists: a *coordinator.Error,
// unauthenticated when etcd did not accept the credentials, else
// authority_unavailable; op names the step ("connect"). coordinator sets
// it as it is initialized (coordinator/transport.go's dialError), so it is
// set in every program that imports coordinator.
var DialError func(op string, endpoints []string, err error) error

// Logger is c's logger (Plumbing.Logger).
func Logger[G comparable, S any](c lender[G, S]) *zap.Logger { return c.lent().p.Logger }

// Attach is a session over lease on c, for a gateway that acts for the
// session's owner over the network (Plumbing.Attach).
func Attach[G comparable, S any](c lender[G, S], owner string, lease int64, ttl time.Duration, deadline time.Time) (S, error) {
	return c.lent().p.Attach(owner, lease, ttl, deadline)
}

// Detach stops c watching s, leaving its lease alone (Plumbing.Detach).
func Detach[G comparable, S any](c lender[G, S], s S) { c.lent().p.Detach(s) }

// RenewLease renews lease once through c (Plumbing.RenewLease).
func RenewLease[G comparable, S any](c lender[G, S], ctx context.Context, lease int64) (time.Duration, time.Time, error) {
	return c.lent().p.RenewLease(ctx, lease)
}
