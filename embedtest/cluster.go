package embedtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Tick settings: a 50 ms heartbeat and a 500 ms election timeout make etcd's
// minimum lease TTL ceil(1.5 × 10 ticks × 50 ms) = 1 s.
const (
	tickMs     = 50
	electionMs = 500

	startTimeout = 20 * time.Second
	startTries   = 4
)

// Option configures NewCluster.
type Option func(*config) error

type config struct {
	size       int
	tickMs     uint
	electionMs uint
	logger     *zap.Logger
	restore    restoreOptions // Restore only (restore.go)
	quotaBytes int64          // etcd's QuotaBackendBytes; 0 is etcd's default (quota.go)
	fsync      bool           // WithFsync (bench.go); default off
	secure     secureConfig   // TLS and auth (secure.go)
}

// WithSize sets the number of members (1 to 7; default 1).
func WithSize(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 7 {
			return fmt.Errorf("embedtest: cluster size %d out of range 1..7", n)
		}
		c.size = n
		return nil
	}
}

// WithTiming sets the heartbeat interval and the election timeout (default
// 50ms and 500ms), each a whole number of milliseconds, as etcd takes them.
// etcd's minimum lease TTL follows from them: 1.5 × election, rounded up to
// whole seconds.
func WithTiming(heartbeat, election time.Duration) Option {
	return func(c *config) error {
		if heartbeat < time.Millisecond || heartbeat%time.Millisecond != 0 || election%time.Millisecond != 0 {
			return fmt.Errorf("embedtest: heartbeat %v and election timeout %v must be whole milliseconds, at least 1ms", heartbeat, election)
		}
		if election < 5*heartbeat {
			return fmt.Errorf("embedtest: election timeout %v must be at least 5 heartbeats of %v", election, heartbeat)
		}
		c.tickMs, c.electionMs = uint(heartbeat/time.Millisecond), uint(election/time.Millisecond)
		return nil
	}
}

// WithLogger routes the members' logs to lg (default: discarded).
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return errors.New("embedtest: nil logger")
		}
		c.logger = lg
		return nil
	}
}

// Cluster is a set of embedded etcd members.
type Cluster struct {
	cfg     config
	members []*Member
	certs   *TLSFiles // WithTLS (secure.go)
}

// Member is one embedded etcd server of a Cluster.
type Member struct {
	name      string
	dir       string
	clientURL url.URL
	peerURL   url.URL
	initial   string
	token     string
	logger    *zap.Logger
	tickMs    uint
	election  uint
	quota     int64
	fsync     bool
	certs     *TLSFiles // WithTLS (secure.go)
	auth      bool      // WithAuth (secure.go)
	proxies             // client and peer proxies in front of the member (faults.go)

	mu   sync.Mutex
	etcd *embed.Etcd
}

// NewCluster starts a cluster and registers its teardown with t.Cleanup.
func NewCluster(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c, err := Start(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("embedtest: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Start starts a cluster with its data under dir. The caller must Close it.
// It is NewCluster for code that has no testing.TB (the drill).
func Start(dir string, opts ...Option) (*Cluster, error) {
	cfg := config{size: 1, tickMs: tickMs, electionMs: electionMs, logger: zap.NewNop()}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return retryAddrInUse(dir, func(dir string) (*Cluster, error) { return start(dir, cfg) })
}

// retryAddrInUse runs f in a fresh subdirectory of dir until it does not
// fail with "address already in use": a port picked free can be taken by
// another process before etcd binds it.
func retryAddrInUse(dir string, f func(dir string) (*Cluster, error)) (*Cluster, error) {
	var lastErr error
	for try := 0; try < startTries; try++ {
		c, err := f(fmt.Sprintf("%s/try%d", dir, try))
		if err == nil {
			return c, nil
		}
		lastErr = err
		if !isAddrInUse(err) {
			break
		}
	}
	return nil, lastErr
}

func start(dir string, cfg config) (*Cluster, error) {
	certs, err := cfg.secure.prepare(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, certs: certs}
	scheme := cfg.secure.scheme()
	token := fmt.Sprintf("embedtest-%d", time.Now().UnixNano())
	var initial []string
	for i := 0; i < cfg.size; i++ {
		cport, err := freePort()
		if err != nil {
			return nil, err
		}
		pport, err := freePort()
		if err != nil {
			return nil, err
		}
		m := &Member{
			name:      fmt.Sprintf("m%d", i),
			dir:       fmt.Sprintf("%s/m%d", dir, i),
			clientURL: url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", cport)},
			peerURL:   url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", pport)},
			token:     token,
			logger:    cfg.logger,
			tickMs:    cfg.tickMs,
			election:  cfg.electionMs,
			quota:     cfg.quotaBytes,
			fsync:     cfg.fsync,
			certs:     certs,
			auth:      cfg.secure.rootPassword != "",
		}
		c.members = append(c.members, m)
		if err := c.addProxies(m); err != nil {
			c.Close()
			return nil, err
		}
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	for _, m := range c.members {
		m.initial = strings.Join(initial, ",")
	}
	// Members of a multi-member cluster wait for each other, so start them
	// all before waiting for any to be ready.
	errc := make(chan error, len(c.members))
	for _, m := range c.members {
		go func(m *Member) { errc <- m.start(embed.ClusterStateFlagNew) }(m)
	}
	var firstErr error
	for range c.members {
		if err := <-errc; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = c.enableAuth()
	}
	if firstErr != nil {
		c.Close()
		return nil, firstErr
	}
	return c, nil
}

func (m *Member) start(state string) error {
	ec := embed.NewConfig()
	ec.Name = m.name
	ec.Dir = m.dir
	ec.TickMs = m.tickMs
	ec.ElectionMs = m.election
	ec.UnsafeNoFsync = !m.fsync
	ec.QuotaBackendBytes = m.quota
	m.applySecurity(ec)
	// Clients and peers dial the member's proxies (faults.go), which relay
	// to where it listens.
	ec.ListenClientUrls = []url.URL{m.listenClient}
	ec.AdvertiseClientUrls = []url.URL{m.clientURL}
	ec.ListenPeerUrls = []url.URL{m.listenPeer}
	ec.AdvertisePeerUrls = []url.URL{m.peerURL}
	ec.InitialCluster = m.initial
	ec.InitialClusterToken = m.token
	ec.ClusterState = state
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(m.logger.Named(m.name))
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return fmt.Errorf("start member %s: %w", m.name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("member %s failed while starting: %w", m.name, err)
	case <-time.After(startTimeout):
		e.Close()
		return fmt.Errorf("member %s not ready after %v", m.name, startTimeout)
	}
	m.mu.Lock()
	m.etcd = e
	m.id.Store(uint64(e.Server.MemberID()))
	m.mu.Unlock()
	return nil
}

// Close stops every member and its proxies. It is safe to call more than
// once.
func (c *Cluster) Close() {
	for _, m := range c.members {
		_ = m.shutdown(false)
		m.closeProxies()
	}
}

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Member returns member i (0-based).
func (c *Cluster) Member(i int) *Member { return c.members[i] }

// Endpoints lists the members' client URLs.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.clientURL.String()
	}
	return eps
}

// Client returns a client of every member, closed at the end of the test.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := c.NewClient()
	if err != nil {
		t.Fatalf("embedtest: client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// NewClient returns a client of every member (TLS and root's login on a
// secured cluster); the caller closes it.
func (c *Cluster) NewClient(opts ...grpc.DialOption) (*clientv3.Client, error) {
	user, password := c.rootCredentials()
	return c.NewClientAs(user, password, opts...)
}

// WaitLeader waits until the running members agree on a leader and returns
// its index.
func (c *Cluster) WaitLeader(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	i, err := c.Leader(ctx)
	if err != nil {
		t.Fatalf("embedtest: %v", err)
	}
	return i
}

// Leader waits until the running members agree on a leader and returns its
// index, or ctx's error.
func (c *Cluster) Leader(ctx context.Context) (int, error) { return c.LeaderAmong(ctx) }

// LeaderAmong waits until the running members among the given ones (all,
// if none is given) agree on a leader that is one of them, and returns its
// index: after a partition, the majority's side.
func (c *Cluster) LeaderAmong(ctx context.Context, members ...int) (int, error) {
	for {
		// Take every running member's leader-change notification before
		// looking, so that a change in between is not missed.
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
		for _, m := range c.among(members) {
			if e := m.server(); e != nil {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(e.Server.LeaderChangedNotify())})
			}
		}
		if i, ok := c.leader(members); ok {
			return i, nil
		}
		if chosen, _, _ := reflect.Select(cases); chosen == 0 {
			return -1, fmt.Errorf("no leader: %w", ctx.Err())
		}
	}
}

func (c *Cluster) leader(members []int) (int, bool) {
	lead := uint64(0)
	idx := -1
	for i, m := range c.among(members) {
		e := m.server()
		if e == nil {
			continue
		}
		l := e.Server.Lead()
		if l == 0 || (lead != 0 && l != lead) {
			return -1, false
		}
		lead = l
		if uint64(e.Server.MemberID()) == l {
			idx = i
		}
	}
	return idx, idx >= 0
}

// Name is the member's name.
func (m *Member) Name() string { return m.name }

// ClientURL is the member's client URL.
func (m *Member) ClientURL() string { return m.clientURL.String() }

// Running reports whether the member is started.
func (m *Member) Running() bool { return m.server() != nil }

func (m *Member) server() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd
}

// Stop stops the member gracefully (Halt); its data stays for Restart.
func (m *Member) Stop(t testing.TB) {
	t.Helper()
	if err := m.Halt(); err != nil {
		t.Fatalf("embedtest: %v", err)
	}
}

// Restart starts a stopped member again on the same addresses and data
// (Start).
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	if err := m.Start(); err != nil {
		t.Fatalf("embedtest: %v", err)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("embedtest: listener address %v is not TCP", l.Addr())
	}
	return a.Port, nil
}

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}
