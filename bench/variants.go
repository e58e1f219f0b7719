package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// The variants, in the order they are reported.
const (
	Put        = "put"
	BareCommit = "bare-commit"
	// BareCommitControl is bare-commit again on another task: its ratio
	// to bare-commit is the noise floor of a run (it would be 1.0 on a
	// quiet machine).
	BareCommitControl = "bare-commit-control"
	Commit            = "commit"
	Mutex             = "mutex"
	Election          = "election"
	BareClaimRelease  = "bare-claim-release"
	ClaimRelease      = "claim-release"
	// LedgerDispatch is one Dispatch of an AUTHORIZED record (claim,
	// revalidate, apply, confirm); the record is proposed and authorized
	// before the operation's clock starts (worker.prepare).
	LedgerDispatch = "ledger-dispatch"
	// LedgerLifecycle is one effect through the ledger: Propose,
	// Authorize, Dispatch.
	LedgerLifecycle = "ledger-lifecycle"
	// BareClaimReleaseNoFence is the bare pair without the fence put: not
	// a protocol leasegate could use (see docs/performance.md), it
	// measures what the second key of a claim costs.
	BareClaimReleaseNoFence = "bare-claim-release-nofence"
)

// Variants lists every variant. It returns a new slice each time: the
// caller may keep or change it.
func Variants() []string { return slices.Clone(variants) }

var variants = []string{Put, BareCommit, Commit, Mutex, Election, BareClaimRelease, BareClaimReleaseNoFence, ClaimRelease, LedgerDispatch, LedgerLifecycle,
	GatewayCommit, GatewayDispatch, HTTPFloor, GRPCFloor}

// benchValue is the business value every write carries.
var benchValue = []byte("bench-value-0123456789abcdef")

const tenant = "bench"

// worker is one goroutine's keys and sessions, set up once and reused by
// every round.
type worker struct {
	id     int
	c      *coordinator.Coordinator
	client *clientv3.Client
	s      *coordinator.Session
	cs     *concurrency.Session
	mutex  *concurrency.Mutex
	elect  *concurrency.Election

	realm    string
	realmRev int64
	putKey   string

	commitG    coordinator.Grant
	commitVer  int64
	bare       bareTask // bare-commit's task
	control    bareTask // bare-commit-control's: the same Txn on another task
	bareState  string
	bareOpRec  string
	seq        int
	crTask     string
	bareCRTask string
	fenceValue string
	ledger     *ledger.Ledger
	ledgerG    coordinator.Grant
	ready      string         // ledger-dispatch's AUTHORIZED operation, made by prepare
	gw         *gatewayWorker // the gateway variants' side; nil when none runs
}

func newWorker(ctx context.Context, c *coordinator.Coordinator, l *ledger.Ledger, id int, prefix string) (*worker, error) {
	w := &worker{id: id, c: c, client: c.Client(), ledger: l, putKey: fmt.Sprintf("%s-plain/put/%d", prefix, id),
		crTask: fmt.Sprintf("cr-%d", id), bareCRTask: fmt.Sprintf("bare-cr-%d", id)}
	var err error
	if w.s, err = c.NewSession(ctx, fmt.Sprintf("worker-%d", id), 60*time.Second); err != nil {
		return nil, err
	}
	if w.cs, err = concurrency.NewSession(w.client, concurrency.WithTTL(60), concurrency.WithContext(context.WithoutCancel(ctx))); err != nil {
		return nil, fmt.Errorf("concurrency session: %w", err)
	}
	w.mutex = concurrency.NewMutex(w.cs, fmt.Sprintf("%s-plain/mutex/%d", prefix, id))
	w.elect = concurrency.NewElection(w.cs, fmt.Sprintf("%s-plain/election/%d", prefix, id))
	if w.commitG, err = w.s.Claim(ctx, tenant, fmt.Sprintf("commit-%d", id)); err != nil {
		return nil, err
	}
	for _, b := range []struct {
		t    *bareTask
		task string
	}{{&w.bare, "bare-commit"}, {&w.control, "bare-control"}} {
		if b.t.g, err = w.s.Claim(ctx, tenant, fmt.Sprintf("%s-%d", b.task, id)); err != nil {
			return nil, err
		}
		b.t.guard, b.t.reads = c.Guard(b.t.g), store.Of(c).GuardReads(b.t.g)
	}
	if w.ledgerG, err = w.s.Claim(ctx, tenant, fmt.Sprintf("ledger-%d", id)); err != nil {
		return nil, err
	}
	// The bare variants build what leasegate builds, once: the guard of
	// the grant, the record values of the same size.
	bg := w.bare.g
	receipt, _ := json.Marshal(fencedtxn.Receipt{Disposition: coordinator.Committed, Tenant: tenant, Task: bg.Task,
		Operation: "op-000001", CommittedVersion: 1, Epoch: bg.Epoch})
	opRec, _ := json.Marshal(store.OpRecord{PayloadDigest: fencedtxn.Digest(fencedtxn.Intent{Tenant: tenant, Task: bg.Task,
		Operation: "op-000001", Value: benchValue}), Receipt: receipt, Epoch: bg.Epoch, Owner: bg.Owner})
	state, _ := json.Marshal(store.StateRecord{Version: 1, Value: benchValue, Operation: "op-000001", Epoch: bg.Epoch})
	w.bareOpRec, w.bareState = string(opRec), string(state)
	fence, _ := json.Marshal(store.FenceRecord{Owner: w.s.Owner(), Lease: w.s.Lease()})
	w.fenceValue = string(fence)
	resp, err := w.client.Get(ctx, c.Keys().Realm())
	if err != nil || len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("read the realm: %v", err)
	}
	w.realm, w.realmRev = string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision
	return w, nil
}

func (w *worker) close(ctx context.Context) {
	_ = w.s.Close(ctx)
	_ = w.cs.Close()
}

// op runs one operation of variant v.
func (w *worker) op(ctx context.Context, v string) error {
	if handled, err := w.gatewayOp(ctx, v); handled {
		return err
	}
	w.seq++
	switch v {
	case Put:
		_, err := w.client.Put(ctx, w.putKey, w.bareState)
		return err
	case BareCommit:
		return w.bareCommit(ctx, &w.bare)
	case BareCommitControl:
		return w.bareCommit(ctx, &w.control)
	case Commit:
		_, err := fencedtxn.Commit(ctx, w.c, w.commitG, fencedtxn.Intent{Tenant: tenant, Task: w.commitG.Task,
			Operation: fmt.Sprintf("op-%06d", w.seq), Value: benchValue, ExpectedVersion: w.commitVer})
		if err == nil {
			w.commitVer++
		}
		return err
	case Mutex:
		if err := w.mutex.Lock(ctx); err != nil {
			return err
		}
		return w.mutex.Unlock(ctx)
	case Election:
		if err := w.elect.Campaign(ctx, "w"); err != nil {
			return err
		}
		return w.elect.Resign(ctx)
	case BareClaimRelease:
		return w.bareClaimRelease(ctx, true)
	case BareClaimReleaseNoFence:
		return w.bareClaimRelease(ctx, false)
	case LedgerDispatch:
		return w.ledgerDispatch(ctx)
	case LedgerLifecycle:
		return w.ledgerLifecycle(ctx)
	case ClaimRelease:
		g, err := w.s.Claim(ctx, tenant, w.crTask)
		if err != nil {
			return err
		}
		return w.c.Release(ctx, g)
	}
	return fmt.Errorf("unknown variant %q", v)
}

// bareCommit is fencedtxn.Commit's Txn with nothing around it.
// bareTask is a task the bare commit writes to, with its guard built once.
type bareTask struct {
	g     coordinator.Grant
	ver   int64
	guard []clientv3.Cmp
	reads []clientv3.Op
}

func (w *worker) bareCommit(ctx context.Context, b *bareTask) error {
	k := w.c.Keys()
	g := b.g
	stateKey, opKey := k.State(g.Tenant, g.Task), k.Op(g.Tenant, g.Task, fmt.Sprintf("op-%06d", w.seq))
	cmps := append(b.guard[:len(b.guard):len(b.guard)],
		clientv3.Compare(clientv3.CreateRevision(opKey), "=", 0),
		clientv3.Compare(clientv3.Version(stateKey), "=", b.ver))
	els := append(b.reads[:len(b.reads):len(b.reads)], clientv3.OpGet(opKey), clientv3.OpGet(stateKey))
	resp, err := w.client.Txn(ctx).If(cmps...).
		Then(clientv3.OpPut(stateKey, w.bareState), clientv3.OpPut(opKey, w.bareOpRec)).
		Else(els...).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("bare commit refused")
	}
	b.ver++
	return nil
}

// bareClaimRelease is the claim Txn and the release Txn of leasegate with
// nothing around them.
func (w *worker) bareClaimRelease(ctx context.Context, withFence bool) error {
	k := w.c.Keys()
	task := w.bareCRTask
	if !withFence {
		task += "-nofence"
	}
	owner, fence := k.Owner(tenant, task), k.Fence(tenant, task)
	then := []clientv3.Op{clientv3.OpPut(owner, w.s.Owner(), clientv3.WithLease(clientv3.LeaseID(w.s.Lease())))}
	if withFence {
		then = append(then, clientv3.OpPut(fence, w.fenceValue))
	}
	resp, err := w.client.Txn(ctx).If(
		clientv3.Compare(clientv3.Value(k.Realm()), "=", w.realm),
		clientv3.Compare(clientv3.ModRevision(k.Realm()), "=", w.realmRev),
		clientv3.Compare(clientv3.ModRevision(owner), "<", w.realmRev),
	).Then(then...).Else(clientv3.OpGet(owner), clientv3.OpGet(k.Realm())).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("bare claim refused")
	}
	g := coordinator.Grant{Realm: w.realm, Tenant: tenant, Task: task, Owner: w.s.Owner(), Epoch: resp.Header.Revision, Lease: w.s.Lease()}
	cmps := w.c.Guard(g)
	if !withFence { // no fence to compare: the owner key's compares only
		cmps = append(cmps[:1], cmps[2:]...)
	}
	resp, err = w.client.Txn(ctx).If(cmps...).Then(clientv3.OpDelete(owner)).Else(store.Of(w.c).GuardReads(g)...).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("bare release refused")
	}
	return nil
}
