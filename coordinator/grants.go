package coordinator

import (
	"context"
	"sort"
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
