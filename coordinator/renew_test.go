package coordinator_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestRenewWhoseAnswerWasLostIsOutcomeUnknown: a renewal that reached etcd
// may have extended the lease; if its answer is lost it is outcome_unknown,
// not a hold. The answers are dropped just as the keepalive
// stream opens, after Renew's currency read came back.
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

// TestRenewWithItsAnswerLostIsOutcomeUnknown: Renew's keepalive reached
// etcd (the lease was renewed) and its answer was lost: that is
// outcome_unknown, not a hold — the renewal may have applied.
func TestRenewWithItsAnswerLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	lost := &lostKeepAliveAnswer{}
	cli, err := cl.NewClient(grpc.WithChainStreamInterceptor(lost.intercept))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c := lgtest.CoordinatorOf(t, cli)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second, coordinator.WithoutKeepAlive()), "t", "k")
	lost.armed.Store(true)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lgtest.Want(t, c.Renew(short, g), coordinator.OutcomeUnknown)
	lost.armed.Store(false)
	if err := c.Renew(ctx, g); err != nil {
		t.Fatalf("renew once answers come back: %v", err)
	}
}

// lostKeepAliveAnswer is a stream interceptor: while armed, a
// LeaseKeepAlive's answer is received from etcd and then replaced by an
// Unavailable error, as a connection cut after the request left.
type lostKeepAliveAnswer struct{ armed atomic.Bool }

func (l *lostKeepAliveAnswer) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" || !l.armed.Load() {
		return cs, err
	}
	return lostAnswerStream{cs}, nil
}

type lostAnswerStream struct{ grpc.ClientStream }

func (s lostAnswerStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "transport is closing (answer dropped by the test)")
}
