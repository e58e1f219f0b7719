package drill

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/secretfile"
)

// The caller's etcd client settings (WithClientConfig, WithTLSFiles): the
// coordinators Run makes on the caller's client get its configuration, and
// the real-provider drill's worker processes (realchild.go), which dial etcd
// themselves, get the same TLS and login.

// WithClientConfig gives Run the configuration the caller's client was made
// from (TLS, user and password or token; its Endpoints are ignored), for
// every coordinator Run makes on that client (coordinator.WithClientConfig)
// and, with WithRealProviders, for the worker processes' own clients. Give
// it whenever the client has TLS or a login. Its TLS, a *tls.Config, cannot
// reach another process: with WithRealProviders and TLS, WithTLSFiles names
// the files it was made from.
func WithClientConfig(cfg clientv3.Config) Option {
	return func(c *config) error {
		cfg.Endpoints = nil
		c.clientConfig = &cfg
		return nil
	}
}

// WithTLSFiles names the files the TLS of WithClientConfig's configuration
// was made from (etcdctl's and leasegate's --cacert, --cert and --key): the
// real-provider workers make their clients' TLS from them. It needs
// WithClientConfig with TLS.
func WithTLSFiles(files transport.TLSInfo) Option {
	return func(c *config) error {
		if files.Empty() && files.TrustedCAFile == "" {
			return errors.New("TLS files: none named")
		}
		c.tlsFiles = &files
		return nil
	}
}

// coordinatorOptions are the options of every coordinator Run makes on the
// caller's client, after opts.
func (c *config) coordinatorOptions(opts ...coordinator.Option) []coordinator.Option {
	if c.clientConfig != nil {
		opts = append(opts, coordinator.WithClientConfig(*c.clientConfig))
	}
	return opts
}

// checkClient is Run's check of the client settings.
func checkClient(c *config) error {
	if c.tlsFiles != nil && (c.clientConfig == nil || c.clientConfig.TLS == nil) {
		return errors.New("TLS files without a client configuration with TLS (WithClientConfig)")
	}
	if c.real != nil && c.clientConfig != nil && c.clientConfig.TLS != nil && c.tlsFiles == nil {
		return errors.New("the client configuration has TLS: the real-provider workers, processes of their own, need the files it was made from (WithTLSFiles)")
	}
	return nil
}

// workerClient is how a worker process dials etcd, as the drill's client
// does: the TLS files, the user, and the file that holds the password or
// token (never the spec itself: the spec is in the worker's environment),
// read as every credential file is (internal/secretfile).
// The worker's dial options are coordinator.DialOptions(), not the
// caller's.
type workerClient struct {
	DialTimeout time.Duration `json:"dial_timeout,omitempty"`
	CACert      string        `json:"cacert,omitempty"`
	Cert        string        `json:"cert,omitempty"`
	Key         string        `json:"key,omitempty"`
	User        string        `json:"user,omitempty"`
	SecretFile  string        `json:"secret_file,omitempty"`
}

// workerSecret is what a workerClient's SecretFile holds.
type workerSecret struct {
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
}

// newWorkerClient is the workers' share of the run's client settings (nil
// without WithClientConfig: the workers dial the endpoints alone). A
// password or token goes to a file only this user reads (0600) in dir, the
// run's own directory.
func newWorkerClient(c *config, dir string) (*workerClient, error) {
	if c.clientConfig == nil {
		return nil, nil
	}
	cc := c.clientConfig
	wc := &workerClient{DialTimeout: cc.DialTimeout, User: cc.Username}
	if f := c.tlsFiles; f != nil {
		wc.CACert, wc.Cert, wc.Key = f.TrustedCAFile, f.CertFile, f.KeyFile
	}
	if cc.Password != "" || cc.Token != "" {
		b, err := json.Marshal(workerSecret{Password: cc.Password, Token: cc.Token})
		if err != nil {
			return nil, err
		}
		wc.SecretFile = filepath.Join(dir, "etcd-credentials.json")
		if err := os.WriteFile(wc.SecretFile, b, 0o600); err != nil {
			return nil, fmt.Errorf("drill: the workers' etcd credentials: %w", err)
		}
	}
	return wc, nil
}

// config is the worker's client configuration for endpoints.
func (wc *workerClient) config(endpoints []string) (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, DialOptions: coordinator.DialOptions(), Logger: zap.NewNop()}
	if wc == nil {
		return cfg, nil
	}
	if wc.DialTimeout > 0 {
		cfg.DialTimeout = wc.DialTimeout
	}
	if wc.CACert != "" || wc.Cert != "" {
		t, err := transport.TLSInfo{TrustedCAFile: wc.CACert, CertFile: wc.Cert, KeyFile: wc.Key}.ClientConfig()
		if err != nil {
			return clientv3.Config{}, fmt.Errorf("TLS files: %w", err)
		}
		cfg.TLS = t
	}
	cfg.Username = wc.User
	if wc.SecretFile != "" {
		b, err := secretfile.Read("etcd credentials file", wc.SecretFile) // private to this user, as every credential file
		if err != nil {
			return clientv3.Config{}, err
		}
		var s workerSecret
		if err := json.Unmarshal(b, &s); err != nil {
			return clientv3.Config{}, fmt.Errorf("etcd credentials %s: %w", wc.SecretFile, err)
		}
		cfg.Password, cfg.Token = s.Password, s.Token
	}
	return cfg, nil
}
