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

	"github.com/leasegate/leasegate/internal/store"
)

// Coordinator is leasegate's view of one etcd keyspace: its realm, its keys,
// and the client to reach it. It is safe for concurrent use.
type Coordinator struct {
	// Handle lets the packages built on coordinator reach s through
	// store.Of(c); its one method is unexported, so it adds nothing to
	// Coordinator's API.
	store.Handle
	s       *store.Store // the etcd plumbing: every Txn, the guard and its check
	client  *clientv3.Client
	keys    store.Keys
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
// is a keyspace under an ancestor's store.NestedSubtree (/leasegate/drill/run).
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
	resp, err := c.s.Txn(ctx, store.TxnRequest{Op: "new",
		If:   append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(realmKey), "=", 0)}, c.noAncestorRealms()...),
		Then: []clientv3.Op{clientv3.OpPut(realmKey, fresh)},
		Else: c.realmReads()})
	if err != nil {
		return c.orNil(err)
	}
	if resp.Succeeded {
		c.realm, c.realmRev = fresh, resp.Header.Revision
		c.lg.Info("realm created", zap.String("realm", fresh), zap.String("prefix", c.keys.Prefix()))
		c.recordOrigin(ctx, fresh, resp.Header.Revision)
		return c, nil
	}
	// Created by another process in between, or an ancestor keyspace was.
	found, err = c.adoptRealmReads("new", resp.Responses)
	if err == nil && !found {
		err = store.NewError(GenerationMismatch, "new", "", "", "the realm key was created and deleted meanwhile", nil)
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
		err = store.NewError(NoKeyspace, "open", "", "", fmt.Sprintf("no leasegate keyspace at prefix %s (no %s key)", c.keys.Prefix(), c.keys.Realm()), nil)
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
			return nil, store.NewError(InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if client == nil {
		return nil, store.NewError(InvalidInput, op, "", "", "nil etcd client", nil)
	}
	c := &Coordinator{client: client, keys: store.NewKeys(o.prefix), lg: o.logger.Named("coordinator"), opts: o}
	if o.registerer != nil {
		m, err := newMetrics(o.registerer)
		if err != nil {
			return nil, store.NewError(InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
		c.metrics = m
	}
	c.s = store.New(client, c.keys, store.Limits{RequestTimeout: o.requestTimeout, MaxTxnOps: o.maxTxnOps, MaxRequestBytes: o.maxRequestBytes},
		c.lg, c.metrics.storeMetrics())
	c.Handle = store.NewHandle(c.s)
	return c, nil
}

// ancestorRealms are the realm keys of every keyspace the prefix would be
// nested in: for /a/b/c, /a/realm and /a/b/realm. An ancestor whose
// store.NestedSubtree holds the prefix (/a for /a/drill/c) is left out: a
// keyspace may live there.
func (c *Coordinator) ancestorRealms() []string {
	var keys []string
	p := c.keys.Prefix()
	for i := 1; i < len(p); i++ {
		if p[i] == '/' && !strings.HasPrefix(p[i:], store.NestedSubtree) {
			keys = append(keys, store.NewKeys(p[:i]).Realm())
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
	resp, err := c.s.Txn(ctx, store.TxnRequest{Op: op, ReadOnly: true, Then: c.realmReads()})
	if DispositionOf(err) == PermissionDenied && len(c.ancestors) > 0 {
		c.lg.Debug("the enclosing prefixes are not readable; nesting not checked", zap.String("prefix", c.keys.Prefix()))
		c.ancestors = nil
		resp, err = c.s.Txn(ctx, store.TxnRequest{Op: op, ReadOnly: true, Then: c.realmReads()})
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
		if store.FirstKV(rs[i+1]) != nil {
			return false, store.NewError(InvalidInput, op, "", "", fmt.Sprintf("prefix %s is nested inside the leasegate keyspace at %s (it holds %s); choose a prefix outside it", c.keys.Prefix(), strings.TrimSuffix(k, store.RealmSuffix), k), nil)
		}
	}
	kv := store.FirstKV(rs[0])
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
func (c *Coordinator) Keys() Keyspace { return Keyspace{c.keys} }

// Client is the etcd client the coordinator uses.
func (c *Coordinator) Client() *clientv3.Client { return c.client }

// CurrentRealm reads the realm stored in etcd now.
func (c *Coordinator) CurrentRealm(ctx context.Context) (string, error) {
	var resp *clientv3.GetResponse
	err := c.s.Do(ctx, store.Request{Op: "realm"}, func(ctx context.Context) (err error) {
		resp, err = c.client.Get(ctx, c.keys.Realm())
		return err
	})
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", store.NewError(GenerationMismatch, "realm", "", "", "realm key is missing", nil)
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
		then = append(then, clientv3.OpPut(c.keys.Origin(), origin))
	} else {
		then = append(then, clientv3.OpDelete(c.keys.Origin()))
		c.lg.Warn("realm origin not recorded: a restore will not be detected until the next rotation",
			zap.String("realm", fresh), zap.String("disposition", string(DispositionOf(oerr))), zap.Error(oerr))
	}
	resp, err := c.s.Txn(ctx, store.TxnRequest{Op: "realm rotate", Then: then})
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
