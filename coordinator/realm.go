package coordinator

import (
	"context"
	"sync"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Coordinator is leasegate's view of one etcd keyspace: its realm, its keys,
// and the client to reach it. It is safe for concurrent use.
type Coordinator struct {
	client *clientv3.Client
	keys   Keyspace
	lg     *zap.Logger

	mu       sync.Mutex
	realm    string
	realmRev int64 // ModRevision of the realm key: owner keys older than it belong to an earlier realm
}

// New reads the realm at <prefix>/realm, creating it if absent.
func New(ctx context.Context, client *clientv3.Client, opts ...Option) (*Coordinator, error) {
	o := options{prefix: DefaultPrefix, logger: zap.NewNop()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, Invalid("new", "%v", err)
		}
	}
	if client == nil {
		return nil, Invalid("new", "nil etcd client")
	}
	c := &Coordinator{client: client, keys: Keyspace{prefix: o.prefix}, lg: o.logger.Named("coordinator")}
	realmKey := c.keys.Realm()
	fresh := uuid.NewString()
	resp, err := c.Txn(ctx, TxnRequest{Op: "new",
		If:   []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(realmKey), "=", 0)},
		Then: []clientv3.Op{clientv3.OpPut(realmKey, fresh)},
		Else: []clientv3.Op{clientv3.OpGet(realmKey)}})
	if err != nil {
		return nil, err
	}
	if resp.Succeeded {
		c.realm, c.realmRev = fresh, resp.Header.Revision
		c.lg.Info("realm created", zap.String("realm", fresh), zap.String("prefix", o.prefix))
	} else {
		kv := resp.Responses[0].GetResponseRange().Kvs[0]
		c.realm, c.realmRev = string(kv.Value), kv.ModRevision
	}
	return c, nil
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

// Logger is the coordinator's logger, for packages built on it.
func (c *Coordinator) Logger() *zap.Logger { return c.lg }

// CurrentRealm reads the realm stored in etcd now.
func (c *Coordinator) CurrentRealm(ctx context.Context) (string, error) {
	var resp *clientv3.GetResponse
	err := request{op: "realm"}.do(ctx, func(ctx context.Context) (err error) {
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
	var resp *clientv3.PutResponse
	err := request{op: "realm rotate", mutating: true}.do(ctx, func(ctx context.Context) (err error) {
		resp, err = c.client.Put(ctx, c.keys.Realm(), fresh)
		return err
	})
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
