package coordinator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/core"
)

// Coordinator is leasegate's view of one etcd keyspace: its realm, its keys,
// and the client to reach it. It is safe for concurrent use.
type Coordinator struct {
	// lent is what the packages built on coordinator call and its users do
	// not (internal/core): txn, checkGuard, guardReads, describeHolder, the
	// commit's outcome count and the ledger's and retention's keys, filled
	// by newCoordinator.
	lent
	client  *clientv3.Client
	keys    Keyspace
	lg      *zap.Logger
	opts    options
	metrics *metrics // nil without WithMetrics
	// ancestors are the realm keys of the enclosing prefixes checked for
	// nesting: all of them, or none if the client may not read there.
	ancestors []string

	mu       sync.Mutex
	realm    string
	realmRev int64 // ModRevision of the realm key: owner keys older than it belong to an earlier realm
}

// New opens the keyspace at the prefix (default /leasegate) to act on it:
// it reads the realm at <prefix>/realm and creates it if absent. Only
// acting code (claims, commits, rotation) should call New; readers call
// Open, which never writes. A prefix nested inside another leasegate
// keyspace (an ancestor path holds a realm key: /leasegate/owner under
// /leasegate) is invalid_input, and nothing is written; the one exception
// is a keyspace under an ancestor's NestedSubtree (/leasegate/drill/run).
func New(ctx context.Context, client *clientv3.Client, opts ...Option) (*Coordinator, error) {
	c, err := newCoordinator("new", client, opts)
	if err != nil {
		return nil, err
	}
	found, err := c.readRealm(ctx, "new")
	if err != nil || found {
		return c.orNil(err)
	}
	realmKey := c.keys.Realm()
	fresh := uuid.NewString()
	resp, err := c.txn(ctx, core.TxnRequest{Op: "new",
		If:   append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(realmKey), "=", 0)}, c.noAncestorRealms()...),
		Then: []clientv3.Op{clientv3.OpPut(realmKey, fresh)},
		Else: c.realmReads()})
	if err != nil {
		return c.orNil(err)
	}
	if resp.Succeeded {
		c.realm, c.realmRev = fresh, resp.Header.Revision
		c.lg.Info("realm created", zap.String("realm", fresh), zap.String("prefix", c.keys.prefix))
		c.recordOrigin(ctx, fresh, resp.Header.Revision)
		return c, nil
	}
	// Created by another process in between, or an ancestor keyspace was.
	found, err = c.adoptRealmReads("new", resp.Responses)
	if err == nil && !found {
		err = newError(GenerationMismatch, "new", "", "", "the realm key was created and deleted meanwhile", nil)
	}
	return c.orNil(err)
}

// Open opens an existing keyspace read-only: it reads the realm and writes
// nothing. A prefix without a realm key is no_keyspace ("no leasegate
// keyspace at prefix /wrong"); a prefix nested inside another keyspace is
// invalid_input. The coordinator it returns can do everything New's can
// (a claim on it acts), but opening never creates anything.
func Open(ctx context.Context, client *clientv3.Client, opts ...Option) (*Coordinator, error) {
	c, err := newCoordinator("open", client, opts)
	if err != nil {
		return nil, err
	}
	found, err := c.readRealm(ctx, "open")
	if err == nil && !found {
		err = newError(NoKeyspace, "open", "", "", fmt.Sprintf("no leasegate keyspace at prefix %s (no %s key)", c.keys.prefix, c.keys.Realm()), nil)
	}
	return c.orNil(err)
}

func (c *Coordinator) orNil(err error) (*Coordinator, error) {
	if err != nil {
		c.metrics.unregister() // the caller may retry on the same registry
		return nil, err
	}
	return c, nil
}

func newCoordinator(op string, client *clientv3.Client, opts []Option) (*Coordinator, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, Invalid(op, "%v", err)
		}
	}
	if client == nil {
		return nil, Invalid(op, "nil etcd client")
	}
	c := &Coordinator{client: client, keys: Keyspace{prefix: o.prefix}, lg: o.logger.Named("coordinator"), opts: o}
	k := c.keys
	core.Lend(&c.lent, core.Plumbing[Grant, *Session]{Guard: c.Guard, Txn: c.txn, CheckGuard: c.checkGuard, GuardReads: c.guardReads,
		DescribeHolder: c.describeHolder,
		Outcome:        func(operation, d string) { c.metrics.count(operation, Disposition(d)) },
		Keys: core.Keys{
			Effect: k.effect, EffectPrefix: k.effectPrefix, ParseEffect: k.parseEffect,
			JournalEntry: k.journalEntry, JournalOperationPrefix: k.journalOperationPrefix, JournalPrefix: k.journalPrefix,
			RetentionClock: k.retentionClock, RetentionMark: k.retentionMark, RetentionMarks: k.retentionMarks,
		},
		Logger: c.lg, Attach: c.attach, Detach: (*Session).detach, RenewLease: c.renewLease,
	})
	if o.registerer != nil {
		m, err := newMetrics(o.registerer)
		if err != nil {
			return nil, Invalid(op, "%v", err)
		}
		c.metrics = m
	}
	return c, nil
}

// ancestorRealms are the realm keys of every keyspace the prefix would be
// nested in: for /a/b/c, /a/realm and /a/b/realm. An ancestor whose
// NestedSubtree holds the prefix (/a for /a/drill/c) is left out: a
// keyspace may live there.
func (c *Coordinator) ancestorRealms() []string {
	var keys []string
	p := c.keys.prefix
	for i := 1; i < len(p); i++ {
		if p[i] == '/' && !strings.HasPrefix(p[i:], NestedSubtree) {
			keys = append(keys, Keyspace{prefix: p[:i]}.Realm())
		}
	}
	return keys
}

// realmReads reads the realm key, then every ancestor's.
func (c *Coordinator) realmReads() []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpGet(c.keys.Realm())}
	for _, k := range c.ancestors {
		ops = append(ops, clientv3.OpGet(k))
	}
	return ops
}

func (c *Coordinator) noAncestorRealms() []clientv3.Cmp {
	var cmps []clientv3.Cmp
	for _, k := range c.ancestors {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
	}
	return cmps
}

// readRealm reads the realm and the ancestors' realm keys at one revision
// and adopts the realm if there is one. A client whose role may read only
// its own prefix (etcd auth) cannot see the ancestors: the nesting check is
// then skipped rather than the open refused.
func (c *Coordinator) readRealm(ctx context.Context, op string) (bool, error) {
	c.ancestors = c.ancestorRealms()
	resp, err := c.txn(ctx, core.TxnRequest{Op: op, ReadOnly: true, Then: c.realmReads()})
	if DispositionOf(err) == PermissionDenied && len(c.ancestors) > 0 {
		c.lg.Debug("the enclosing prefixes are not readable; nesting not checked", zap.String("prefix", c.keys.prefix))
		c.ancestors = nil
		resp, err = c.txn(ctx, core.TxnRequest{Op: op, ReadOnly: true, Then: c.realmReads()})
	}
	if err != nil {
		return false, err
	}
	return c.adoptRealmReads(op, resp.Responses)
}

// adoptRealmReads classifies the responses of realmReads: invalid_input if
// an ancestor holds a keyspace, else whether the realm exists (adopted).
func (c *Coordinator) adoptRealmReads(op string, rs []*pb.ResponseOp) (bool, error) {
	for i, k := range c.ancestors {
		if firstKV(rs[i+1]) != nil {
			return false, Invalid(op, "prefix %s is nested inside the leasegate keyspace at %s (it holds %s); choose a prefix outside it",
				c.keys.prefix, strings.TrimSuffix(k, realmSuffix), k)
		}
	}
	kv := firstKV(rs[0])
	if kv == nil {
		return false, nil
	}
	c.adoptRealm(string(kv.Value), kv.ModRevision)
	return true, nil
}

// Realm is the realm this coordinator issues grants under.
func (c *Coordinator) Realm() string {
	r, _ := c.realmAt()
	return r
}

// realmAt is the realm and the revision at which it was written.
func (c *Coordinator) realmAt() (string, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.realm, c.realmRev
}

// Keys is the coordinator's keyspace.
func (c *Coordinator) Keys() Keyspace { return c.keys }

// Client is the etcd client the coordinator uses.
func (c *Coordinator) Client() *clientv3.Client { return c.client }

// CurrentRealm reads the realm stored in etcd now.
func (c *Coordinator) CurrentRealm(ctx context.Context) (string, error) {
	var resp *clientv3.GetResponse
	err := c.do(ctx, request{op: "realm"}, func(ctx context.Context) (err error) {
		resp, err = c.client.Get(ctx, c.keys.Realm())
		return err
	})
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", newError(GenerationMismatch, "realm", "", "", "realm key is missing", nil)
	}
	return string(resp.Kvs[0].Value), nil
}

// RotateRealm writes a new realm, so every outstanding grant is refused with
// authority_generation_mismatch from then on. Use it after restoring etcd
// from a backup, or to cut off every owner at once. It returns the new realm.
func (c *Coordinator) RotateRealm(ctx context.Context) (string, error) {
	fresh := uuid.NewString()
	old := c.Realm()
	// The origin goes with the realm; rotating matters more than recording
	// it, so a rotation whose status reads failed drops the old realm's
	// origin instead (realm show then says none is recorded).
	then := []clientv3.Op{clientv3.OpPut(c.keys.Realm(), fresh)}
	if origin, oerr := c.origin(ctx, "realm rotate", fresh); oerr == nil {
		then = append(then, clientv3.OpPut(c.keys.origin(), origin))
	} else {
		then = append(then, clientv3.OpDelete(c.keys.origin()))
		c.lg.Warn("realm origin not recorded: a restore will not be detected until the next rotation",
			zap.String("realm", fresh), zap.String("disposition", string(DispositionOf(oerr))), zap.Error(oerr))
	}
	resp, err := c.txn(ctx, core.TxnRequest{Op: "realm rotate", Then: then})
	if err != nil {
		return "", err
	}
	c.adoptRealm(fresh, resp.Header.Revision)
	c.lg.Warn("realm rotated: every outstanding grant is now refused", zap.String("old-realm", old), zap.String("realm", fresh))
	return fresh, nil
}

func (c *Coordinator) adoptRealm(r string, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.realm, c.realmRev = r, rev
}

// lent is embedded in Coordinator under this unexported name, so that its
// fields and method stay out of the public API.
type lent = core.Lent[Grant, *Session]
