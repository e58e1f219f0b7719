package gateway_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/internal/store"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

const (
	tenant      = "tenant-a"
	otherTenant = "tenant-b"
	trustDomain = "test.example"
)

// The callers of every test: two workers of tenant-a, a worker of tenant-b,
// an approver of tenant-a, an operator of every tenant and one of tenant-b,
// and a certificate from the same CA that the server's configuration does
// not name.
var callers = []string{"worker-a", "worker-b", "worker-other", "approver", "operator", "operator-b", "stranger"}

// world is one etcd cluster, the certificates, the simulated provider and
// the identities every server of a test shares.
type world struct {
	t        testing.TB
	cl       *embedtest.Cluster
	etcd     *clientv3.Client // the test's own view of etcd
	certs    gateway.DevCerts
	provider *devprovider.Provider
	ids      []gateway.Identity
	key      []byte
	// coordOpts are the options of every replica's coordinator.
	coordOpts []coordinator.Option
	// etcdDial are dial options of every replica's etcd client.
	etcdDial []grpc.DialOption
	// clientCA, if set, is the CA file replicas verify callers against
	// instead of certs.CA.
	clientCA string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	cl := embedtest.NewCluster(t)
	certs, err := gateway.WriteDevCerts(t.TempDir(), trustDomain, callers...)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, cl: cl, etcd: cl.Client(t), certs: certs, provider: devprovider.New("db-1"),
		key: []byte("0123456789abcdef0123456789abcdef")}
	w.ids = []gateway.Identity{
		{ID: certs.IDs["worker-a"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{tenant}},
		{ID: certs.IDs["worker-b"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{tenant}},
		{ID: certs.IDs["worker-other"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{otherTenant}},
		{ID: certs.IDs["approver"], Roles: []gateway.Role{gateway.RoleApprover}, Tenants: []string{tenant}},
		{ID: certs.IDs["operator"], Roles: []gateway.Role{gateway.RoleOperator}, Tenants: []string{gateway.AllTenants}},
		{ID: certs.IDs["operator-b"], Roles: []gateway.Role{gateway.RoleOperator}, Tenants: []string{otherTenant}},
	}
	return w
}

// replica is one gateway server on loopback TLS, with its own etcd client.
type replica struct {
	ts   *httptest.Server
	etcd *clientv3.Client
	c    *coordinator.Coordinator
}

func (w *world) replica(opts ...gateway.Option) *replica {
	return w.replicaWrapped(nil, opts...)
}

// replicaWrapped is a replica whose handler wrap wraps (a fault between the
// gateway and its callers).
func (w *world) replicaWrapped(wrap func(http.Handler) http.Handler, opts ...gateway.Option) *replica {
	t := w.t
	t.Helper()
	cli := w.cl.Client(t)
	if w.etcdDial != nil {
		var err error
		if cli, err = w.cl.NewClient(w.etcdDial...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
	}
	c := lgtest.CoordinatorOf(t, cli, w.coordOpts...)
	opts = append([]gateway.Option{gateway.WithIdentities(w.ids...), gateway.WithSessionKey(w.key),
		gateway.WithAdapters(w.provider.Adapters()...),
		gateway.WithLedgerOptions(ledger.WithRecordTimeout(2*time.Second), ledger.WithPolling(20*time.Millisecond, 100*time.Millisecond, 3))}, opts...)
	srv, err := gateway.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	clientCA := w.certs.CA
	if w.clientCA != "" {
		clientCA = w.clientCA
	}
	tlsCfg, err := gateway.TLSConfig(w.certs.ServerCert, w.certs.ServerKey, clientCA)
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = true
	ts.TLS = tlsCfg
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return &replica{ts: ts, etcd: cli, c: c}
}

// tlsOf is the client TLS of caller ("" for none: no client certificate).
func (w *world) tlsOf(caller string) *tls.Config {
	t := w.t
	t.Helper()
	var cert, key string
	if caller != "" {
		cert, key = w.certs.Clients[caller].Cert, w.certs.Clients[caller].Key
	}
	cfg, err := client.TLSConfig(w.certs.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// client is caller's Go client of r.
func (w *world) client(r *replica, caller string) *client.Client {
	w.t.Helper()
	return w.clientWith(r, caller)
}

// clientWith is caller's Go client of r with opts.
func (w *world) clientWith(r *replica, caller string, opts ...client.Option) *client.Client {
	t := w.t
	t.Helper()
	c, err := client.New(r.ts.URL, w.tlsOf(caller), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// httpClient is caller's plain HTTP client (for the JSON protocol, as curl
// and a Python worker speak it).
func (w *world) httpClient(caller string) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: w.tlsOf(caller)}, Timeout: lgtest.Timeout}
}

// session opens a session of caller's on r, closed at the end of the test.
func (w *world) session(c *client.Client, ttl time.Duration, opts ...client.SessionOption) *client.Session {
	t := w.t
	t.Helper()
	s, err := c.OpenSession(lgtest.Ctx(t), ttl, opts...)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(lgtest.Ctx(t)) })
	return s
}

func claim(t *testing.T, s *client.Session, tenant, task string) coordinator.Grant {
	t.Helper()
	g, err := s.Claim(lgtest.Ctx(t), tenant, task)
	if err != nil {
		t.Fatalf("Claim %s/%s: %v", tenant, task, err)
	}
	return g
}

// rawWorker is caller's generated WorkerService client of r (Connect
// protocol), for requests the Go client would not send.
func (w *world) rawWorker(r *replica, caller string) leasegatev1connect.WorkerServiceClient {
	return leasegatev1connect.NewWorkerServiceClient(w.httpClient(caller), r.ts.URL)
}

// asRefusal is the *coordinator.Error a raw call's Refusal detail
// describes (nil for nil; outcome_unknown when there is none).
func asRefusal(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			if m, derr := d.Value(); derr == nil {
				if r, ok := m.(*leasegatev1.Refusal); ok {
					return store.NewError(coordinator.Disposition(r.GetDisposition()), r.GetOp(), "", "", r.GetDetail(), nil)
				}
			}
		}
	}
	return store.NewError(coordinator.OutcomeUnknown, "raw", "", "", "no refusal detail", err)
}
