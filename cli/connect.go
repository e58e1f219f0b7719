package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/connectivity"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// globals are the global flags of one invocation, checked once (setup) and
// carried to the commands in the context.
type globals struct {
	endpoints      []string
	prefix         string
	dialTimeout    time.Duration
	commandTimeout time.Duration
	tls            *tls.Config
	tlsFiles       transport.TLSInfo // the files tls was made from (--cacert, --cert, --key)
	user, password string
	out            printer
	lg             *zap.Logger
	etcdLog        *zap.Logger // the etcd client's own logger (etcdClientLogger)
	gateway        string      // --gateway: act through leasegate serve (gateway.go)
}

type globalsKey struct{}

// setup is the app's Before: it checks the global flags, before any I/O,
// and puts them in the context of every command.
func setup(c *cli.Context) error {
	g, err := parseGlobals(c)
	if err != nil {
		return err
	}
	c.Context = context.WithValue(c.Context, globalsKey{}, g)
	return nil
}

func parseGlobals(c *cli.Context) (*globals, error) {
	bad := func(format string, args ...any) (*globals, error) {
		return nil, store.NewError(store.InvalidInput, "leasegate", "", "", fmt.Sprintf(format, args...), nil)
	}
	g := &globals{
		prefix:         c.String("prefix"),
		dialTimeout:    c.Duration("dial-timeout"),
		commandTimeout: c.Duration("command-timeout"),
	}
	for _, e := range c.StringSlice("endpoints") {
		if e = strings.TrimSpace(e); e != "" {
			g.endpoints = append(g.endpoints, e)
		}
	}
	if len(g.endpoints) == 0 {
		return bad("--endpoints is empty")
	}
	for _, e := range g.endpoints {
		if err := checkEndpoint(e); err != nil {
			return bad("--endpoints: %v", err)
		}
	}
	if g.dialTimeout <= 0 || g.commandTimeout <= 0 {
		return bad("--dial-timeout %v and --command-timeout %v must be positive", g.dialTimeout, g.commandTimeout)
	}
	out, err := newPrinter(c.App.Writer, c.String("output"))
	if err != nil {
		return bad("%v", err)
	}
	g.out = out
	level, err := zapcore.ParseLevel(c.String("log-level"))
	if err != nil {
		return bad("--log-level %q: use debug, info, warn or error", c.String("log-level"))
	}
	g.lg = newLogger(c.App.ErrWriter, level)
	g.etcdLog = etcdClientLogger(g.lg, level)

	if g.gateway = c.String("gateway"); g.gateway != "" && !strings.HasPrefix(g.gateway, "https://") {
		return bad("--gateway %q: the gateway's URL is https://host:port", g.gateway)
	}
	g.user, g.password = c.String("user"), c.String("password")
	if name, pw, ok := strings.Cut(g.user, ":"); ok && g.password == "" {
		g.user, g.password = name, pw
	}
	switch {
	case g.user == "" && g.password != "":
		return bad("--password given without --user")
	case g.user != "" && g.password == "":
		return bad("--user %q needs a password: --password, LEASEGATE_PASSWORD or --user name:password", g.user)
	}

	ca, cert, key := c.String("cacert"), c.String("cert"), c.String("key")
	if (cert == "") != (key == "") {
		return bad("--cert and --key go together")
	}
	if ca != "" || cert != "" {
		g.tlsFiles = transport.TLSInfo{TrustedCAFile: ca, CertFile: cert, KeyFile: key}
		cfg, err := g.tlsFiles.ClientConfig()
		if err != nil {
			return bad("TLS files: %v", err)
		}
		g.tls = cfg
	}
	return g, nil
}

// checkEndpoint accepts what etcdctl accepts: host:port, or a URL with a
// scheme etcd's client knows.
func checkEndpoint(e string) error {
	if !strings.Contains(e, "://") {
		if _, _, err := net.SplitHostPort(e); err != nil {
			return fmt.Errorf("%q is neither host:port nor a URL", e)
		}
		return nil
	}
	u, err := url.Parse(e)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("%q has no host", e)
		}
	case "unix", "unixs":
	default:
		return fmt.Errorf("%q: scheme %q is not http, https, unix or unixs", e, u.Scheme)
	}
	return nil
}

func newLogger(w interface{ Write([]byte) (int, error) }, level zapcore.Level) *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), level)
	return zap.New(core).Named("leasegate")
}

// etcdClientLogger is the logger the etcd client gets: leasegate's at
// --log-level debug, else none. The etcd client logs at error what it
// retries or what leasegate reports itself (a token fetch cancelled at
// close, "getToken failed", on a run that succeeded): every failure that
// matters reaches the user as leasegate's one line.
func etcdClientLogger(lg *zap.Logger, level zapcore.Level) *zap.Logger {
	if level > zapcore.DebugLevel {
		return zap.NewNop()
	}
	return lg.Named("etcd-client")
}

// globalsOf returns the checked global flags; setup always ran before a
// command's action.
func globalsOf(c *cli.Context) *globals {
	g, _ := c.Context.Value(globalsKey{}).(*globals)
	return g
}

// commandContext bounds one command's requests by --command-timeout.
func commandContext(c *cli.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Context, globalsOf(c).commandTimeout)
}

// cleanupContext bounds requests that undo or release after the command's
// own work (revoking a lease of no use, releasing run's grant), even when
// the command's context was cancelled by a signal.
func cleanupContext(c *cli.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(c.Context), globalsOf(c).commandTimeout)
}

// access is how a command opens the keyspace.
type access int

const (
	// reads opens it with coordinator.Open: a prefix that holds no
	// keyspace is no_keyspace, and nothing is written.
	reads access = iota
	// acts opens it with coordinator.New, which creates the keyspace (the
	// realm key) if it is absent.
	acts
)

// withCoordinator runs one command's requests: f gets a coordinator on a
// fresh connection, the keyspace opened as a says, and a context bounded by
// --command-timeout; the client is closed when f returns.
func withCoordinator(c *cli.Context, a access, f func(ctx context.Context, co *coordinator.Coordinator) error) error {
	if viaGateway(c) {
		return notThroughGateway(c)
	}
	ctx, cancel := commandContext(c)
	defer cancel()
	co, closeClient, err := connect(ctx, c, a)
	if err != nil {
		return err
	}
	defer closeClient()
	return f(ctx, co)
}

// errDialTimeout is the cause of a connection that never became ready.
var errDialTimeout = errors.New("no connection within --dial-timeout")

// connect opens a client to etcd and the coordinator of --prefix on it,
// opened as a says. The first request (the realm's) waits at most
// --dial-timeout for a connection: a request that never left this process
// is authority_unavailable, never a refusal. The returned close func closes
// the client; it does not revoke any lease.
func connect(ctx context.Context, c *cli.Context, a access, opts ...coordinator.Option) (*coordinator.Coordinator, func(), error) {
	if viaGateway(c) {
		return nil, nil, notThroughGateway(c)
	}
	open := coordinator.Open
	if a == acts {
		open = coordinator.New
	}
	g := globalsOf(c)
	client, err := newClient(g)
	if err != nil {
		if coordinator.DispositionOf(err) == coordinator.AuthorityUnavailable && errors.Is(err, context.DeadlineExceeded) {
			err = withHandshakeReason(c, err)
		}
		return nil, nil, err
	}
	closeClient := func() { _ = client.Close() }
	dctx, cancel := context.WithCancelCause(ctx)
	ready := make(chan struct{})
	go waitReady(dctx, client, g.dialTimeout, cancel, ready)
	co, err := open(dctx, client, append([]coordinator.Option{coordinator.WithPrefix(g.prefix), coordinator.WithLogger(g.lg),
		coordinator.WithClientConfig(clientConfig(g))}, opts...)...)
	cancel(nil)
	<-ready
	if err != nil {
		closeClient()
		if errors.Is(context.Cause(dctx), errDialTimeout) && coordinator.DispositionOf(err) == coordinator.AuthorityUnavailable {
			err = withHandshakeReason(c, noConnection(g))
		}
		return nil, nil, err
	}
	return co, closeClient, nil
}

// noConnection is a connection to etcd that never became ready within
// --dial-timeout: a hold.
func noConnection(g *globals) error {
	return store.NewError(coordinator.AuthorityUnavailable, "connect", "", "", fmt.Sprintf("no connection to etcd at %s within --dial-timeout %v", strings.Join(g.endpoints, ","), g.dialTimeout), nil)
}

// dialReady opens a client as the global flags say, its connection ready
// within --dial-timeout, for a command that sets up before its first
// request (bench): an etcd it cannot reach is a hold at once, as connect's
// first request would say, not at a later request's own timeout.
func dialReady(c *cli.Context) (*clientv3.Client, error) {
	g := globalsOf(c)
	client, err := newClient(g)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancelCause(c.Context)
	defer cancel(nil)
	ready := make(chan struct{})
	client.ActiveConnection().Connect() // no request will make it connect meanwhile
	waitReady(dctx, client, g.dialTimeout, cancel, ready)
	if err := context.Cause(dctx); err != nil {
		_ = client.Close()
		if errors.Is(err, errDialTimeout) {
			return nil, withHandshakeReason(c, noConnection(g))
		}
		return nil, err
	}
	return client, nil
}

// endpointsEnv is the environment variable the global --endpoints flag
// also reads.
const endpointsEnv = "LEASEGATE_ENDPOINTS"

// endpointsOnCommandLine reports whether --endpoints came from the command
// line, not only from LEASEGATE_ENDPOINTS: urfave/cli reads both as set.
// The commands that write test or throwaway data — drill, bench, serve
// --dev — heed the command line alone and start an embedded etcd
// otherwise, so that an operator's everyday environment never points them
// at a real cluster. A command-line value equal to the environment's
// cannot be told apart from it and counts as the environment's (the safe
// side: the embedded etcd).
func endpointsOnCommandLine(c *cli.Context) bool {
	if !c.IsSet("endpoints") {
		return false
	}
	env, ok := os.LookupEnv(endpointsEnv)
	if !ok {
		return true
	}
	var fromEnv []string
	for _, e := range strings.Split(env, ",") {
		fromEnv = append(fromEnv, strings.TrimSpace(e))
	}
	return !slices.Equal(c.StringSlice("endpoints"), fromEnv)
}

// ignoringEndpointsEnv warns, when LEASEGATE_ENDPOINTS is set, that what
// (a command that heeds endpointsOnCommandLine alone) ignores it.
func ignoringEndpointsEnv(lg *zap.Logger, what string) {
	if _, set := os.LookupEnv(endpointsEnv); set {
		lg.Warn(what + " ignores " + endpointsEnv + ": give --endpoints on the command line to run it on a real cluster")
	}
}

// clientConfig is the etcd client configuration the global flags say.
func clientConfig(g *globals) clientv3.Config {
	return clientv3.Config{
		Endpoints:   g.endpoints,
		DialTimeout: g.dialTimeout,
		DialOptions: coordinator.DialOptions(),
		TLS:         g.tls,
		Username:    g.user,
		Password:    g.password,
		Logger:      g.etcdLog,
	}
}

// newClient opens an etcd client as the global flags say (endpoints,
// timeouts, TLS, auth), with leasegate's dial options.
func newClient(g *globals) (*clientv3.Client, error) {
	client, err := clientv3.New(clientConfig(g))
	if err != nil {
		return nil, store.DialError("connect", g.endpoints, err)
	}
	return client, nil
}

// withHandshakeReason replaces err, a connection that never became ready,
// by what a handshake of its own shows (handshake.go), if it shows
// anything. It asks for no longer than --dial-timeout, and not at all when
// the command was interrupted.
func withHandshakeReason(c *cli.Context, err error) error {
	if c.Context.Err() != nil {
		return err
	}
	g := globalsOf(c)
	if found := handshakeReason(c.Context, g, "connect", g.dialTimeout); found != nil {
		return found
	}
	return err
}

// waitReady cancels ctx with errDialTimeout unless the client's connection
// becomes ready within timeout; it returns (closing done) once the
// connection is ready, the timeout fired, or ctx ended.
func waitReady(ctx context.Context, client *clientv3.Client, timeout time.Duration, cancel context.CancelCauseFunc, done chan<- struct{}) {
	defer close(done)
	tctx, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	// No Connect here: the first request connects, so that input refused
	// before it (a bad --prefix) sends nothing at all.
	conn := client.ActiveConnection()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(tctx, s) {
			if ctx.Err() == nil {
				cancel(errDialTimeout)
			}
			return
		}
	}
}
