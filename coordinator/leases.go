package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	ID leaseJSON `json:"id"`
}

type plainLeaseInfo LeaseInfo

// MarshalJSON writes the lease ID as a hex string.
func (l LeaseInfo) MarshalJSON() ([]byte, error) {
	return json.Marshal(leaseInfoJSON{plainLeaseInfo: plainLeaseInfo(l), ID: leaseJSON(l.ID)})
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
		return LeaseInfo{}, Invalid("lease show", "lease %d must be positive", id)
	}
	li := LeaseInfo{ID: id, Tasks: []LeaseTask{}}
	if err := c.leaseTTL(ctx, "lease show", &li); err != nil {
		return LeaseInfo{}, err
	}
	if li.TTLLeft < 0 && li.GrantedTTL == 0 {
		return LeaseInfo{}, newError(ExpiredOwner, "lease show", "", "",
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
	err := c.do(ctx, request{op: op}, func(ctx context.Context) (err error) {
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
	resp, err := c.Txn(ctx, TxnRequest{Op: op, Tenant: tenant, ReadOnly: true, Then: []clientv3.Op{
		clientv3.OpGet(c.keys.TaskPrefix("owner", tenant), clientv3.WithPrefix()),
		clientv3.OpGet(c.keys.Realm()),
	}})
	if err != nil {
		return nil, nil, 0, err
	}
	return resp.Responses[0].GetResponseRange().Kvs, firstKV(resp.Responses[1]), resp.Header.Revision, nil
}
