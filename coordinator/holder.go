package coordinator

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

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
