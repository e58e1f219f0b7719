package coordinator_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestCallsAreBoundedUnderQuorumLoss: with 2 of 3 members stopped, calls
// made with context.Background() end within the coordinator's request
// timeout, as outcome_unknown (a write that was sent) or
// authority_unavailable (a read) — never blocked, never a refusal.
func TestCallsAreBoundedUnderQuorumLoss(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	cl.WaitLeader(t)
	const timeout = time.Second
	// Generous: the bound plus a loaded machine's slack, far below the
	// minutes the etcd client would otherwise keep re-sending.
	const limit = timeout + 10*time.Second
	c := lgtest.CoordinatorOf(t, lgtest.MemberClient(t, cl, 0), coordinator.WithRequestTimeout(timeout))
	s := lgtest.Session(t, c, "worker", 30*time.Second)
	g := lgtest.Claim(t, s, "t", "k")

	cl.Member(1).Stop(t)
	cl.Member(2).Stop(t)
	bg := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want coordinator.Disposition
	}{
		{"commit", func() error {
			_, err := fencedtxn.Commit(bg, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v")})
			return err
		}, coordinator.OutcomeUnknown},
		{"owner", func() error { _, err := c.Owner(bg, "t", "k"); return err }, coordinator.AuthorityUnavailable},
		{"get", func() error { _, err := fencedtxn.Get(bg, c, "t", "k"); return err }, coordinator.AuthorityUnavailable},
		{"session close", func() error { return s.Close(bg) }, coordinator.OutcomeUnknown},
	} {
		start := time.Now()
		err := tc.call()
		took := time.Since(start)
		if took > limit {
			t.Fatalf("%s took %v with no deadline of its own; the request timeout is %v", tc.name, took, timeout)
		}
		t.Logf("%s: %s after %v", tc.name, coordinator.DispositionOf(err), took.Round(10*time.Millisecond))
		lgtest.Want(t, err, tc.want)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "request timeout") {
			t.Fatalf("%s: %v; want the request timeout named as the cause", tc.name, err)
		}
	}
}

// TestRequestsEtcdNeverAccepts: too many ops, a key written twice, a
// request over the size limit are invalid_input before any I/O (shown by a
// context already cancelled, which would be authority_unavailable had the
// request been tried); etcd's own answers to them are invalid_input too.
func TestRequestsEtcdNeverAccepts(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "k")
	in := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v")}
	puts := func(n int, size int) []clientv3.Op {
		ops := make([]clientv3.Op, n)
		for i := range ops {
			ops[i] = clientv3.OpPut("/app/"+strings.Repeat("k", i+1), strings.Repeat("v", size))
		}
		return ops
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for name, ops := range map[string][]clientv3.Op{
		// Commit puts 2 keys of its own: 127 of the caller's make 129.
		"too many ops":    puts(127, 1),
		"duplicate key":   {clientv3.OpPut("/app/x", "1"), clientv3.OpPut("/app/x", "2")},
		"put and delete":  {clientv3.OpPut("/app/x", "1"), clientv3.OpDelete("/app/x")},
		"inside a delete": {clientv3.OpPut("/app/x/y", "1"), clientv3.OpDelete("/app/x/", clientv3.WithPrefix())},
		"too large":       puts(2, 800<<10),
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, c.Client(), "", coordinator.InvalidInput, func() error {
				_, err := fencedtxn.Commit(done, c, g, in, fencedtxn.WithOps(ops...))
				return err
			})
		})
	}
	// Coordinator.Txn, the path of every package built on coordinator,
	// refuses them the same way (Commit refuses range deletes itself).
	for name, r := range map[string]store.TxnRequest{
		"put inside a deleted range":       {Op: "test", Then: []clientv3.Op{clientv3.OpPut("/app/x/y", "1"), clientv3.OpDelete("/app/x/", clientv3.WithPrefix())}},
		"put inside a deleted range, else": {Op: "test", Else: []clientv3.Op{clientv3.OpDelete("/app/", clientv3.WithFromKey()), clientv3.OpPut("/app/z", "1")}},
		"too many compares":                {Op: "test", If: make([]clientv3.Cmp, 129)},
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, c.Client(), "", coordinator.InvalidInput, func() error {
				_, err := store.Of(c).Txn(done, r)
				return err
			})
		})
	}
	// 126 caller ops + 2 of Commit's own fit in etcd's default 128.
	if _, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(puts(126, 1)...)); err != nil {
		t.Fatalf("commit of 128 ops: %v", err)
	}

	// A coordinator told the cluster allows more than it does: etcd's own
	// refusals are invalid_input too, and nothing is written.
	loose := lgtest.CoordinatorOf(t, c.Client(), coordinator.WithMaxTxnOps(1000), coordinator.WithMaxRequestBytes(8<<20))
	in.Operation, in.ExpectedVersion = "op2", 1
	for name, ops := range map[string][]clientv3.Op{
		"etcd: too many ops":        puts(200, 1),
		"etcd: request too large":   puts(2, 850<<10),
		"gRPC: over its send limit": puts(3, 900<<10),
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, c.Client(), "", coordinator.InvalidInput, func() error {
				_, err := fencedtxn.Commit(ctx, loose, g, in, fencedtxn.WithOps(ops...))
				return err
			})
		})
	}
}

// TestEndpointThatIsNotEtcd: a plain HTTP/2 server answering 404 makes
// every read authority_unavailable with a detail naming the endpoint —
// never outcome_unknown; one answering 403 (a proxy refusing access) is
// permission_denied.
func TestEndpointThatIsNotEtcd(t *testing.T) {
	t.Parallel()
	ctx := lgtest.Ctx(t)
	for _, tc := range []struct {
		status int
		want   coordinator.Disposition
		detail string
	}{
		{http.StatusNotFound, coordinator.AuthorityUnavailable, " did not answer as etcd"},
		{http.StatusInternalServerError, coordinator.AuthorityUnavailable, " did not answer as etcd"},
		{http.StatusOK, coordinator.AuthorityUnavailable, " did not answer as etcd"},
		{http.StatusForbidden, coordinator.PermissionDenied, "etcd's auth refused the request"},
	} {
		ep, cli := plainHTTP2(t, tc.status)
		for name, open := range map[string]func(context.Context, *clientv3.Client, ...coordinator.Option) (*coordinator.Coordinator, error){
			"New": coordinator.New, "Open": coordinator.Open,
		} {
			_, err := open(ctx, cli)
			lgtest.Want(t, err, tc.want)
			want := tc.detail
			if tc.status != http.StatusForbidden {
				want = "endpoint " + ep + want
			}
			if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s, HTTP %d: %q; want one line saying %q", name, tc.status, err, want)
			}
		}
	}
	// A gRPC server that is not etcd answers Unimplemented.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + l.Addr().String()}, DialTimeout: 5 * time.Second,
		DialOptions: coordinator.DialOptions(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	_, err = coordinator.New(ctx, cli)
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
	if !strings.Contains(err.Error(), "did not answer as etcd") {
		t.Fatalf("a gRPC server that is not etcd: %v", err)
	}
}

// plainHTTP2 serves HTTP/2 without TLS on loopback, answering every
// request with status, and returns its endpoint and an etcd client of it.
func plainHTTP2(t *testing.T, status int) (string, *clientv3.Client) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }),
		Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	ep := "http://" + l.Addr().String()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second,
		DialOptions: coordinator.DialOptions(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return ep, cli
}

// TestZeroLeaseAndFullMarginAreInvalidInput: lease 0 is no lease (a grant
// of lease 0, RevokeLease(0), Lease(0)) and a margin as long as the TTL
// leaves no time to act: each is invalid_input, refused before any I/O,
// nothing written.
func TestZeroLeaseAndFullMarginAreInvalidInput(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "zero")
	zero := g
	zero.Lease = 0
	for name, f := range map[string]func() error{
		"renew a grant of lease 0":   func() error { return c.Renew(ctx, zero) },
		"release a grant of lease 0": func() error { return c.Release(ctx, zero) },
		"current of lease 0":         func() error { return c.Current(ctx, zero) },
		"revoke lease 0":             func() error { return c.RevokeLease(ctx, 0) },
		"show lease 0":               func() error { _, err := c.Lease(ctx, 0); return err },
		"a margin equal to the ttl": func() error {
			_, err := c.NewSession(ctx, "worker", 2*time.Second, coordinator.WithMargin(2*time.Second))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.InvalidInput, f)
		})
	}
}

// TestTxnLimitsCountWhatEtcdCounts: a put of the end key of a ranged
// delete in the same branch does not overlap it (etcd's range end is
// exclusive) and is sent; the size limit counts the Else ops too, so a Txn
// whose Else alone is over it is invalid_input before any I/O.
func TestTxnLimitsCountWhatEtcdCounts(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl, coordinator.WithMaxRequestBytes(4096))
	ctx := lgtest.Ctx(t)
	t.Run("put of a ranged delete's end key", func(t *testing.T) {
		_, err := store.Of(c).Txn(ctx, store.TxnRequest{Op: "test", Then: []clientv3.Op{
			clientv3.OpDelete("/app/a", clientv3.WithRange("/app/b")),
			clientv3.OpPut("/app/b", "kept"),
		}})
		if err != nil {
			t.Fatalf("a put of the range's end key: %v; want it sent and applied", err)
		}
		if resp, err := c.Client().Get(ctx, "/app/b"); err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("/app/b after the Txn: %v %v", resp, err)
		}
	})
	t.Run("an Else over the size limit", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, c.Client(), "/", coordinator.InvalidInput, func() error {
			_, err := store.Of(c).Txn(ctx, store.TxnRequest{Op: "test",
				If:   []clientv3.Cmp{clientv3.Compare(clientv3.Version("/app/x"), "=", 0)},
				Then: []clientv3.Op{clientv3.OpPut("/app/x", "v")},
				Else: []clientv3.Op{clientv3.OpGet("/app/" + strings.Repeat("k", 5000))}})
			return err
		})
	})
}
