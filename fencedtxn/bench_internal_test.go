package fencedtxn

import (
	"strconv"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// The client-side hot paths of a commit, without the round trip to etcd
// (`leasegate bench` measures that): digest, Txn building, classification
// of the answer.

var benchIntent = Intent{Tenant: "tenant-a", Task: "task/with%escapes", Operation: "promote-db-2026-11-30",
	Value: []byte("replica-b"), ExpectedVersion: 41}

func benchSetup(b *testing.B) (*coordinator.Coordinator, coordinator.Grant) {
	b.Helper()
	cl := embedtest.NewCluster(b)
	c := lgtest.Coordinator(b, cl)
	s := lgtest.Session(b, c, "worker-1", 10*time.Second)
	return c, lgtest.Claim(b, s, benchIntent.Tenant, benchIntent.Task)
}

func BenchmarkDigest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = Digest(benchIntent)
	}
}

func BenchmarkPrepare(b *testing.B) {
	c, g := benchSetup(b)
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = prepare(c, g, benchIntent, nil)
	}
}

func BenchmarkClassify(b *testing.B) {
	c, g := benchSetup(b)
	_, receipt, digest := prepare(c, g, benchIntent, nil)
	k := c.Keys()
	kv := func(key string, value []byte, mod, lease int64) *pb.ResponseOp {
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{
			Kvs: []*mvccpb.KeyValue{{Key: []byte(key), Value: value, ModRevision: mod, Lease: lease, Version: 1}}}}}
	}
	fence := []byte(`{"owner":"worker-1","lease":` + strconv.FormatInt(g.Lease, 10) + `}`)
	refused := &clientv3.TxnResponse{Header: &pb.ResponseHeader{Revision: g.Epoch + 5}, Responses: []*pb.ResponseOp{
		kv(k.Realm(), []byte(g.Realm), 1, 0),
		kv(k.Fence(g.Tenant, g.Task), fence, g.Epoch, 0),
		kv(k.Owner(g.Tenant, g.Task), []byte(g.Owner), g.Epoch, g.Lease),
		{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{}}},
		kv(k.State(g.Tenant, g.Task), []byte("{}"), g.Epoch+3, 0),
	}}
	committed := &clientv3.TxnResponse{Header: &pb.ResponseHeader{Revision: g.Epoch + 5}, Succeeded: true}
	b.Run("committed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := commitAnswer(c, g, benchIntent, receipt, digest, committed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("version_conflict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := commitAnswer(c, g, benchIntent, receipt, digest, refused); coordinator.DispositionOf(err) != coordinator.VersionConflict {
				b.Fatal(err)
			}
		}
	})
}
