package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// LeaseInfo is what the authority shows of one lease carrying leasegate
// owner keys: etcdctl's `lease timetolive --keys`, in tasks and owners.
type LeaseInfo struct {
	ID         int64       `json:"id"`                  // in JSON a hex string, as etcdctl prints it
	Owner      string      `json:"owner"`               // the owner label on its keys (labels comma-joined if they differ)
	GrantedTTL int64       `json:"granted_ttl_seconds"` // the TTL the lease was granted with
	TTLLeft    int64       `json:"ttl_left_seconds"`    // -1: expired, etcd has not deleted its keys yet
	Tasks      []LeaseTask `json:"tasks"`               // the tasks whose owner key is on the lease, sorted
	Revision   int64       `json:"revision"`            // the etcd revision the owner keys were read at
}

// LeaseTask is one owner key on a lease.
type LeaseTask struct {
	Tenant string `json:"tenant"`
	Task   string `json:"task"`
	Epoch  int64  `json:"epoch"`
	Stale  bool   `json:"stale"` // written before the current realm: holds nothing (see Ownership.Stale)
}

type leaseInfoJSON struct {
	plainLeaseInfo
	ID store.LeaseJSON `json:"id"`
}

type plainLeaseInfo LeaseInfo

// MarshalJSON writes the lease ID as a hex string.
func (l LeaseInfo) MarshalJSON() ([]byte, error) {
	return json.Marshal(leaseInfoJSON{plainLeaseInfo: plainLeaseInfo(l), ID: store.LeaseJSON(l.ID)})
}

// UnmarshalJSON reads a LeaseInfo whose ID is a hex string or a number.
func (l *LeaseInfo) UnmarshalJSON(b []byte) error {
	var j leaseInfoJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = LeaseInfo(j.plainLeaseInfo)
	l.ID = int64(j.ID)
	return nil
}

// Leases lists every lease that carries owner keys of this keyspace, sorted
// by ID, with the TTL etcd has left on each. It only reads.
func (c *Coordinator) Leases(ctx context.Context) ([]LeaseInfo, error) {
	byLease, rev, err := c.ownerKeysByLease(ctx, "lease list")
	if err != nil {
		return nil, err
	}
	out := make([]LeaseInfo, 0, len(byLease))
	for id, tasks := range byLease {
		li := LeaseInfo{ID: id, Revision: rev}
		li.Owner, li.Tasks = tasks.owner(), tasks.tasks
		if err := c.leaseTTL(ctx, "lease list", &li); err != nil {
			return nil, err
		}
		out = append(out, li)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Lease shows one lease: its TTLs and the tasks whose owner keys it
// carries (none, for a lease leasegate does not use). A lease etcd does not
// know — expired or revoked — is expired_owner. It only reads.
func (c *Coordinator) Lease(ctx context.Context, id int64) (LeaseInfo, error) {
	if id <= 0 {
		return LeaseInfo{}, store.NewError(InvalidInput, "lease show", "", "", fmt.Sprintf("lease %d must be positive", id), nil)
	}
	li := LeaseInfo{ID: id, Tasks: []LeaseTask{}}
	if err := c.leaseTTL(ctx, "lease show", &li); err != nil {
		return LeaseInfo{}, err
	}
	if li.TTLLeft < 0 && li.GrantedTTL == 0 {
		return LeaseInfo{}, store.NewError(ExpiredOwner, "lease show", "", "",
			fmt.Sprintf("lease %s not found: expired or revoked", FormatLeaseID(id)), nil)
	}
	byLease, rev, err := c.ownerKeysByLease(ctx, "lease show")
	if err != nil {
		return LeaseInfo{}, err
	}
	li.Revision = rev
	if t, ok := byLease[id]; ok {
		li.Owner, li.Tasks = t.owner(), t.tasks
	}
	return li, nil
}

// leaseTTL fills li's TTLs from etcd (TTLLeft -1 if the lease is gone).
func (c *Coordinator) leaseTTL(ctx context.Context, op string, li *LeaseInfo) error {
	var resp *clientv3.LeaseTimeToLiveResponse
	err := c.s.Do(ctx, store.Request{Op: op}, func(ctx context.Context) (err error) {
		resp, err = c.client.TimeToLive(ctx, clientv3.LeaseID(li.ID))
		return err
	})
	switch {
	case DispositionOf(err) == ExpiredOwner: // etcd named the lease gone
		li.GrantedTTL, li.TTLLeft = 0, -1
		return nil
	case err != nil:
		return err
	}
	li.GrantedTTL, li.TTLLeft = resp.GrantedTTL, resp.TTL
	return nil
}

// leaseTasks are the owner keys found on one lease.
type leaseTasks struct {
	owners map[string]bool
	tasks  []LeaseTask
}

func (t leaseTasks) owner() string {
	labels := make([]string, 0, len(t.owners))
	for o := range t.owners {
		labels = append(labels, o)
	}
	sort.Strings(labels)
	return strings.Join(labels, ",")
}

// ownerKeysByLease reads every owner key of the keyspace with the realm, at
// one revision, grouped by lease.
func (c *Coordinator) ownerKeysByLease(ctx context.Context, op string) (map[int64]leaseTasks, int64, error) {
	kvs, realm, rev, err := c.ownerKeys(ctx, op, "")
	if err != nil {
		return nil, 0, err
	}
	out := map[int64]leaseTasks{}
	for _, kv := range kvs {
		if kv.Lease == 0 {
			continue
		}
		_, tenant, task, ok := c.keys.ParseTask(string(kv.Key))
		if !ok {
			continue
		}
		t, ok := out[kv.Lease]
		if !ok {
			t = leaseTasks{owners: map[string]bool{}}
		}
		t.owners[string(kv.Value)] = true
		t.tasks = append(t.tasks, LeaseTask{Tenant: tenant, Task: task, Epoch: kv.ModRevision,
			Stale: realm != nil && kv.ModRevision < realm.ModRevision})
		out[kv.Lease] = t
	}
	for id, t := range out {
		sort.Slice(t.tasks, func(i, j int) bool {
			if t.tasks[i].Tenant != t.tasks[j].Tenant {
				return t.tasks[i].Tenant < t.tasks[j].Tenant
			}
			return t.tasks[i].Task < t.tasks[j].Task
		})
		out[id] = t
	}
	return out, rev, nil
}

// ownerKeys reads the owner keys of tenant (every tenant when "") and the
// realm key at one revision.
func (c *Coordinator) ownerKeys(ctx context.Context, op, tenant string) ([]*mvccpb.KeyValue, *mvccpb.KeyValue, int64, error) {
	resp, err := c.s.Txn(ctx, store.TxnRequest{Op: op, Tenant: tenant, ReadOnly: true, Then: []clientv3.Op{
		clientv3.OpGet(c.keys.TaskPrefix(KindOwner, tenant), clientv3.WithPrefix()),
		clientv3.OpGet(c.keys.Realm()),
	}})
	if err != nil {
		return nil, nil, 0, err
	}
	return resp.Responses[0].GetResponseRange().Kvs, store.FirstKV(resp.Responses[1]), resp.Header.Revision, nil
}

// RevokeLease revokes a lease, whatever it carries — a forced expiry: etcd
// deletes every key attached to it at once, so every grant on it is refused
// from then on. A lease already gone is expired_owner; a revoke whose
// answer was lost is outcome_unknown (revoke again to learn). Use it on a
// lease this program granted (a session's); an operator naming a lease by
// its ID wants RevokeOwnerLease, which cannot reach another application's
// keys.
func (c *Coordinator) RevokeLease(ctx context.Context, lease int64) error {
	if lease <= 0 {
		return store.NewError(InvalidInput, "lease revoke", "", "", fmt.Sprintf("lease %d must be positive", lease), nil)
	}
	if err := c.revoke(ctx, "lease revoke", lease); err != nil {
		return err
	}
	c.lg.Warn("lease revoked", zap.String("lease-id", FormatLeaseID(lease)))
	return nil
}

// RevokeOwnerLease is an operator's forced expiry of a leasegate lease: it
// revokes lease id only if etcd shows it carrying owner keys of this
// keyspace and no other key (but the units a gateway counts its callers'
// sessions and grants by, store.Keys.Limit, which go with the session), and returns the lease as it was read just
// before (its tasks are those the revoke vacated). A lease that carries no
// owner key of this keyspace (another application's, or one whose tasks
// were all released) or any other key is invalid_input, and nothing is
// revoked; so is one carrying keys etcd's auth does not let this user read
// (they lie outside the prefix the user's role covers). A lease etcd does
// not know is expired_owner.
//
// The check is one TimeToLive read with the attached keys, sent right
// before the revoke; etcd has no Txn that compares a lease's keys and
// revokes it, so a key attached to the lease between the two (by a client
// that knows the lease ID) is deleted with it, and is not in the returned
// tasks. leasegate itself attaches only owner keys.
func (c *Coordinator) RevokeOwnerLease(ctx context.Context, id int64) (LeaseInfo, error) {
	const op = "lease revoke"
	if id <= 0 {
		return LeaseInfo{}, store.NewError(InvalidInput, op, "", "", fmt.Sprintf("lease %d must be positive", id), nil)
	}
	li, err := c.Lease(ctx, id)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Op = op
		}
		return LeaseInfo{}, err
	}
	if err := c.checkOwnerLease(ctx, op, id); err != nil {
		return LeaseInfo{}, err
	}
	if err := c.revoke(ctx, op, id); err != nil {
		return LeaseInfo{}, err
	}
	c.lg.Warn("lease revoked", zap.String("lease-id", FormatLeaseID(id)), zap.Int("tasks", len(li.Tasks)))
	return li, nil
}

// checkOwnerLease refuses a lease that carries anything but owner keys of
// this keyspace, or none.
func (c *Coordinator) checkOwnerLease(ctx context.Context, op string, id int64) error {
	var resp *clientv3.LeaseTimeToLiveResponse
	err := c.s.Do(ctx, store.Request{Op: op}, func(ctx context.Context) (err error) {
		resp, err = c.client.TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
		return err
	})
	lease := FormatLeaseID(id)
	switch {
	case DispositionOf(err) == PermissionDenied:
		return store.NewError(InvalidInput, op, "", "", fmt.Sprintf("lease %s carries keys this user may not read, outside %s/: "+
			"it is not a leasegate lease of this keyspace; nothing revoked", lease, c.keys.Prefix()), err)
	case err != nil:
		return err
	case resp.TTL < 0 && resp.GrantedTTL == 0:
		return store.NewError(ExpiredOwner, op, "", "", fmt.Sprintf("lease %s not found: expired or revoked", lease), nil)
	}
	var foreign []string
	owners := 0
	for _, k := range resp.Keys {
		if kind, _, _, ok := c.keys.ParseTask(string(k)); ok && kind == KindOwner {
			owners++
			continue
		}
		if strings.HasPrefix(string(k), c.keys.LimitsRoot()) { // a gateway's count of the session or its grants
			continue
		}
		foreign = append(foreign, string(k))
	}
	switch {
	case len(foreign) > 0:
		sort.Strings(foreign)
		return store.NewError(InvalidInput, op, "", "", fmt.Sprintf("lease %s carries %d key(s) that are not owner keys of %s (%s): it is not a leasegate lease "+
			"of this keyspace; nothing revoked", lease, len(foreign), c.keys.Prefix(), strings.Join(firstN(foreign, 3), ", ")), nil)
	case owners == 0:
		return store.NewError(InvalidInput, op, "", "", fmt.Sprintf("lease %s carries no owner key of %s (another application's lease, or one whose tasks were all released): "+
			"nothing revoked", lease, c.keys.Prefix()), nil)
	}
	return nil
}

// firstN is at most n of keys, "…" standing for the rest.
func firstN(keys []string, n int) []string {
	if len(keys) <= n {
		return keys
	}
	return append(keys[:n:n], "…")
}
