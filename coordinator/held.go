package coordinator

import (
	"context"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Grants reads from etcd the grants this session holds: every owner key of
// the current realm on the session's lease with its owner label. It covers
// a claim whose answer was lost and never retried: the task is held all the
// same, and shows here. Sorted by tenant and task. It only reads.
func (s *Session) Grants(ctx context.Context) ([]Grant, error) {
	kvs, realm, _, err := s.c.ownerKeys(ctx, "grants", "")
	if err != nil {
		return nil, err
	}
	out := []Grant{}
	if realm == nil {
		return out, nil
	}
	for _, kv := range kvs {
		if kv.Lease != int64(s.lease) || string(kv.Value) != s.owner || kv.ModRevision < realm.ModRevision {
			continue
		}
		_, tenant, task, ok := s.c.keys.ParseTask(string(kv.Key))
		if !ok {
			continue
		}
		out = append(out, Grant{Realm: string(realm.Value), Tenant: tenant, Task: task, Owner: s.owner,
			Epoch: kv.ModRevision, Lease: int64(s.lease)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Task < out[j].Task
	})
	return out, nil
}

// ReleaseTask lets go of a task by name: it deletes the task's owner key if,
// and only if, it is on this session's lease with its owner label, in one
// Txn comparing both — whatever its epoch, so a claim whose answer was lost
// can be released without its grant. The fence stays. A task whose owner
// key is gone is expired_owner; one held by another lease or owner is
// stale_owner, and nothing is deleted.
func (s *Session) ReleaseTask(ctx context.Context, tenant, task string) error {
	if err := CheckTask(tenant, task); err != nil {
		return Invalid("release", "%v", err)
	}
	owner := s.c.keys.Owner(tenant, task)
	resp, err := s.c.Txn(ctx, TxnRequest{Op: "release", Tenant: tenant, Task: task,
		If: []clientv3.Cmp{
			clientv3.Compare(clientv3.LeaseValue(owner), "=", s.lease),
			clientv3.Compare(clientv3.Value(owner), "=", s.owner),
		},
		Then: []clientv3.Op{clientv3.OpDelete(owner)},
		Else: []clientv3.Op{clientv3.OpGet(owner)},
	})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		held := firstKV(resp.Responses[0])
		if held == nil {
			return newError(ExpiredOwner, "release", tenant, task, "the session holds no owner key for this task", nil)
		}
		e := newError(StaleOwner, "release", tenant, task,
			fmt.Sprintf("the owner key is %q on lease %s, not this session's", held.Value, FormatLeaseID(held.Lease)), nil)
		e.Holder = holderOf(tenant, task, nil, held)
		return e
	}
	s.lg.Info("released", zap.String("tenant", tenant), zap.String("task", task))
	return nil
}
