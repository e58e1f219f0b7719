package coordinator_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestSessionDeadlineCountsFromTheSend: with every byte between the
// session's client and etcd delivered late, a renewal's answer arrives at
// least a round trip after its request left. The local deadline counts
// from the send: counted from the answer, a slow answer would push it past
// the expiry etcd counts from when it received the request.
func TestSessionDeadlineCountsFromTheSend(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	lg, logs := lgtest.Observed()
	c := lgtest.CoordinatorOf(t, cp.Client(t), coordinator.WithLogger(lg))
	const ttl, delay = 6 * time.Second, 150 * time.Millisecond
	margin := ttl / 10 // the default: TestDefaultMarginIsATenthOfTheTTL
	cp.Delay(delay)    // both ways: a round trip takes at least 2*delay
	s := lgtest.Session(t, c, "worker", ttl)
	logs.WaitFor(t, "the first renewal (its new deadline)", func(e observer.LoggedEntry) bool {
		_, ok := e.ContextMap()["deadline"]
		return ok
	})
	answered := time.Now() // at or after the answer; the request left 2*delay or more before it
	if latest := answered.Add(-2 * delay).Add(ttl - margin); s.Deadline().After(latest) {
		t.Fatalf("deadline %v is %v after the latest a send-time deadline can be (%v): counted from the answer",
			s.Deadline(), s.Deadline().Sub(latest), latest)
	}
	cp.Heal()
}

// TestDefaultMarginIsATenthOfTheTTL: the default margin is the larger of a
// tenth of the TTL and the minimum (100 ms), never the smaller: a 10 s
// session's first deadline is 9 s after its grant was sent.
func TestDefaultMarginIsATenthOfTheTTL(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	const ttl = 10 * time.Second
	before := time.Now()
	s := lgtest.Session(t, c, "worker", ttl, coordinator.WithoutKeepAlive())
	after := time.Now()
	if d := s.Deadline(); d.Before(before.Add(ttl-ttl/10)) || d.After(after.Add(ttl-ttl/10)) {
		t.Fatalf("deadline %v after the send; want TTL minus a tenth of it (%v)", d.Sub(before), ttl-ttl/10)
	}
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
