package coordinator_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestRevokeOwnerLeaseRefusesAKeyspaceKeyNotAnOwners: a leasegate lease
// that also carries a key of the keyspace that is not an owner key (a
// task's state key, attached by hand) is not leasegate's alone: refused as
// invalid_input, nothing revoked, the grant still held.
func TestRevokeOwnerLeaseRefusesAKeyspaceKeyNotAnOwners(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	root := cl.Client(t)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 30*time.Second), "t", "k")
	other := c.Keys().State("t", "other")
	if _, err := root.Put(ctx, other, "rides", clientv3.WithLease(clientv3.LeaseID(g.Lease))); err != nil {
		t.Fatal(err)
	}
	_, err := c.RevokeOwnerLease(ctx, g.Lease)
	lgtest.Want(t, err, coordinator.InvalidInput)
	ttl, err := root.TimeToLive(ctx, clientv3.LeaseID(g.Lease))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL <= 0 {
		t.Fatal("the refused revoke revoked the lease")
	}
}
