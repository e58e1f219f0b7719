package coordinator

// What a fenced Txn compares. Every use of a Grant — Renew, Release,
// fencedtxn.Commit, the ledger's transitions, a caller's own Txn — puts
// Guard(g) in its If and guardReads(g) first in its Else, and classifies a
// failed Txn with checkGuard (core.CheckGuard outside this package). The
// compares, all in the one Txn that also performs the write:
//
//	Value(<p>/realm)            == g.Realm   else authority_generation_mismatch
//	ModRevision(fence)          == g.Epoch   else stale_owner (a newer grant was published)
//	ModRevision(owner)          == g.Epoch   the owner key of this very claim
//	Value(owner)                == g.Owner   equal epoch, other owner: stale_owner
//	LeaseValue(owner)           == g.Lease   expiry or revocation deletes the key: expired_owner
//
// checkGuard names the first that failed, in the order realm, fence, owner:
// authority_generation_mismatch, stale_owner (fence moved, or owner identity
// or epoch differ), expired_owner (fence still the grant's, owner key gone).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/internal/core"
)

// Guard is the set of compares that hold exactly while g is the current,
// live grant of its task: same realm, fence not moved since g's claim, the
// owner key of that very claim, same owner, same lease (expiry or revocation
// deletes the key). Put them in the If of a Txn of your own to fence your
// own writes; when that Txn fails, Current says whether the grant is refused
// (a refusal is for good: a fence never moves back, a rotated realm never
// returns, a deleted owner key is never rewritten at the same revision) or
// still current, so that your own compares failed.
func (c *Coordinator) Guard(g Grant) []clientv3.Cmp {
	k := c.keys
	owner := k.Owner(g.Tenant, g.Task)
	// Room for the compares callers append (the commit adds two), so that
	// their append does not copy the slice.
	return append(make([]clientv3.Cmp, 0, guardRoom+5),
		clientv3.Compare(clientv3.Value(k.Realm()), "=", g.Realm),
		clientv3.Compare(clientv3.ModRevision(k.Fence(g.Tenant, g.Task)), "=", g.Epoch),
		clientv3.Compare(clientv3.ModRevision(owner), "=", g.Epoch),
		clientv3.Compare(clientv3.Value(owner), "=", g.Owner),
		clientv3.Compare(clientv3.LeaseValue(owner), "=", clientv3.LeaseID(g.Lease)),
	)
}

// guardRoom is the spare capacity of Guard's and guardReads' slices.
const guardRoom = 2

// guardReads are the reads checkGuard classifies: realm, fence, owner,
// first in a guarded Txn's Else (core.GuardReads outside this package).
func (c *Coordinator) guardReads(g Grant) []clientv3.Op {
	k := c.keys
	return append(make([]clientv3.Op, 0, guardRoom+3),
		clientv3.OpGet(k.Realm()),
		clientv3.OpGet(k.Fence(g.Tenant, g.Task)),
		clientv3.OpGet(k.Owner(g.Tenant, g.Task)),
	)
}

// checkGuard classifies the responses of guardReads, read atomically with a
// failed Guard: nil if g is current, else the first of
// authority_generation_mismatch, stale_owner, expired_owner. fencedtxn and
// the ledger call it as core.CheckGuard.
func (c *Coordinator) checkGuard(op string, g Grant, rs []*pb.ResponseOp) error {
	if len(rs) < 3 {
		return Invalid(op, "the Txn's Else does not start with GuardReads")
	}
	realm, fence, owner := firstKV(rs[0]), firstKV(rs[1]), firstKV(rs[2])
	refuse := func(d Disposition, format string, args ...any) error {
		e := newError(d, op, g.Tenant, g.Task, fmt.Sprintf(format, args...), nil)
		e.Holder = holderOf(g.Tenant, g.Task, fence, owner)
		return e
	}
	switch {
	case realm == nil:
		return refuse(GenerationMismatch, "the authority has no realm (keyspace wiped or wrong prefix)")
	case string(realm.Value) != g.Realm:
		return refuse(GenerationMismatch, "grant realm %s, authority realm %s", g.Realm, realm.Value)
	case fence == nil:
		return refuse(StaleOwner, "the task has no fence: no grant was ever published for it, or retention collected it while nobody owned the task")
	case fence.ModRevision > g.Epoch:
		return refuse(StaleOwner, "a newer grant owns the task: the fence is at epoch %d, after the grant's epoch %d", fence.ModRevision, g.Epoch)
	case fence.ModRevision < g.Epoch:
		return refuse(StaleOwner, "the fence is at epoch %d, older than the grant's epoch %d: the authority never published this grant "+
			"(restored from a snapshot taken before it, or another cluster)", fence.ModRevision, g.Epoch)
	}
	var fr core.FenceRecord
	if err := json.Unmarshal(fence.Value, &fr); err != nil || fr.Owner != g.Owner || fr.Lease != g.Lease {
		return refuse(StaleOwner, "epoch %d belongs to owner %q lease %d, not %q lease %d", g.Epoch, fr.Owner, fr.Lease, g.Owner, g.Lease)
	}
	if owner == nil {
		return refuse(ExpiredOwner, "the owner key of epoch %d is gone (lease expired or revoked, or released)", g.Epoch)
	}
	if owner.ModRevision != g.Epoch || string(owner.Value) != g.Owner || owner.Lease != g.Lease {
		return refuse(StaleOwner, "the owner key is %q at epoch %d", owner.Value, owner.ModRevision)
	}
	return nil
}

// describeHolder completes the holder of a refusal (an *Error with a
// Holder, as a refused Guard returns) with what the guard's reads do not show:
// the task's protected state (StateVersion, LastOperation) and the seconds
// left on the holder's lease (TTLLeft), read now. It returns err itself,
// so that a refusal path reads `return c.describeHolder(ctx, err)`; any
// other error passes unchanged. A read that fails leaves its fields as they
// were (TTLLeft -1: unknown); the refusal stands either way.
func (c *Coordinator) describeHolder(ctx context.Context, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Holder == nil || e.Disposition.Class() != ClassRefused {
		return err
	}
	h := e.Holder
	var resp *clientv3.GetResponse
	if rerr := c.do(ctx, request{op: e.Op, tenant: h.Tenant, task: h.Task}, func(ctx context.Context) (err error) {
		resp, err = c.client.Get(ctx, c.keys.State(h.Tenant, h.Task))
		return err
	}); rerr == nil && len(resp.Kvs) > 0 {
		applyState(h, resp.Kvs[0])
	}
	if h.Owner != "" {
		h.TTLLeft = c.ttlLeft(ctx, h.Lease)
	}
	return err
}

// Current answers "is g still the current grant of its task?" with one
// linearizable, read-only Txn of Guard(g), classified by checkGuard. It
// returns nil while the realm, the fence, the owner key of g's very claim
// and its lease all still match g. Otherwise it returns the *Error of the
// refusal, with the holder the authority showed:
//
//   - authority_generation_mismatch: the realm rotated, or no realm is there;
//   - stale_owner: a newer grant moved the fence, or the owner key is another
//     claim's;
//   - expired_owner: the fence is still g's but its owner key is gone (the
//     lease expired or was revoked, or g was released);
//   - invalid_input: g is not a grant at all; nothing was sent.
//
// When etcd cannot answer it is authority_unavailable: a hold, since the
// question was not answered (a read is never outcome_unknown). Current
// writes nothing and renews nothing; an answer is true as of the read, so
// a write that depends on it must carry Guard(g) in its own Txn.
func (c *Coordinator) Current(ctx context.Context, g Grant) error {
	return c.current(ctx, "current", g)
}

// current is Current with op naming the request in its errors.
func (c *Coordinator) current(ctx context.Context, op string, g Grant) error {
	if err := g.Validate(); err != nil {
		return Invalid(op, "%v", err)
	}
	resp, err := c.txn(ctx, core.TxnRequest{Op: op, Tenant: g.Tenant, Task: g.Task, ReadOnly: true,
		If: c.Guard(g), Else: c.guardReads(g)})
	if err != nil {
		return err
	}
	if resp.Succeeded {
		return nil
	}
	return c.describeHolder(ctx, c.checkGuard(op, g, resp.Responses))
}
