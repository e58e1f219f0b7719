package store

// What a fenced Txn compares. Every use of a Grant — Renew, Release,
// fencedtxn.Commit, the ledger's transitions, a caller's own Txn — puts
// Guard(g) in its If and GuardReads(g) first in its Else, and classifies a
// failed Txn with CheckGuard. The compares, all in the one Txn that also
// performs the write:
//
//	Value(<p>/realm)            == g.Realm   else authority_generation_mismatch
//	ModRevision(fence)          == g.Epoch   else stale_owner (a newer grant was published)
//	ModRevision(owner)          == g.Epoch   the owner key of this very claim
//	Value(owner)                == g.Owner   equal epoch, other owner: stale_owner
//	LeaseValue(owner)           == g.Lease   expiry or revocation deletes the key: expired_owner
//
// CheckGuard names the first that failed, in the order realm, fence, owner:
// authority_generation_mismatch, stale_owner (fence moved, or owner identity
// or epoch differ), expired_owner (fence still the grant's, owner key gone).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Guard is the set of compares that hold exactly while g is the current,
// live grant of its task: same realm, fence not moved since g's claim, the
// owner key of that very claim, same owner, same lease (expiry or
// revocation deletes the key). coordinator.Guard is this.
func (s *Store) Guard(g Grant) []clientv3.Cmp {
	k := s.keys
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

// guardRoom is the spare capacity of Guard's and GuardReads' slices.
const guardRoom = 2

// GuardReads are the reads CheckGuard classifies: realm, fence, owner,
// first in a guarded Txn's Else.
func (s *Store) GuardReads(g Grant) []clientv3.Op {
	k := s.keys
	return append(make([]clientv3.Op, 0, guardRoom+3),
		clientv3.OpGet(k.Realm()),
		clientv3.OpGet(k.Fence(g.Tenant, g.Task)),
		clientv3.OpGet(k.Owner(g.Tenant, g.Task)),
	)
}

// CheckGuard classifies the responses of GuardReads, read atomically with a
// failed Guard: nil if g is current, else the first of
// authority_generation_mismatch, stale_owner, expired_owner, with the
// holder the reads showed (TTL unknown: DescribeHolder completes it).
func (s *Store) CheckGuard(op string, g Grant, rs []*pb.ResponseOp) error {
	if len(rs) < 3 {
		return NewError(InvalidInput, op, "", "", "the Txn's Else does not start with GuardReads", nil)
	}
	realm, fence, owner := FirstKV(rs[0]), FirstKV(rs[1]), FirstKV(rs[2])
	refuse := func(d Disposition, format string, args ...any) error {
		e := NewError(d, op, g.Tenant, g.Task, fmt.Sprintf(format, args...), nil)
		e.Holder = HolderOf(g.Tenant, g.Task, fence, owner)
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
			"(it was forged, or the keyspace was restored from a snapshot taken before it was granted, or is another cluster's)", fence.ModRevision, g.Epoch)
	}
	var fr FenceRecord
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

// A Store keeps, per grant, the guard's compares and reads (Guard,
// GuardReads) that every commit and ledger transition of that grant puts in
// its Txn: a worker commits and transitions many times under one grant, and
// building them — six keys, five compares, three reads — was half of a
// commit's client-side work and most of a transition's Txn building
// besides its records. An entry is exactly what Guard and GuardReads return
// for its grant (every field of the Grant is the key, and the cache is the
// store's own, whose keyspace never changes), handed out as fresh slices
// over shared keys and values that nothing modifies. It is cleared when it
// holds maxGuards grants, so its memory is bounded.

const maxGuards = 4096

type guarded struct {
	cmps  []clientv3.Cmp
	reads []clientv3.Op
}

// Guarded is g's Guard compares and GuardReads reads, each a fresh slice
// with room for extra more (the caller's own compares and reads).
func (s *Store) Guarded(g Grant, extra int) ([]clientv3.Cmp, []clientv3.Op) {
	s.mu.Lock()
	e, ok := s.guards[g]
	s.mu.Unlock()
	if !ok {
		e = guarded{s.Guard(g), s.GuardReads(g)}
		s.mu.Lock()
		if s.guards == nil || len(s.guards) >= maxGuards {
			s.guards = map[Grant]guarded{}
		}
		s.guards[g] = e
		s.mu.Unlock()
	}
	cmps := append(make([]clientv3.Cmp, 0, len(e.cmps)+extra), e.cmps...)
	reads := append(make([]clientv3.Op, 0, len(e.reads)+extra), e.reads...)
	return cmps, reads
}

// DescribeHolder completes the holder of a refusal (an *Error with a
// Holder, as CheckGuard returns) with what the guard's reads do not show:
// the task's protected state (StateVersion, LastOperation) and the seconds
// left on the holder's lease (TTLLeft), read now. It returns err itself,
// so that a refusal path reads `return s.DescribeHolder(ctx, err)`; any
// other error passes unchanged. A read that fails leaves its fields as they
// were (TTLLeft -1: unknown); the refusal stands either way.
func (s *Store) DescribeHolder(ctx context.Context, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Holder == nil || e.Disposition.Class() != ClassRefused {
		return err
	}
	h := e.Holder
	var resp *clientv3.GetResponse
	if rerr := s.Do(ctx, Request{Op: e.Op, Tenant: h.Tenant, Task: h.Task}, func(ctx context.Context) (err error) {
		resp, err = s.client.Get(ctx, s.keys.State(h.Tenant, h.Task))
		return err
	}); rerr == nil && len(resp.Kvs) > 0 {
		ApplyState(h, resp.Kvs[0])
	}
	if h.Owner != "" {
		h.TTLLeft = s.TTLLeft(ctx, h.Lease)
	}
	return err
}

// TTLLeft is the seconds left on lease, -1 when there is no lease or etcd
// cannot say.
func (s *Store) TTLLeft(ctx context.Context, lease int64) int64 {
	if lease == 0 {
		return -1
	}
	var resp *clientv3.LeaseTimeToLiveResponse
	err := s.Do(ctx, Request{Op: "ttl"}, func(ctx context.Context) (err error) {
		resp, err = s.client.TimeToLive(ctx, clientv3.LeaseID(lease))
		return err
	})
	if err != nil || resp.TTL < 0 {
		return -1
	}
	return resp.TTL
}

// FirstKV is the first key-value of a range response, nil if none.
func FirstKV(r *pb.ResponseOp) *mvccpb.KeyValue {
	if r == nil {
		return nil
	}
	rr := r.GetResponseRange()
	if rr == nil || len(rr.Kvs) == 0 {
		return nil
	}
	return rr.Kvs[0]
}

// HolderOf describes the task's current owner from its fence and owner keys
// (TTL unknown).
func HolderOf(tenant, task string, fence, owner *mvccpb.KeyValue) *Ownership {
	o := &Ownership{Tenant: tenant, Task: task, TTLLeft: -1}
	if fence != nil {
		o.Fence = fence.ModRevision
	}
	if owner != nil {
		o.Owner, o.Epoch, o.Lease = HolderFields(owner)
	}
	return o
}

// HolderFields reads owner, epoch and lease off an owner key.
func HolderFields(owner *mvccpb.KeyValue) (string, int64, int64) {
	return string(owner.Value), owner.ModRevision, owner.Lease
}

// ApplyState sets o's StateVersion and LastOperation from the task's state
// key kv (nil: never committed); a value that is no StateRecord still gives
// the key's version.
func ApplyState(o *Ownership, kv *mvccpb.KeyValue) {
	if kv == nil {
		return
	}
	var st StateRecord
	if err := json.Unmarshal(kv.Value, &st); err == nil {
		o.StateVersion, o.LastOperation = st.Version, st.Operation
	} else {
		o.StateVersion = kv.Version
	}
}
