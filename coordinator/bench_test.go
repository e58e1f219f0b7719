package coordinator_test

import (
	"strconv"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// Client-side hot paths of every fenced Txn: key encoding, the guard's
// compares and reads, and the classification of a refused Txn's reads.

func benchCoordinator(b *testing.B) (*coordinator.Coordinator, coordinator.Grant) {
	b.Helper()
	cl := embedtest.NewCluster(b)
	c := lgtest.Coordinator(b, cl)
	s := lgtest.Session(b, c, "worker-1", 10*time.Second)
	return c, lgtest.Claim(b, s, "tenant-a", "task-a")
}

func BenchmarkKeys(b *testing.B) {
	cl := embedtest.NewCluster(b)
	k := lgtest.Coordinator(b, cl).Keys()
	for _, bc := range []struct{ name, tenant, task string }{
		{"plain", "tenant-a", "task-a"},
		{"escaped", "tenant/a%", "task/with%escapes/"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = k.Owner(bc.tenant, bc.task)
				_ = k.Op(bc.tenant, bc.task, "promote-db-2026-11-30")
			}
		})
	}
}

func BenchmarkGuard(b *testing.B) {
	c, g := benchCoordinator(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Guard(g)
		_ = store.Of(c).GuardReads(g)
	}
}

func BenchmarkCheckGuard(b *testing.B) {
	c, g := benchCoordinator(b)
	k := c.Keys()
	kv := func(key string, value []byte, mod, lease int64) *pb.ResponseOp {
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{
			Kvs: []*mvccpb.KeyValue{{Key: []byte(key), Value: value, ModRevision: mod, Lease: lease}}}}}
	}
	fence := []byte(`{"owner":"worker-1","lease":` + strconv.FormatInt(g.Lease, 10) + `}`)
	for _, bc := range []struct {
		name string
		rs   []*pb.ResponseOp
		want coordinator.Disposition
	}{
		{"current", []*pb.ResponseOp{kv(k.Realm(), []byte(g.Realm), 1, 0), kv(k.Fence(g.Tenant, g.Task), fence, g.Epoch, 0),
			kv(k.Owner(g.Tenant, g.Task), []byte(g.Owner), g.Epoch, g.Lease)}, ""},
		{"stale_owner", []*pb.ResponseOp{kv(k.Realm(), []byte(g.Realm), 1, 0), kv(k.Fence(g.Tenant, g.Task), fence, g.Epoch+9, 0),
			kv(k.Owner(g.Tenant, g.Task), []byte("other"), g.Epoch+9, g.Lease+1)}, coordinator.StaleOwner},
		{"expired_owner", []*pb.ResponseOp{kv(k.Realm(), []byte(g.Realm), 1, 0), kv(k.Fence(g.Tenant, g.Task), fence, g.Epoch, 0),
			{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{}}}}, coordinator.ExpiredOwner},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := coordinator.DispositionOf(store.Of(c).CheckGuard("commit", g, bc.rs)); d != bc.want {
					b.Fatalf("%s, want %s", d, bc.want)
				}
			}
		})
	}
}
