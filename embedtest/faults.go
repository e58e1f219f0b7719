package embedtest

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// transferTimeout bounds a leader's hand-over before it stops.
const transferTimeout = 5 * time.Second

// proxies are a member's two proxies and where etcd really listens.
type proxies struct {
	listenClient url.URL // etcd's client listener; clients dial front
	listenPeer   url.URL // etcd's peer listener; peers dial peer
	front        *Proxy
	peer         *Proxy
	id           atomic.Uint64 // raft member ID, known once started
	cl           *Cluster
}

// addProxies puts a client and a peer proxy in front of m: the addresses
// picked for m become where etcd listens, and the proxies' addresses the
// URLs it advertises.
func (c *Cluster) addProxies(m *Member) error {
	m.cl = c
	m.listenClient, m.listenPeer = m.clientURL, m.peerURL
	front, err := NewProxy(m.listenClient.Host)
	if err != nil {
		return err
	}
	m.front = front
	peer, err := newProxy("127.0.0.1:0", m.listenPeer.Host, c.indexOf)
	if err != nil {
		return err
	}
	m.peer = peer
	m.clientURL.Host, m.peerURL.Host = front.Addr(), peer.Addr()
	return nil
}

func (m *Member) closeProxies() {
	for _, p := range []*Proxy{m.front, m.peer} {
		if p != nil {
			p.Close()
		}
	}
}

// indexOf is the index of the member with raft ID id, or -1.
func (c *Cluster) indexOf(id uint64) int {
	for i, m := range c.members {
		if m.id.Load() == id {
			return i
		}
	}
	return -1
}

// Halt stops the member gracefully and fast: a leader first hands its
// leadership to another running member (if none takes it within 5 s, say
// the leader is partitioned, it stops as leader, as etcd's own Stop does),
// then every client and peer connection is closed at once, so nothing
// waits on etcd's drain timeouts. Its data stays for Start. It fails only
// if the member is not running.
func (m *Member) Halt() error { return m.shutdown(true) }

// Kill stops the member the hard way: peers and clients lose their
// connections at once and raft stops with no leadership transfer, as when
// a process dies (a leader's followers must time out and elect). Its data
// stays for Start.
func (m *Member) Kill() error { return m.shutdown(false) }

// Start starts a stopped member again on the same addresses and data.
func (m *Member) Start() error {
	if m.Running() {
		return fmt.Errorf("member %s is running", m.name)
	}
	m.front.setDown(false)
	m.peer.setDown(false)
	err := m.start(embed.ClusterStateFlagExisting)
	for try := 1; try < startTries && isAddrInUse(err); try++ {
		// Its old port was taken while it was down: clients and peers
		// dial its proxies, so it may listen anywhere behind them.
		if err = m.moveListeners(); err == nil {
			err = m.start(embed.ClusterStateFlagExisting)
		}
	}
	if err != nil {
		m.front.setDown(true)
		m.peer.setDown(true)
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// moveListeners picks new ports for etcd to listen on behind m's proxies.
func (m *Member) moveListeners() error {
	cport, err := freePort()
	if err != nil {
		return err
	}
	pport, err := freePort()
	if err != nil {
		return err
	}
	m.listenClient.Host = fmt.Sprintf("127.0.0.1:%d", cport)
	m.listenPeer.Host = fmt.Sprintf("127.0.0.1:%d", pport)
	m.front.retarget(m.listenClient.Host)
	m.peer.retarget(m.listenPeer.Host)
	return nil
}

func (m *Member) shutdown(graceful bool) error {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e == nil {
		return fmt.Errorf("member %s is not running", m.name)
	}
	if graceful {
		if err := m.transferLeadership(e); err != nil {
			// As etcd's own Stop does: the member stops as leader, and
			// the others elect after an election timeout.
			m.logger.Warn("leadership transfer before stopping failed", zap.String("member", m.name), zap.Error(err))
		}
	}
	m.front.setDown(true)
	m.peer.setDown(true)
	if !graceful {
		e.Server.HardStop()
	}
	e.Close()
	return nil
}

// transferLeadership moves e's leadership, if it has it, to another
// running member of the cluster.
func (m *Member) transferLeadership(e *embed.Etcd) error {
	s := e.Server
	if uint64(s.MemberID()) != s.Lead() {
		return nil
	}
	var err error
	for _, o := range m.cl.members {
		if o == m || !o.Running() || o.id.Load() == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
		err = s.MoveLeader(ctx, s.Lead(), o.id.Load())
		cancel()
		if err == nil {
			return nil
		}
	}
	return err // nil if there is no one to hand over to: it stops as leader
}

// Partition cuts member i off from every other member, both ways: the
// others can still form a quorum; i cannot. Heal undoes it.
func (c *Cluster) Partition(i int) {
	for j := range c.members {
		if j != i {
			c.CutLink(i, j)
		}
	}
}

// CutLink closes the peer connections between members i and j and refuses
// new ones, both ways.
func (c *Cluster) CutLink(i, j int) { c.link(i, j, fault{cut: true}) }

// DelayLink delivers the peer traffic between members i and j d late, both
// ways.
func (c *Cluster) DelayLink(i, j int, d time.Duration) { c.link(i, j, fault{delay: d}) }

// DropLink swallows the peer traffic between members i and j, both ways,
// with the connections left open (raft messages are lost, not refused).
func (c *Cluster) DropLink(i, j int) { c.link(i, j, fault{blackhole: true}) }

// Heal clears every peer fault (partitions and links) and delivers what was
// held. Member stops and client proxies are not affected.
func (c *Cluster) Heal() {
	for _, m := range c.members {
		m.peer.set(func() { m.peer.from = map[int]fault{} })
	}
}

func (c *Cluster) link(i, j int, f fault) {
	a, b := c.members[i].peer, c.members[j].peer
	a.set(func() { a.from[j] = a.from[j].merge(f) })
	b.set(func() { b.from[i] = b.from[i].merge(f) })
}

// ClientProxy is a set of proxies, one per member, for one client: its
// faults (Cut, Stall, Blackhole, DropAnswers, Delay) hit that client alone,
// so it can lose its keepalives while its process and the cluster live.
type ClientProxy struct {
	cl      *Cluster
	proxies []*Proxy
}

// NewClientProxy starts a proxy per member; the caller closes it.
func (c *Cluster) NewClientProxy() (*ClientProxy, error) {
	cp := &ClientProxy{cl: c}
	for _, m := range c.members {
		p, err := NewProxy(m.clientURL.Host)
		if err != nil {
			cp.Close()
			return nil, err
		}
		cp.proxies = append(cp.proxies, p)
	}
	return cp, nil
}

// ClientProxy is NewClientProxy, closed at the end of the test.
func (c *Cluster) ClientProxy(t testing.TB) *ClientProxy {
	t.Helper()
	cp, err := c.NewClientProxy()
	if err != nil {
		t.Fatalf("embedtest: %v", err)
	}
	t.Cleanup(cp.Close)
	return cp
}

// Endpoints are the proxies' URLs, one per member.
func (cp *ClientProxy) Endpoints() []string {
	eps := make([]string, len(cp.proxies))
	for i, p := range cp.proxies {
		eps[i] = cp.cl.members[i].clientURL.Scheme + "://" + p.Addr()
	}
	return eps
}

// NewClient returns a client that talks to the cluster through the proxies
// only, configured as Cluster.NewClient (TLS and root's login on a secured
// cluster); the caller closes it.
func (cp *ClientProxy) NewClient(opts ...grpc.DialOption) (*clientv3.Client, error) {
	cfg, err := cp.Config(opts...)
	if err != nil {
		return nil, err
	}
	return clientv3.New(cfg)
}

// Config is the configuration NewClient makes its client from (the
// proxies' endpoints, TLS and root's login on a secured cluster), as
// coordinator.WithClientConfig wants it.
func (cp *ClientProxy) Config(opts ...grpc.DialOption) (clientv3.Config, error) {
	user, password := cp.cl.rootCredentials()
	cfg, err := cp.cl.clientConfig(user, password, opts)
	if err != nil {
		return clientv3.Config{}, err
	}
	cfg.Endpoints = cp.Endpoints()
	return cfg, nil
}

// Client is NewClient, closed at the end of the test.
func (cp *ClientProxy) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := cp.NewClient()
	if err != nil {
		t.Fatalf("embedtest: client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Member is the proxy in front of member i alone: its faults hit this
// client's path to that member only (a member hung for this client while
// the others answer it).
func (cp *ClientProxy) Member(i int) *Proxy { return cp.proxies[i] }

// Cut closes the client's connections and refuses new ones.
func (cp *ClientProxy) Cut() { cp.each((*Proxy).Cut) }

// Stall holds the client's requests and answers until Heal.
func (cp *ClientProxy) Stall() { cp.each((*Proxy).Stall) }

// StallOpen holds the requests and answers of the client's connections
// open now until Heal; connections it opens later pass (Proxy.StallOpen).
func (cp *ClientProxy) StallOpen() { cp.each((*Proxy).StallOpen) }

// Blackhole swallows the client's requests and answers; connections stay.
func (cp *ClientProxy) Blackhole() { cp.each((*Proxy).Blackhole) }

// DropAnswers delivers the client's requests and swallows the answers.
func (cp *ClientProxy) DropAnswers() { cp.each((*Proxy).DropAnswers) }

// Delay delivers the client's traffic d late.
func (cp *ClientProxy) Delay(d time.Duration) {
	cp.each(func(p *Proxy) { p.Delay(d) })
}

// Heal clears the client's faults and delivers what a stall held.
func (cp *ClientProxy) Heal() { cp.each((*Proxy).Heal) }

// Close closes the proxies and the connections through them.
func (cp *ClientProxy) Close() { cp.each((*Proxy).Close) }

func (cp *ClientProxy) each(f func(*Proxy)) {
	for _, p := range cp.proxies {
		f(p)
	}
}

// among maps member indexes to members (every member if none is given),
// keyed by index.
func (c *Cluster) among(members []int) map[int]*Member {
	out := map[int]*Member{}
	if len(members) == 0 {
		for i, m := range c.members {
			out[i] = m
		}
	}
	for _, i := range members {
		out[i] = c.members[i]
	}
	return out
}
