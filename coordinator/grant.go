package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Grant is an owner's evidence of one claim: a plain value, checked by the
// authority at every use and never authority by itself. Any Coordinator of
// the same realm can check it.
type Grant struct {
	Realm  string `json:"realm"`
	Tenant string `json:"tenant"`
	Task   string `json:"task"`
	Owner  string `json:"owner"`
	Epoch  int64  `json:"epoch"`
	Lease  int64  `json:"lease"` // in JSON a hex string, as etcdctl prints it; a number is accepted on input
}

// grantJSON is Grant's JSON shape: the lease as a hex string.
type grantJSON struct {
	Realm  string    `json:"realm"`
	Tenant string    `json:"tenant"`
	Task   string    `json:"task"`
	Owner  string    `json:"owner"`
	Epoch  int64     `json:"epoch"`
	Lease  leaseJSON `json:"lease"`
}

// MarshalJSON writes the lease as a hex string ("694d7b1f3c2a0b11"), as
// etcdctl prints it: as a JSON number an ID above 2^53 is rounded by jq and
// JavaScript.
func (g Grant) MarshalJSON() ([]byte, error) {
	return json.Marshal(grantJSON{Realm: g.Realm, Tenant: g.Tenant, Task: g.Task, Owner: g.Owner, Epoch: g.Epoch, Lease: leaseJSON(g.Lease)})
}

// UnmarshalJSON reads a grant whose lease is a hex string or a number. A
// field a grant does not have is an error: a misspelt field would otherwise
// read as a zero value.
func (g *Grant) UnmarshalJSON(b []byte) error {
	var j grantJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	*g = Grant{Realm: j.Realm, Tenant: j.Tenant, Task: j.Task, Owner: j.Owner, Epoch: j.Epoch, Lease: int64(j.Lease)}
	return nil
}

// Validate reports why g cannot be a grant at all.
func (g Grant) Validate() error {
	if g.Realm == "" {
		return fmt.Errorf("grant has no realm")
	}
	if err := CheckTask(g.Tenant, g.Task); err != nil {
		return err
	}
	if err := CheckLabel("owner", g.Owner); err != nil {
		return err
	}
	if g.Epoch <= 0 {
		return fmt.Errorf("grant epoch %d must be positive", g.Epoch)
	}
	if g.Lease <= 0 {
		return fmt.Errorf("grant lease %d must be positive", g.Lease)
	}
	return nil
}

// fields are the log fields of a grant; taskFields leave out owner and
// lease, for a logger that already carries them (a session's).
func (g Grant) fields() []zap.Field {
	return append(g.taskFields(), zap.String("owner", g.Owner), leaseField(g.Lease))
}

func (g Grant) taskFields() []zap.Field {
	return []zap.Field{zap.String("tenant", g.Tenant), zap.String("task", g.Task), zap.Int64("epoch", g.Epoch)}
}

// logGrant logs msg with g's fields (its task fields only for a logger
// that carries owner and lease already), building them only when the level
// is on: claims and releases allocate nothing for a logger that drops them.
func logGrant(lg *zap.Logger, level zapcore.Level, msg string, g Grant, taskOnly bool) {
	if ce := lg.Check(level, msg); ce != nil {
		if taskOnly {
			ce.Write(g.taskFields()...)
		} else {
			ce.Write(g.fields()...)
		}
	}
}

// Renew keeps g's lease alive once, if g is still the current grant. It
// cannot revive an expired lease: etcd answers a keepalive of a lease past
// its TTL with "lease not found" once it revokes it.
func (c *Coordinator) Renew(ctx context.Context, g Grant) error {
	err := c.renew(ctx, g)
	c.metrics.outcome("renew", Renewed, err)
	return err
}

func (c *Coordinator) renew(ctx context.Context, g Grant) error {
	if err := g.Validate(); err != nil {
		return Invalid("renew", "%v", err)
	}
	if err := c.current(ctx, "renew", g); err != nil {
		return err
	}
	r := request{op: "renew", tenant: g.Tenant, task: g.Task, mutating: true}
	err := c.do(ctx, r, func(ctx context.Context) error {
		_, err := c.client.KeepAliveOnce(ctx, clientv3.LeaseID(g.Lease))
		return err
	})
	if err != nil {
		return err
	}
	logGrant(c.lg, zap.DebugLevel, "renewed", g, false)
	return nil
}

// Release deletes g's owner key if, and only if, g is still the current
// grant: a stale release never deletes a newer owner's key. The fence stays,
// so the released epoch is refused from then on. The lease is not revoked
// (a session may hold other tasks on it).
func (c *Coordinator) Release(ctx context.Context, g Grant) error {
	err := c.release(ctx, g)
	c.metrics.outcome("release", Released, err)
	return err
}

func (c *Coordinator) release(ctx context.Context, g Grant) error {
	if err := g.Validate(); err != nil {
		return Invalid("release", "%v", err)
	}
	resp, err := c.Txn(ctx, TxnRequest{Op: "release", Tenant: g.Tenant, Task: g.Task,
		If: c.Guard(g), Then: []clientv3.Op{clientv3.OpDelete(c.keys.Owner(g.Tenant, g.Task))}, Else: c.GuardReads(g)})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return c.DescribeHolder(ctx, c.CheckGuard("release", g, resp.Responses))
	}
	logGrant(c.lg, zap.InfoLevel, "released", g, false)
	return nil
}

func firstKV(r *pb.ResponseOp) *mvccpb.KeyValue {
	if r == nil {
		return nil
	}
	rr := r.GetResponseRange()
	if rr == nil || len(rr.Kvs) == 0 {
		return nil
	}
	return rr.Kvs[0]
}

// holderOf describes the task's current owner from its fence and owner keys
// (TTL unknown).
func holderOf(tenant, task string, fence, owner *mvccpb.KeyValue) *Ownership {
	o := &Ownership{Tenant: tenant, Task: task, TTLLeft: -1}
	if fence != nil {
		o.Fence = fence.ModRevision
	}
	if owner != nil {
		o.Owner, o.Epoch, o.Lease = holderFields(owner)
	}
	return o
}

// holderFields reads owner, epoch and lease off an owner key.
func holderFields(owner *mvccpb.KeyValue) (string, int64, int64) {
	return string(owner.Value), owner.ModRevision, owner.Lease
}
