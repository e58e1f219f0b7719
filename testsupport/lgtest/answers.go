package lgtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/embedtest"
)

// TxnAnswers is a gRPC client interceptor for the answers of Txns: every
// Txn reaches etcd and applies, and while armed its answer is replaced by
// Err — once (Once: the next Txn only) or for every Txn until disarmed —
// as a cut connection or a deadline after send would leave it.
type TxnAnswers struct {
	Err      error
	Once     bool
	armed    atomic.Bool
	once     sync.Once // makes replaced
	fired    sync.Once // closes it
	replaced chan struct{}
}

// Replaced is closed when the first answer has been replaced.
func (a *TxnAnswers) Replaced() <-chan struct{} {
	a.once.Do(func() { a.replaced = make(chan struct{}) })
	return a.replaced
}

// Arm starts replacing answers; Disarm stops.
func (a *TxnAnswers) Arm()    { a.armed.Store(true) }
func (a *TxnAnswers) Disarm() { a.armed.Store(false) }

// Intercept is the grpc.UnaryClientInterceptor.
func (a *TxnAnswers) Intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if method != "/etcdserverpb.KV/Txn" {
		return err
	}
	if (a.Once && a.armed.CompareAndSwap(true, false)) || (!a.Once && a.armed.Load()) {
		a.Replaced()
		a.fired.Do(func() { close(a.replaced) })
		return a.Err
	}
	return err
}

// ClientWith is a client of every member of cl with the interceptor a,
// closed at the end of the test.
func ClientWith(t testing.TB, cl *embedtest.Cluster, a *TxnAnswers) *clientv3.Client {
	t.Helper()
	cli, err := cl.NewClient(grpc.WithChainUnaryInterceptor(a.Intercept))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
