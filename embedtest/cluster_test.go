package embedtest_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, lgtest.LeakOptions()...)
}

func TestClusterStopRestartKeepsData(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	lead := cl.WaitLeader(t)
	cli := cl.Client(t)
	ctx := lgtest.Ctx(t)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// Stop the leader: the others elect a new one and keep serving.
	cl.Member(lead).Stop(t)
	if cl.Member(lead).Running() {
		t.Fatal("stopped member still running")
	}
	if next := cl.WaitLeader(t); next == lead {
		t.Fatalf("leader %d did not change", lead)
	}
	if _, err := cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatal(err)
	}
	cl.Member(lead).Restart(t)
	cl.WaitLeader(t)
	// The restarted member caught up: read from it alone, linearizably.
	one, err := clientOf(cl.Member(lead).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	resp, err := one.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
		t.Fatalf("read from restarted member: %+v %v", resp, err)
	}
}

func TestMinimumLeaseTTLIsOneSecond(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	resp, err := cl.Client(t).Grant(lgtest.Ctx(t), 1)
	if err != nil || resp.TTL != 1 {
		t.Fatalf("grant of 1s: %+v %v", resp, err)
	}
}

func TestParallelClustersDoNotCollide(t *testing.T) {
	t.Parallel()
	a, b := embedtest.NewCluster(t), embedtest.NewCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Client(t).Put(ctx, "only-in-a", "x"); err != nil {
		t.Fatal(err)
	}
	resp, err := b.Client(t).Get(ctx, "only-in-a")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("clusters share data: %+v %v", resp, err)
	}
	if a.Endpoints()[0] == b.Endpoints()[0] {
		t.Fatal("two clusters on one endpoint")
	}
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]embedtest.Option{
		"size 0":                  embedtest.WithSize(0),
		"size 8":                  embedtest.WithSize(8),
		"election under 5 ticks":  embedtest.WithTiming(100*time.Millisecond, 200*time.Millisecond),
		"fractional milliseconds": embedtest.WithTiming(1500*time.Microsecond, time.Second),
		"nil logger":              embedtest.WithLogger(nil),
		"restore as nil member":   embedtest.WithRestoreAs(nil),
	} {
		if _, err := embedtest.Start(t.TempDir(), opt); err == nil {
			t.Fatalf("bad option accepted: %s", name)
		}
	}
}

func clientOf(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}
