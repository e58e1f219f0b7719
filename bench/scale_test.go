package bench_test

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/bench"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// logins watches etcd logins (Auth/Authenticate) on connections other than
// the balanced connections of the clients Dial made: the logins of clients
// made from the configuration for one member alone.
type logins struct {
	mu       sync.Mutex
	balanced map[*grpc.ClientConn]bool
	armed    bool
	own      chan struct{} // closed at the first such login once armed
}

func (l *logins) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.Auth/Authenticate" {
		l.mu.Lock()
		if l.armed && !l.balanced[cc] && !isClosed(l.own) {
			close(l.own)
		}
		l.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestScaleSessionLogsInOnEachMember: bench scale on a three-member cluster
// with auth, reached by the caller's clients (Etcd.Dial, Etcd.ClientConfig).
// Once the session holds its grant every member hangs for those clients
// until its keepalive, unable to renew through its client's connection,
// asks the members one by one: each of those attempts logs in on a
// connection of its own to its member (coordinator.WithClientConfig), not
// through the client's balanced connection, which may lead to the member
// that hung. Healed then, the run finishes: the session was not lost.
func TestScaleSessionLogsInOnEachMember(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3), embedtest.WithAuth("root-pw"))
	cl.WaitLeader(t)
	cp := cl.ClientProxy(t)
	l := &logins{balanced: map[*grpc.ClientConn]bool{}, own: make(chan struct{})}
	cfg, err := cp.Config(grpc.WithChainUnaryInterceptor(l.intercept))
	if err != nil {
		t.Fatal(err)
	}
	dial := func() (*clientv3.Client, error) {
		cli, err := clientv3.New(cfg)
		if err == nil {
			l.mu.Lock()
			l.balanced[cli.ActiveConnection()] = true
			l.mu.Unlock()
		}
		return cli, err
	}
	const ttl = 3 * time.Second
	progress := func(p bench.Progress) {
		if p.Done != 1 { // 1: the grant is claimed, the session alive
			return
		}
		l.mu.Lock()
		l.armed = true
		l.mu.Unlock()
		cp.Stall()
		defer cp.Heal()
		select {
		case <-l.own:
		case <-time.After(2 * ttl):
			t.Errorf("no login on a member's own connection within %v of every member hanging: the keepalive logged in through the client's balanced connection", 2*ttl)
		}
	}
	rep, err := bench.Scale(lgtest.Ctx(t), bench.ScaleConfig{Etcd: bench.Etcd{Dial: dial, ClientConfig: &cfg, Label: "three members, auth"},
		Sizes: []int{1}, Workers: 1, Commits: 3, TTL: ttl, PerLock: -1, Progress: progress})
	if err != nil {
		t.Fatalf("bench scale: %v", err)
	}
	// The session lived through the hang: its commits after it were made
	// (a lost session's are expired_owner, and Scale fails). Its renewal's
	// count is not checked: the fan-out's answer may be counted after the
	// report is read (seen under -race, with the run's three commits done
	// in the 0.1 s after the heal).
	if len(rep.Sizes) != 1 || rep.Sizes[0].Grants != 1 {
		t.Fatalf("report %+v: want the one size run", rep.Sizes)
	}
}

// TestScaleSmoke: tiny sizes; every grant claimed, every owner key seen
// gone after the session's death, every per-lock key after its lease's.
func TestScaleSmoke(t *testing.T) {
	t.Parallel()
	sizes := []int{20, 50}
	rep, err := bench.Scale(lgtest.Ctx(t), bench.ScaleConfig{Etcd: bench.Etcd{Dir: t.TempDir(), NoFsync: true},
		Sizes: sizes, Workers: 4, Commits: 5, TTL: time.Second, PerLock: 30, PerLockTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != len(sizes) {
		t.Fatalf("sizes %+v", rep.Sizes)
	}
	for i, sz := range rep.Sizes {
		if sz.Grants != sizes[i] || sz.Leases != 1 || sz.ClaimsPerSec <= 0 || sz.CommitP50Ms <= 0 || sz.CommitP99Ms < sz.CommitP50Ms ||
			sz.Expiry.Keys != sizes[i] || sz.Expiry.Leases != 1 || sz.Expiry.LagMaxMs < sz.Expiry.LagP50Ms {
			t.Errorf("size %+v", sz)
		}
	}
	if pl := rep.PerLock; pl == nil || pl.Keys != 30 || pl.Leases != 30 || pl.LagMaxMs < pl.LagP50Ms {
		t.Errorf("per-lock %+v", rep.PerLock)
	}
}
