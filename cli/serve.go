package cli

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/leasegate/leasegate/console"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/internal/secretfile"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// The identities of --dev, one certificate each.
var devCallers = []string{"worker", "worker-2", "approver", "operator"}

const devTrustDomain = "leasegate.dev"

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the effect gateway: workers in any language reach etcd and the providers through it (docs/gateway.md)",
		Description: example(`Serves leasegate's API (api/leasegate/v1) over gRPC, gRPC-Web and JSON on one
TLS port, callers known by their client certificates. The server holds the etcd
client and the provider adapters with their credentials; workers hold only their
certificates. It keeps no state but etcd's: run several replicas on one cluster.
With --config FILE it reads the server configuration (docs/gateway.md, "The
server's configuration"): etcd, TLS, identities and the adapters — pgpromote
(PostgreSQL promotion), dnsupdate (RFC 2136 + TSIG), httpidem (Idempotency-Key)
— with their credentials in files private to the server. All of it is checked
before etcd is dialled: a fault is exit 2 naming the field, nothing served. A
provider that does not answer does not stop the start: grpc.health shows it
as NOT_SERVING under leasegate.adapter.<kind>. With
--dev DIR it starts everything locally: an embedded etcd (unless --endpoints is
given on the command line; an exported LEASEGATE_ENDPOINTS does not count, so
that dev data never reaches a real cluster through the environment), a
throwaway CA with server, worker, approver and operator certificates
written to DIR (with a PKCS#12 file per identity, for a browser), the simulated
providers as adapters; it prints the address, a curl line, and the web console's
URL with how to load a certificate into a browser. The console (docs/console.md)
is served at /console/ on the same port, to the same certificates. SIGINT or SIGTERM stops taking calls and lets those under way
finish (a dispatch in flight is recorded). SIGHUP rereads the policy file
(policy_file; it is also reread every second) and stops nothing. Each
identity holds at most 100 open sessions, 1000 tasks and 32 watch streams
unless the configuration's limits say otherwise. It logs at info on stderr
unless --log-level is given.`,
			"leasegate serve --dev /tmp/lg --listen 127.0.0.1:7443",
			"leasegate serve --config /etc/leasegate/gateway.json",
			"leasegate serve --config /etc/leasegate/gateway.json --check   # before a rollout"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the server's configuration file (JSON)", TakesFile: true},
			&cli.StringFlag{Name: "dev", Usage: "start a local gateway with throwaway certificates written to `DIR`", TakesFile: true},
			&cli.BoolFlag{Name: "check", Usage: "with --config: check the configuration as a start would, probe the providers, print each adapter and exit (0: it would start)"},
			&cli.StringFlag{Name: "listen", Usage: "address to serve on (port 0 picks a free port)", Value: "127.0.0.1:7443"},
			&cli.StringFlag{Name: "otlp-endpoint", Usage: "export traces over OTLP/gRPC to `HOST:PORT` (default: none)"},
			&cli.BoolFlag{Name: "otlp-insecure", Usage: "send OTLP without TLS (a local collector)"},
			&cli.DurationFlag{Name: "grace", Usage: "how long a stop waits for calls under way", Value: 30 * time.Second},
		},
		Action: runServe,
	}
}

// serveOutput is printed once the gateway listens.
type serveOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Address     string                  `json:"address"`
	Dir         string                  `json:"dir,omitempty"`
	Endpoints   []string                `json:"endpoints"`
	Curl        string                  `json:"curl,omitempty"`
	// Console is the web console's URL (docs/console.md).
	Console string `json:"console"`
	// Browser says how to load a dev certificate into a browser (--dev).
	Browser []string `json:"browser,omitempty"`
}

// servePlan is what runServe builds before serving: everything the server
// needs, from --config or --dev.
type servePlan struct {
	cfg       gateway.Config
	ids       []gateway.Identity
	key       []byte
	tls       *tls.Config // the server's
	adapters  []ledger.Adapter
	endpoints []string
	dir       string
	embedded  *embedtest.Cluster
	// etcd's client TLS and password from --config's files (nil, "": none).
	etcdTLS      *tls.Config
	etcdPassword string
	policy       *gateway.Policy // policy_file's; nil: none
}

// reloadOnHUP makes SIGHUP reread the policy file rather than stop serve,
// until ctx ends or the returned func is called. The process's catch of
// SIGHUP as a stop (cli/leasegate/main.go's, for every command) is dropped
// first: signal.Reset clears it for the whole process, which runs this one
// command.
func reloadOnHUP(ctx context.Context, plan servePlan, lg *zap.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Reset(syscall.SIGHUP)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-hup:
			}
			if plan.policy == nil {
				lg.Info("SIGHUP: no policy_file to reload; serving on")
				continue
			}
			changed, err := plan.policy.Reload()
			if err != nil {
				lg.Error("policy file not reloaded on SIGHUP; the current policy stays", zap.String("policy", plan.policy.Current()), zap.Error(err))
				continue
			}
			lg.Info("policy reloaded on SIGHUP", zap.String("policy", plan.policy.Current()), zap.Bool("changed", changed), zap.String("file", plan.cfg.PolicyFile))
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

func runServe(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	op := c.Command.FullName()
	if (c.String("config") == "") == (c.String("dev") == "") {
		return store.NewError(store.InvalidInput, op, "", "", "give --config FILE or --dev DIR (one of them)", nil)
	}
	if c.Bool("check") && c.String("config") == "" {
		return store.NewError(store.InvalidInput, op, "", "", "--check checks a --config FILE", nil)
	}
	g := globalsOf(c)
	// A server logs its state changes: info unless --log-level says
	// otherwise (the other commands' default, error, would hide a provider
	// found down at start, a failed handshake, a session refused).
	glg := g.lg
	if !c.IsSet("log-level") {
		glg = newLogger(c.App.ErrWriter, zapcore.InfoLevel)
	}
	lg := glg.Named("serve")
	plan, err := planServe(c, op, lg)
	if err != nil {
		return err
	}
	if c.Bool("check") {
		return checkServe(c, plan)
	}
	if plan.embedded != nil {
		defer plan.embedded.Close()
	}
	tp, shutdownTracing, err := gateway.TracerProvider(c.Context, firstNonEmpty(c.String("otlp-endpoint"), plan.cfg.OTLPEndpoint), c.Bool("otlp-insecure"))
	if err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	cli3, etcdOpts, err := serveEtcdClient(c, plan, lg, tp)
	if err != nil {
		return err
	}
	defer cli3.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, cancel := commandContext(c)
	prefix := g.prefix
	if plan.cfg.Etcd.Prefix != "" {
		prefix = plan.cfg.Etcd.Prefix
	}
	co, err := coordinator.New(ctx, cli3, append(etcdOpts, coordinator.WithPrefix(prefix), coordinator.WithLogger(glg), coordinator.WithMetrics(reg))...)
	cancel()
	if err != nil {
		return err
	}
	gopts := []gateway.Option{gateway.WithLogger(glg), gateway.WithIdentities(plan.ids...), gateway.WithSessionKey(plan.key),
		gateway.WithAdapters(plan.adapters...), gateway.WithMetrics(reg, reg), gateway.WithTracerProvider(tp), gateway.WithLimits(plan.cfg.Limits)}
	if plan.policy != nil {
		gopts = append(gopts, gateway.WithPolicy(plan.policy))
	}
	srv, err := gateway.New(co, gopts...)
	if err != nil {
		return err
	}
	if plan.policy != nil {
		go plan.policy.Watch(c.Context, gateway.PolicyReloadInterval) // ends with the command's context
		lg.Info("policy", zap.String("policy", plan.policy.Current()), zap.String("file", plan.cfg.PolicyFile))
	}
	stopHUP := reloadOnHUP(c.Context, plan, lg)
	defer stopHUP()
	con, err := console.New(srv, console.WithLogger(glg), console.WithActionKey(console.ActionKey(plan.key)))
	if err != nil {
		return err
	}
	srv.Mount(console.Path, con)
	addr := c.String("listen")
	if !c.IsSet("listen") && plan.cfg.Listen != "" {
		addr = plan.cfg.Listen
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--listen %s: %v", addr, err), nil)
	}
	out := serveOutput{Disposition: ok, Address: "https://" + ln.Addr().String(), Dir: plan.dir, Endpoints: plan.endpoints}
	out.Console = out.Address + console.Path
	t := table{header: []string{"ADDRESS", "ETCD"}, rows: [][]string{{out.Address, strings.Join(plan.endpoints, ",")}}}
	if plan.dir != "" {
		w := filepath.Join(plan.dir, "worker")
		out.Curl = fmt.Sprintf("curl --cacert %s --cert %s.pem --key %s-key.pem -H 'content-type: application/json' %s/leasegate.v1.WorkerService/OpenSession -d '{\"ttl\":\"10s\"}'",
			filepath.Join(plan.dir, "ca.pem"), w, w, out.Address)
		t.rows[0] = append(t.rows[0], plan.dir)
		t.header = append(t.header, "CERTIFICATES")
		out.Browser = devBrowserSteps(plan.dir, out.Console)
	}
	if err := g.out.result(out, t); err != nil {
		return err
	}
	if out.Curl != "" && !g.out.json {
		fmt.Fprintln(c.App.Writer, "try: "+out.Curl)
	}
	if !g.out.json {
		fmt.Fprintln(c.App.Writer, "console: "+out.Console)
		for _, l := range out.Browser {
			fmt.Fprintln(c.App.Writer, "  "+l)
		}
	}
	kinds := make([]string, 0, len(plan.adapters))
	for _, a := range plan.adapters {
		kinds = append(kinds, a.Kind())
	}
	lim := srv.Limits()
	lg.Info("gateway serving", zap.String("address", out.Address), zap.Strings("adapters", kinds),
		zap.Int("limit-sessions", lim.Sessions), zap.Int("limit-grants", lim.Grants), zap.Int("limit-watches", lim.Watches))
	return srv.Serve(c.Context, ln, plan.tls, c.Duration("grace"))
}

// devBrowserSteps says how to open the console of --dev in a browser: the
// dev CA trusted for websites, an identity's PKCS#12 file imported.
func devBrowserSteps(dir, consoleURL string) []string {
	return []string{
		fmt.Sprintf("in a browser: trust %s as an authority for websites, import %s (password %q; approver.p12 to approve, worker.p12 is read-only),",
			filepath.Join(dir, "ca.pem"), filepath.Join(dir, "operator.p12"), console.DevPKCS12Password),
		"then open " + consoleURL + " and pick that certificate (docs/console.md has the steps for Chromium, Firefox and NSS's pk12util)",
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkOutput is what --check prints: the adapters the configuration
// serves, each with its provider's probe.
type checkOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Adapters    []checkedAdapter        `json:"adapters"`
}

type checkedAdapter struct {
	Kind   string `json:"kind"`
	Type   string `json:"type"`
	Health string `json:"health"`          // SERVING or NOT_SERVING, as the health service would show it
	Error  string `json:"error,omitempty"` // why the probe failed
}

// checkServe prints the checked plan's adapters with their probes. The
// configuration is valid (exit 0) whether or not a provider answers from
// here: a start would serve too (gateway.AdapterHealthService).
func checkServe(c *cli.Context, p servePlan) error {
	ctx, cancel := context.WithTimeout(c.Context, 15*time.Second)
	defer cancel()
	failed := gateway.Probe(ctx, p.adapters...)
	out := checkOutput{Disposition: ok}
	t := table{header: []string{"KIND", "TYPE", "HEALTH", "ERROR"}}
	for i, a := range p.adapters {
		ca := checkedAdapter{Kind: a.Kind(), Type: p.cfg.Adapters[i].Type, Health: "SERVING"}
		if err := failed[a.Kind()]; err != nil {
			ca.Health, ca.Error = "NOT_SERVING", err.Error()
		}
		out.Adapters = append(out.Adapters, ca)
		t.rows = append(t.rows, []string{ca.Kind, ca.Type, ca.Health, ca.Error})
	}
	return globalsOf(c).out.result(out, t)
}

// planServe reads --config, or builds the throwaway world of --dev.
func planServe(c *cli.Context, op string, lg *zap.Logger) (servePlan, error) {
	if path := c.String("config"); path != "" {
		return planConfig(op, path)
	}
	dir, err := filepath.Abs(c.String("dev"))
	if err != nil {
		return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--dev: %v", err), nil)
	}
	// A restart on the same DIR keeps what a caller holds: the CA and the
	// client certificates (while valid for another hour), the session key
	// (so session tokens stay good) and etcd's data. The simulated providers
	// live in memory: they start afresh, and the log says so.
	certs, reused := gateway.ReadDevCerts(dir, devTrustDomain, devCallers...)
	if !reused {
		if certs, err = gateway.WriteDevCerts(dir, devTrustDomain, devCallers...); err != nil {
			return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	// A PKCS#12 file per identity, for a browser to present (the console).
	for _, name := range devCallers {
		f := certs.Clients[name]
		if err := console.WritePKCS12(filepath.Join(dir, name+".p12"), f.Cert, f.Key, certs.CA, console.DevPKCS12Password); err != nil {
			return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	key, err := devSessionKey(filepath.Join(dir, "session.key"), reused)
	if err != nil {
		return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("session key: %v", err), nil)
	}
	if reused {
		lg.Warn("serve --dev: reusing the certificates, session key and etcd data of the directory; the simulated providers start afresh (writer db-1, no DNS records), so records from the last run may name effects this world never saw",
			zap.String("dir", dir))
	}
	tlsCfg, err := gateway.TLSConfig(certs.ServerCert, certs.ServerKey, certs.CA)
	if err != nil {
		return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	p := servePlan{dir: dir, key: key, tls: tlsCfg, adapters: devprovider.New("db-1").Adapters(),
		cfg: gateway.Config{TLS: gateway.TLSFiles{Cert: certs.ServerCert, Key: certs.ServerKey, ClientCA: certs.CA}}}
	roles := map[string]gateway.Role{"worker": gateway.RoleWorker, "worker-2": gateway.RoleWorker, "approver": gateway.RoleApprover, "operator": gateway.RoleOperator}
	for _, name := range devCallers {
		p.ids = append(p.ids, gateway.Identity{ID: certs.IDs[name], Roles: []gateway.Role{roles[name]}, Tenants: []string{gateway.AllTenants}})
	}
	if endpointsOnCommandLine(c) {
		p.endpoints = globalsOf(c).endpoints
		return p, nil
	}
	ignoringEndpointsEnv(lg, "serve --dev")
	// etcd's own logs (it reports a clean shutdown's closed listeners as
	// errors) only when asked for with --log-level.
	etcdLog := zap.NewNop()
	if c.IsSet("log-level") {
		etcdLog = lg.Named("etcd")
	}
	cl, err := embedtest.Start(filepath.Join(dir, "etcd"), embedtest.WithLogger(etcdLog))
	if err != nil {
		return servePlan{}, store.NewError(coordinator.AuthorityUnavailable, op, "", "", "cannot start the embedded etcd", err)
	}
	p.embedded, p.endpoints = cl, cl.Endpoints()
	return p, nil
}

// devSessionKey is serve --dev's session key, kept in path (0600) so that a
// restart on the same directory honours the tokens it issued: read when
// the certificates were reused and the file holds a whole key, else new.
func devSessionKey(path string, reuse bool) ([]byte, error) {
	if reuse {
		if key, err := secretfile.Read("session key file", path); err == nil && len(key) >= gateway.MinSessionKeyBytes {
			return key, nil
		}
	}
	key := make([]byte, gateway.MinSessionKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return key, os.WriteFile(path, key, 0o600)
}

// planConfig reads --config and checks all of it before anything is
// dialled or served: the file itself, the files it names (session key,
// TLS, etcd credentials: secrets private to owner and group), and each
// adapter, built now by its constructor. Any fault is invalid_input naming
// the field; whether a provider answers is shown by the health service
// instead (gateway.AdapterHealthService).
func planConfig(op, path string) (servePlan, error) {
	cfg, err := gateway.LoadConfig(path)
	if err != nil {
		return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	p := servePlan{cfg: cfg, ids: cfg.Identities, endpoints: cfg.Etcd.Endpoints}
	bad := func(field string, err error) (servePlan, error) {
		return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("gateway: config %s: %s: %v", path, field, err), nil)
	}
	if p.key, err = secretfile.Read("session key file", cfg.SessionKeyFile); err != nil {
		return bad("session_key_file", err)
	}
	if len(p.key) < gateway.MinSessionKeyBytes {
		return bad("session_key_file", fmt.Errorf("%s holds %d bytes, at least %d: head -c 32 /dev/urandom > %s", cfg.SessionKeyFile, len(p.key), gateway.MinSessionKeyBytes, cfg.SessionKeyFile))
	}
	if err := secretfile.CheckPrivate("server key file", cfg.TLS.Key); err != nil {
		return bad("tls.key", err)
	}
	if p.tls, err = gateway.TLSConfig(cfg.TLS.Cert, cfg.TLS.Key, cfg.TLS.ClientCA); err != nil {
		return bad("tls", err)
	}
	if e := cfg.Etcd; e.CACert != "" || e.Cert != "" || e.Key != "" {
		if e.Key != "" {
			if err := secretfile.CheckPrivate("etcd client key file", e.Key); err != nil {
				return bad("etcd.key", err)
			}
		}
		if p.etcdTLS, err = (transport.TLSInfo{TrustedCAFile: e.CACert, CertFile: e.Cert, KeyFile: e.Key}).ClientConfig(); err != nil {
			return bad("etcd.cacert, cert, key", err)
		}
	}
	if cfg.Etcd.PasswordFile != "" {
		if cfg.Etcd.User == "" {
			return bad("etcd.password_file", errors.New("a password without etcd.user"))
		}
		if p.etcdPassword, err = secretfile.Line("etcd password file", cfg.Etcd.PasswordFile); err != nil {
			return bad("etcd.password_file", err)
		}
	}
	if cfg.PolicyFile != "" {
		if p.policy, err = gateway.LoadPolicy(cfg.PolicyFile); err != nil {
			return bad("policy_file", err)
		}
	}
	if p.adapters, err = cfg.NewAdapters(); err != nil {
		var ce *coordinator.Error
		if errors.As(err, &ce) {
			return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("gateway: config %s: %s", path, ce.Detail), nil)
		}
		return servePlan{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	return p, nil
}

// serveEtcdClient is the server's etcd client: the embedded cluster's, or
// one built from the configuration (TLS, user and password file), or from
// the global flags with --dev and --endpoints on the command line; with the coordinator options
// that configuration implies (WithClientConfig).
func serveEtcdClient(c *cli.Context, p servePlan, lg *zap.Logger, tp trace.TracerProvider) (*clientv3.Client, []coordinator.Option, error) {
	if p.embedded != nil { // its clients have coordinator.DialOptions already
		cli3, err := p.embedded.NewClient(gateway.TraceDialOption(tp))
		if err != nil {
			return nil, nil, store.NewError(coordinator.AuthorityUnavailable, "serve", "", "", "cannot reach the embedded etcd", err)
		}
		return cli3, nil, nil
	}
	g := globalsOf(c)
	cfg := clientv3.Config{Endpoints: p.endpoints, DialTimeout: g.dialTimeout, DialOptions: gateway.EtcdDialOptions(tp), TLS: g.tls,
		Username: g.user, Password: g.password, Logger: lg.Named("etcd-client")}
	if c.String("config") != "" {
		cfg.TLS, cfg.Username, cfg.Password = p.etcdTLS, p.cfg.Etcd.User, p.etcdPassword
	}
	cli3, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, store.DialError("serve", p.endpoints, err)
	}
	return cli3, []coordinator.Option{coordinator.WithClientConfig(cfg)}, nil
}
