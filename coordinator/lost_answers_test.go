package coordinator_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestRenewWhoseAnswerWasLostIsOutcomeUnknown: a renewal that reached etcd
// may have extended the lease; if its answer is lost it is outcome_unknown,
// not a hold (issue 13). The answers are dropped just as the keepalive
// stream opens, after Renew's currency read came back (pinned for
// indep/renew/not-mutating).
func TestRenewWhoseAnswerWasLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	var armed atomic.Bool
	dropOnKeepAlive := grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if method == "/etcdserverpb.Lease/LeaseKeepAlive" && armed.Load() {
			cp.DropAnswers()
		}
		return streamer(ctx, desc, cc, method, opts...)
	})
	cli, err := cp.NewClient(dropOnKeepAlive)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c := lgtest.CoordinatorOf(t, cli)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, lgtest.Coordinator(t, cl), "worker", 10*time.Second, coordinator.WithoutKeepAlive()), "t", "renewed")
	if err := c.Renew(ctx, g); err != nil { // through the proxy, answered
		t.Fatal(err)
	}
	armed.Store(true)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lgtest.Want(t, c.Renew(rctx, g), coordinator.OutcomeUnknown)
}
