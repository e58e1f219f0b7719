package coordinator_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestEndpointsOfTwoClustersAreRefused: a client whose endpoints answer for
// two etcd clusters cannot tell a restore from a mix-up: the origin check
// is authority_unavailable, not a verdict (pinned for
// indep/origin/two-clusters-accepted).
func TestEndpointsOfTwoClustersAreRefused(t *testing.T) {
	t.Parallel()
	a, b := embedtest.NewCluster(t), embedtest.NewCluster(t)
	lgtest.Coordinator(t, a) // a keyspace on each: the realm read may go to either
	lgtest.Coordinator(t, b)
	ctx := lgtest.Ctx(t)
	mixed, err := clientv3.New(clientv3.Config{Endpoints: append(a.Endpoints(), b.Endpoints()...),
		DialTimeout: 5 * time.Second, DialOptions: coordinator.DialOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mixed.Close() })
	cm := lgtest.CoordinatorOf(t, mixed)
	_, err = cm.CheckOrigin(ctx)
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
}
