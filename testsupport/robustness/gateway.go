package robustness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/gateway"
)

// trustDomain is the SPIFFE trust domain of the gateway workers'
// certificates: worker gN is spiffe://robustness.test/gN.
const trustDomain = "robustness.test"

// Gateways are replicas of the gateway (gateway.Server over loopback mTLS,
// a real net/http server each) on one cluster and one keyspace, and the
// hops of the workers that go through them.
//
// Each replica's etcd client goes through its own embedtest.ClientProxy,
// as every in-process worker's does, so the nemesis's client faults can
// hit the gateway's path to etcd. Each worker reaches the gateways through
// its own embedtest.Proxy (its hop): the faults of the worker↔gateway
// network are set there. A hop relays to one replica at a time, like a TCP
// load balancer that passes TLS through (docs/gateway.md, Deployment):
// when a replica is killed its hops move to a live one, and move back when
// it is restarted.
type Gateways struct {
	cluster *embedtest.Cluster
	prefix  string
	dir     string
	certs   gateway.DevCerts
	key     []byte
	ids     []gateway.Identity

	mu       sync.Mutex
	replicas []*Replica
	hops     []hop
	lose     map[string]chan struct{} // worker name -> closed when its next commit's answer was lost
	served   map[[2]int]int           // (replica, worker) -> calls served
}

// hop is one worker's proxy and the replica it belongs to when that is up.
type hop struct {
	p    *embedtest.Proxy
	home int
}

// Replica is one gateway server.
type Replica struct {
	index int
	etcd  *embedtest.ClientProxy // its etcd client's path, kept across restarts

	// while up:
	cli  *clientv3.Client
	srv  *http.Server
	addr string
	done chan struct{} // ServeTLS returned
}

// EtcdProxy is the proxy set in front of the replica's etcd client.
func (r *Replica) EtcdProxy() *embedtest.ClientProxy { return r.etcd }

// NewGateways starts replicas replicas on prefix's keyspace of cl, with
// client certificates for workers workers (g0, g1, …, each a worker of
// tenant). The caller must Close it.
func NewGateways(ctx context.Context, cl *embedtest.Cluster, prefix, tenant string, replicas, workers int) (*Gateways, error) {
	if replicas < 1 {
		return nil, fmt.Errorf("robustness: %d gateway replicas", replicas)
	}
	dir, err := os.MkdirTemp("", "robustness-gateway-")
	if err != nil {
		return nil, err
	}
	g := &Gateways{cluster: cl, prefix: prefix, dir: dir, key: []byte("robustness-session-key-0123456789"), lose: map[string]chan struct{}{}, served: map[[2]int]int{}}
	names := make([]string, workers)
	for i := range names {
		names[i] = workerName(i)
	}
	if g.certs, err = gateway.WriteDevCerts(dir, trustDomain, names...); err != nil {
		g.Close()
		return nil, err
	}
	for _, n := range names {
		g.ids = append(g.ids, gateway.Identity{ID: g.certs.IDs[n], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{tenant}})
	}
	for i := 0; i < replicas; i++ {
		cp, err := cl.NewClientProxy()
		if err != nil {
			g.Close()
			return nil, err
		}
		r := &Replica{index: i, etcd: cp}
		g.replicas = append(g.replicas, r)
		if err := g.start(ctx, r); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

func workerName(i int) string { return fmt.Sprintf("g%d", i) }

// Replicas is the number of replicas, up or not.
func (g *Gateways) Replicas() int { return len(g.replicas) }

// Replica is replica i.
func (g *Gateways) Replica(i int) *Replica { return g.replicas[i] }

// start serves replica r on a fresh loopback port: a new etcd client
// through r's proxies, a coordinator and a gateway.Server on it, as
// leasegate serve builds them.
func (g *Gateways) start(ctx context.Context, r *Replica) error {
	cfg, err := r.etcd.Config()
	if err != nil {
		return err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	c, err := coordinator.New(ctx, cli, coordinator.WithPrefix(g.prefix), coordinator.WithClientConfig(cfg))
	if err != nil {
		_ = cli.Close()
		return fmt.Errorf("gateway replica %d: %w", r.index, err)
	}
	srv, err := gateway.New(c, gateway.WithIdentities(g.ids...), gateway.WithSessionKey(g.key))
	if err != nil {
		_ = cli.Close()
		return err
	}
	tlsCfg, err := gateway.TLSConfig(g.certs.ServerCert, g.certs.ServerKey, g.certs.CA)
	if err != nil {
		_ = cli.Close()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = cli.Close()
		return err
	}
	hs := &http.Server{Handler: g.edge(r.index, srv.Handler()), TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.ServeTLS(ln, "", "")
	}()
	g.mu.Lock()
	r.cli, r.srv, r.addr, r.done = cli, hs, ln.Addr().String(), done
	for _, h := range g.hops {
		if h.home == r.index {
			h.p.Retarget(r.addr)
		}
	}
	g.mu.Unlock()
	return nil
}

// commitPath is the Commit procedure's path.
var commitPath = "/" + leasegatev1connect.WorkerServiceName + "/Commit"

// LoseNextCommitAnswer arms a loss on worker i's hop: the gateway serves
// the worker's next commit in full (it applies, or is refused, in etcd),
// and its answer is then lost on the way back — the HTTP/2 stream is reset
// instead of answered, so the worker learns only that its request left.
// The returned channel closes once that has happened; disarm cancels it if
// it has not.
func (g *Gateways) LoseNextCommitAnswer(i int) (lost <-chan struct{}, disarm func()) {
	name := workerName(i)
	ch := make(chan struct{})
	g.mu.Lock()
	g.lose[name] = ch
	g.mu.Unlock()
	return ch, func() {
		g.mu.Lock()
		if g.lose[name] == ch {
			delete(g.lose, name)
		}
		g.mu.Unlock()
	}
}

// edge is what stands between replica's handler and its callers' hops:
// it counts the calls each worker made there, and loses the answers
// LoseNextCommitAnswer armed.
func (g *Gateways) edge(replica int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lost chan struct{}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			name := r.TLS.PeerCertificates[0].Subject.CommonName
			var worker int
			_, _ = fmt.Sscanf(name, "g%d", &worker)
			g.mu.Lock()
			g.served[[2]int{replica, worker}]++
			if r.URL.Path == commitPath {
				lost = g.lose[name]
				delete(g.lose, name)
			}
			g.mu.Unlock()
		}
		if lost == nil {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&unanswered{header: http.Header{}}, r) // served in full; its answer goes nowhere
		close(lost)
		panic(http.ErrAbortHandler) // the stream is reset: the caller gets no answer
	})
}

// unanswered is a response writer whose answer is lost.
type unanswered struct{ header http.Header }

func (u *unanswered) Header() http.Header         { return u.header }
func (u *unanswered) Write(b []byte) (int, error) { return len(b), nil }
func (u *unanswered) WriteHeader(int)             {}

// Kill stops replica i at once, as a crash would: its listener and every
// connection to it close, its etcd client closes (so nothing it still
// does reaches etcd), and its hops move to another replica that is up.
// Handlers under way at that moment run on with a closed client, their
// callers cut off.
func (g *Gateways) Kill(i int) error {
	g.mu.Lock()
	r := g.replicas[i]
	if r.srv == nil {
		g.mu.Unlock()
		return fmt.Errorf("robustness: gateway replica %d is not up", i)
	}
	srv, cli, done, addr := r.srv, r.cli, r.done, r.addr
	r.srv, r.cli, r.addr, r.done = nil, nil, "", nil
	g.mu.Unlock()
	err := srv.Close()
	<-done
	_ = cli.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	if up := g.upLocked(); up != nil {
		for _, h := range g.hops {
			if h.p.Target() == addr {
				h.p.Retarget(up.addr)
			}
		}
	}
	return err
}

// Restart starts replica i again (on a new port) and moves its hops back.
func (g *Gateways) Restart(ctx context.Context, i int) error {
	return g.start(ctx, g.replicas[i])
}

// FailedOver counts the calls workers made on a replica other than their
// home one (while it was down).
func (g *Gateways) FailedOver() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for k, calls := range g.served {
		if k[0] != k[1]%len(g.replicas) {
			n += calls
		}
	}
	return n
}

// ReplicaOf is the replica hop p relays to now (its home if none is up).
func (g *Gateways) ReplicaOf(p *embedtest.Proxy) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	target := p.Target()
	for _, r := range g.replicas {
		if r.addr != "" && r.addr == target {
			return r.index
		}
	}
	for _, h := range g.hops {
		if h.p == p {
			return h.home
		}
	}
	return 0
}

func (g *Gateways) upLocked() *Replica {
	for _, r := range g.replicas {
		if r.srv != nil {
			return r
		}
	}
	return nil
}

// Hop starts worker i's proxy to the gateways, homed on replica
// i mod Replicas.
func (g *Gateways) Hop(i int) (*embedtest.Proxy, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	home := i % len(g.replicas)
	target := g.replicas[home].addr
	if target == "" {
		up := g.upLocked()
		if up == nil {
			return nil, errors.New("robustness: no gateway replica is up")
		}
		target = up.addr
	}
	p, err := embedtest.NewProxy(target)
	if err != nil {
		return nil, err
	}
	g.hops = append(g.hops, hop{p: p, home: home})
	return p, nil
}

// Client is worker i's gateway client through its hop p.
func (g *Gateways) Client(i int, p *embedtest.Proxy) (*client.Client, error) {
	f := g.certs.Clients[workerName(i)]
	tlsCfg, err := client.TLSConfig(g.certs.CA, f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	return client.New("https://"+p.Addr(), tlsCfg)
}

// Close stops every replica and hop, and removes the certificates.
func (g *Gateways) Close() {
	for i, r := range g.replicas {
		if r.srv != nil {
			_ = g.Kill(i)
		}
	}
	for _, r := range g.replicas {
		r.etcd.Close()
	}
	for _, h := range g.hops {
		h.p.Close()
	}
	_ = os.RemoveAll(g.dir)
}
