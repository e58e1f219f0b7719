package cli

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Tick settings of the local etcd: a 50 ms heartbeat and a 500 ms election
// timeout make etcd's minimum lease TTL one second (1.5 × election timeout,
// rounded up), so `claim --ttl 1s` works against it.
const (
	etcdTickMs     = 50
	etcdElectionMs = 500
)

func etcdCommand() *cli.Command {
	return &cli.Command{
		Name:  "etcd",
		Usage: "run an embedded single-member etcd for local use",
		Description: example(`Runs one etcd member in this process, its data in --data-dir, serving clients
on --listen-client, until SIGINT or SIGTERM, then shuts down cleanly. It prints
where it listens once it is ready (port 0 picks a free port). For local use and
drills: one member has no fault tolerance.`,
			"leasegate etcd --data-dir /tmp/lg.etcd --listen-client http://127.0.0.1:2379"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", Usage: "directory of etcd's data", Value: "leasegate.etcd", TakesFile: true},
			&cli.StringFlag{Name: "listen-client", Usage: "URL to serve clients on", Value: "http://127.0.0.1:2379"},
			&cli.StringFlag{Name: "listen-peer", Usage: "URL for raft peer traffic (unused by a single member, but etcd binds it)", Value: "http://127.0.0.1:2380"},
		},
		Action: runEtcd,
	}
}

// etcdOutput is printed once etcd is ready.
type etcdOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Endpoints   []string                `json:"endpoints"`
	DataDir     string                  `json:"data_dir"`
}

func runEtcd(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	op := commandName(c)
	clientURL, err := localURL(c.String("listen-client"))
	if err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--listen-client: %v", err), nil)
	}
	peerURL, err := localURL(c.String("listen-peer"))
	if err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--listen-peer: %v", err), nil)
	}
	dir, err := filepath.Abs(c.String("data-dir"))
	if err != nil || c.String("data-dir") == "" {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("--data-dir %q: %v", c.String("data-dir"), err), nil)
	}
	g := globalsOf(c)
	lg := g.lg.Named("etcd")

	cfg := embed.NewConfig()
	cfg.Name = "leasegate"
	cfg.Dir = dir
	cfg.TickMs = etcdTickMs
	cfg.ElectionMs = etcdElectionMs
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// etcd's own logs (it reports a clean shutdown's closed listeners as
	// errors) only when asked for with --log-level.
	etcdLog := zap.NewNop()
	if c.IsSet("log-level") {
		etcdLog = lg
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLog)
	e, err := embed.StartEtcd(cfg)
	if err != nil && addrInUse(err) {
		// Not a hold: retrying later does not free the port.
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("the address is in use (is another etcd running there?); stop it, or pick free ports with --listen-client and --listen-peer: %v", err), nil)
	}
	if err != nil {
		return store.NewError(coordinator.AuthorityUnavailable, op, "", "", "cannot start etcd", err)
	}
	closeEtcd := sync.OnceFunc(e.Close)
	defer closeEtcd()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return store.NewError(coordinator.AuthorityUnavailable, op, "", "", "etcd failed while starting", err)
	case <-c.Context.Done():
		return nil
	}
	out := etcdOutput{Disposition: ok, DataDir: dir}
	for _, l := range e.Clients {
		out.Endpoints = append(out.Endpoints, clientURL.Scheme+"://"+l.Addr().String())
	}
	lg.Info("etcd ready", zap.Strings("endpoints", out.Endpoints), zap.String("data-dir", dir))
	t := table{header: []string{"ENDPOINT", "DATA-DIR"}}
	for _, ep := range out.Endpoints {
		t.rows = append(t.rows, []string{ep, dir})
	}
	if err := g.out.result(out, t); err != nil {
		return err
	}
	select {
	case <-c.Context.Done():
		lg.Info("stopping etcd")
		closeEtcd()
		lg.Info("etcd stopped")
		return nil
	case err := <-e.Err():
		return store.NewError(coordinator.AuthorityUnavailable, op, "", "", "etcd stopped", err)
	}
}

func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// localURL parses a listen URL: http with a host and port, nothing else
// (this etcd takes no TLS flags).
func localURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%q: want http://host:port", s)
	}
	u.Path = ""
	return u, nil
}
