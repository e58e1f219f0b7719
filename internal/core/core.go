// Package core holds what package coordinator lends the packages built on
// it — fencedtxn, ledger, retention, and the module's own tests, tools and
// benchmarks — and keeps out of its public API: the Txn every one of their
// requests goes through (so that a transport failure is classified as the
// coordinator's own are), GuardReads and CheckGuard (the reads that go with
// coordinator's Guard in a fenced Txn, and their classification), the keys of the ledger and of retention, and the records stored
// under coordinator's keys (records.go), and the one cache of a grant's
// guard that fencedtxn's commits and the ledger's transitions share
// (guard.go).
//
// The functions are coordinator's own, lent to this package when a
// coordinator is built: coordinator.Coordinator embeds a Lent under an
// unexported name and fills it with Lend. Lent's one method is unexported,
// so a *coordinator.Coordinator is a lender and nothing outside this package
// can reach what it holds; Txn, CheckGuard, GuardReads and KeysOf take the coordinator
// and call through. G stands for coordinator.Grant, which this package
// cannot name (coordinator imports it); it is inferred at every call.
package core

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TxnRequest is one Txn run through Txn.
type TxnRequest struct {
	Op, Tenant, Task string
	If               []clientv3.Cmp
	Then, Else       []clientv3.Op
	ReadOnly         bool // no Then op writes: a failure is authority_unavailable
}

// Plumbing is what a coordinator lends (coordinator/realm.go fills it).
type Plumbing[G comparable] struct {
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
type Lent[G comparable] struct {
	p      Plumbing[G]
	mu     sync.Mutex
	guards map[G]guarded
}

func (l *Lent[G]) lent() *Lent[G] { return l }

// Lend fills l; coordinator calls it once, as it builds a coordinator.
func Lend[G comparable](l *Lent[G], p Plumbing[G]) { l.p = p }

// lender is a *coordinator.Coordinator.
type lender[G comparable] interface{ lent() *Lent[G] }

// Txn runs r through c (Plumbing.Txn).
func Txn[G comparable](c lender[G], ctx context.Context, r TxnRequest) (*clientv3.TxnResponse, error) {
	return c.lent().p.Txn(ctx, r)
}

// CheckGuard classifies, for c, the responses of GuardReads(g) read with a
// failed Guard(g) (Plumbing.CheckGuard).
func CheckGuard[G comparable](c lender[G], op string, g G, rs []*pb.ResponseOp) error {
	return c.lent().p.CheckGuard(op, g, rs)
}

// GuardReads are the reads CheckGuard classifies, for g on c
// (Plumbing.GuardReads).
func GuardReads[G comparable](c lender[G], g G) []clientv3.Op { return c.lent().p.GuardReads(g) }

// DescribeHolder completes err's holder, for c (Plumbing.DescribeHolder).
func DescribeHolder[G comparable](c lender[G], ctx context.Context, err error) error {
	return c.lent().p.DescribeHolder(ctx, err)
}

// Outcome counts a finished request of operation with disposition d in
// c's metrics (Plumbing.Outcome).
func Outcome[G comparable, D ~string](c lender[G], operation string, d D) {
	c.lent().p.Outcome(operation, string(d))
}

// KeysOf is c's ledger and retention keys.
func KeysOf[G comparable](c lender[G]) Keys { return c.lent().p.Keys }
