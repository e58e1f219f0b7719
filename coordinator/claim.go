package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// Claim grants the session the task if nobody holds it, in one Txn:
//
//	If(Value(realm) == R, ModRevision(realm) == Rrev, ModRevision(owner) < Rrev)
//	Then(Put(owner, O, lease L), Put(fence, {O, L}))
//	Else(Get(owner), Get(realm))
//
// where Rrev is the revision the realm was written at. An owner key older
// than the realm was written under an earlier realm (before a rotation): it
// holds nothing, and the claim replaces it. Without a rotation this is
// the simpler ModRevision(owner) == 0, since every owner key is younger than
// the realm.
//
// The epoch is that Txn's revision. Grant issuance and fence publication are
// the same Txn: the previous owner is refused from the instant the grant
// exists. A busy task is refused with busy and the holder in the *Error. A
// claim retried after its answer was lost finds the owner key on this
// session's lease and returns the same grant.
func (s *Session) Claim(ctx context.Context, tenant, task string) (Grant, error) {
	g, _, err := s.claim(ctx, tenant, task)
	s.c.metrics.outcome("claim", Granted, err)
	return g, err
}

// claim returns, besides the grant, the revision at which a busy task was
// observed, so that Acquire can watch from there.
func (s *Session) claim(ctx context.Context, tenant, task string) (Grant, int64, error) {
	if err := CheckTask(tenant, task); err != nil {
		return Grant{}, 0, store.NewError(InvalidInput, "claim", "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := s.usable("claim", tenant, task); err != nil {
		return Grant{}, 0, err
	}
	c, k := s.c, s.c.keys
	owner, fence := k.Owner(tenant, task), k.Fence(tenant, task)
	fenceValue, _ := json.Marshal(store.FenceRecord{Owner: s.owner, Lease: int64(s.lease)})
	// A realm rotated since this coordinator read it is adopted once: a
	// claim carries no authority of its own, so it may start the new realm.
	for try := 0; ; try++ {
		realm, realmRev := c.realmAt()
		resp, err := c.s.Txn(ctx, store.TxnRequest{Op: "claim", Tenant: tenant, Task: task,
			If: []clientv3.Cmp{
				clientv3.Compare(clientv3.Value(k.Realm()), "=", realm),
				clientv3.Compare(clientv3.ModRevision(k.Realm()), "=", realmRev),
				clientv3.Compare(clientv3.ModRevision(owner), "<", realmRev),
			},
			Then: []clientv3.Op{
				clientv3.OpPut(owner, s.owner, clientv3.WithLease(s.lease)),
				clientv3.OpPut(fence, string(fenceValue)),
			},
			Else: []clientv3.Op{clientv3.OpGet(owner), clientv3.OpGet(k.Realm())},
		})
		if err != nil {
			return Grant{}, 0, err
		}
		if resp.Succeeded {
			g := Grant{Realm: realm, Tenant: tenant, Task: task, Owner: s.owner, Epoch: resp.Header.Revision, Lease: int64(s.lease)}
			logGrant(s.lg, zap.InfoLevel, "granted", g, true)
			return g, resp.Header.Revision, nil
		}
		held, stored := store.FirstKV(resp.Responses[0]), store.FirstKV(resp.Responses[1])
		switch {
		case stored == nil:
			return Grant{}, 0, store.NewError(GenerationMismatch, "claim", tenant, task, "the authority has no realm (keyspace wiped or wrong prefix)", nil)
		case string(stored.Value) != realm || stored.ModRevision != realmRev:
			if try > 0 {
				return Grant{}, 0, store.NewError(GenerationMismatch, "claim", tenant, task, "the realm keeps changing", nil)
			}
			s.lg.Warn("realm changed; adopting it", zap.String("old-realm", realm), zap.String("realm", string(stored.Value)))
			c.adoptRealm(string(stored.Value), stored.ModRevision)
			continue
		case held.Lease == int64(s.lease) && string(held.Value) == s.owner:
			// Our own earlier claim in this realm (the compare would have
			// passed for an older one), whose answer was lost.
			g := Grant{Realm: realm, Tenant: tenant, Task: task, Owner: s.owner, Epoch: held.ModRevision, Lease: int64(s.lease)}
			logGrant(s.lg, zap.InfoLevel, "granted (claim retried)", g, true)
			return g, resp.Header.Revision, nil
		}
		holder := store.HolderOf(tenant, task, held, held) // the holder's claim wrote its fence at the same revision
		holder.TTLLeft = c.s.TTLLeft(ctx, held.Lease)
		e := store.NewError(Busy, "claim", tenant, task, fmt.Sprintf("held by %q since epoch %d", held.Value, held.ModRevision), nil)
		e.Holder = holder
		return Grant{}, resp.Header.Revision, e
	}
}

// Acquire claims the task, waiting while it is busy: it watches the owner
// key for its deletion (release, expiry, revocation) and claims again, with
// no polling loop. It returns when granted, on any refusal other than busy,
// when the session stops, or when ctx is done (with the last busy error).
func (s *Session) Acquire(ctx context.Context, tenant, task string) (Grant, error) {
	owner := s.c.keys.Owner(tenant, task)
	for {
		g, rev, err := s.claim(ctx, tenant, task)
		if DispositionOf(err) != Busy {
			s.c.metrics.outcome("claim", Granted, err)
			return g, err
		}
		var e *Error
		if !errors.As(err, &e) || e.Holder == nil { // busy is always an *Error with its holder; anything else ends the wait
			s.c.metrics.outcome("claim", Granted, err)
			return g, err
		}
		s.lg.Debug("busy; waiting for the owner key to go", zap.String("tenant", tenant), zap.String("task", task),
			zap.String("disposition", string(Busy)))
		if werr := s.waitDeleted(ctx, owner, rev, e.Holder.Epoch); werr != nil {
			e.Err = werr
			s.c.metrics.outcome("claim", Granted, e)
			return Grant{}, e
		}
	}
}

// waitDeleted returns nil once the owner key, found busy by a claim answered
// at revision busyRev and last written at revision held, is deleted or
// changed after busyRev (or the watch was cut short, so the caller looks
// again), and ctx's or the session's cause if they end first.
//
// No deletion after busyRev is missed, and none waits for etcd's resync:
//
//   - etcd serves a watch whose start revision is not above its current
//     revision from its unsynced set, which it catches up only every 100 ms
//     (watchResyncPeriod in server/storage/mvcc/watchable_store.go). A
//     watch from busyRev+1 is such a watch as soon as anything else was
//     written since the claim, and a deletion then reaches it up to 100 ms
//     late. So the watch has no start revision: etcd registers it synced,
//     from its current revision W-1, and delivers every event at a revision
//     >= W as it applies. etcd registers it before it answers "created",
//     and that answer's header revision H is read after registering, so
//     H >= W-1.
//   - If H <= busyRev, then W-1 <= busyRev: the watch covers every revision
//     after busyRev and nothing more is needed.
//   - Otherwise something was written in (busyRev, W-1], which the watch
//     does not cover: the key is read again (a linearizable Get, at a
//     revision G >= H >= W-1). Gone, or last written at another revision
//     than held (deleted and claimed again, by anyone — this session
//     included), it changed after busyRev: return, and the caller claims
//     at once. Still at revision held, it was neither deleted nor written
//     in (busyRev, G], and the watch covers everything after G.
//
// A watch cut short and resumed by the client resumes at H or later, and G
// >= H: the Get covers what a resumed watch does not.
func (s *Session) waitDeleted(ctx context.Context, key string, busyRev, held int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	acquireStep(key, "busy")
	wch := s.c.client.Watch(wctx, key, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-s.Done():
			return s.cause()
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil || len(resp.Events) > 0 {
				return nil
			}
			if !resp.Created || resp.Header.Revision <= busyRev {
				continue
			}
			acquireStep(key, "watching")
			got, err := s.c.client.Get(ctx, key)
			switch {
			case err != nil && ctx.Err() != nil:
				return context.Cause(ctx)
			case err != nil:
				return nil // the caller's claim says what etcd says
			case len(got.Kvs) == 0 || got.Kvs[0].ModRevision != held:
				return nil
			}
		}
	}
}

// acquireHooks maps an owner key to a func(step string) that Acquire calls
// inside the windows of its wait: "busy" (the claim found the task busy,
// no watch yet) and "watching" (the watch is registered, the key not yet
// read again). Tests set it (export_test.go) to delete the owner key inside
// a window; it is empty otherwise.
var acquireHooks sync.Map

func acquireStep(key, step string) {
	if f, ok := acquireHooks.Load(key); ok {
		f.(func(string))(step)
	}
}
