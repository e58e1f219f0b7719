package coordinator

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// Option configures New.
type Option func(*options) error

type options struct {
	prefix          string
	logger          *zap.Logger
	requestTimeout  time.Duration
	maxTxnOps       int
	maxRequestBytes int
	registerer      prometheus.Registerer // WithMetrics; nil: no metrics
	clientConfig    *clientv3.Config      // WithClientConfig; nil: fan-out dials on the client's own login
}

// The defaults of New's limits. The Txn limits are etcd's own defaults
// (--max-txn-ops, --max-request-bytes); a cluster configured otherwise
// wants WithMaxTxnOps and WithMaxRequestBytes to match.
const (
	DefaultRequestTimeout  = 10 * time.Second
	DefaultMaxTxnOps       = 128
	DefaultMaxRequestBytes = 1536 * 1024 // 1.5 MiB
)

func defaultOptions() options {
	return options{prefix: DefaultPrefix, logger: zap.NewNop(), requestTimeout: DefaultRequestTimeout,
		maxTxnOps: DefaultMaxTxnOps, maxRequestBytes: DefaultMaxRequestBytes}
}

// WithPrefix sets the key prefix (default "/leasegate"): it starts with '/',
// does not end with one, and is printable ASCII.
func WithPrefix(p string) Option {
	return func(o *options) error {
		if err := store.CheckPrefix(p); err != nil {
			return err
		}
		o.prefix = p
		return nil
	}
}

// WithClientConfig gives New the configuration its client was made from
// (TLS, user and password or token, dial options; its Endpoints are
// ignored). A session's keepalive that cannot renew through the client's
// own connection asks every other member at once; with this option each
// of those attempts is a client of its own to that member alone, which
// logs in on that member. Without it they dial the members on the client's
// transport and login, and on a cluster with auth etcd's client logs in
// again for every stream it opens — through its own connection, which may
// be the member that hung: one hung member of three can then still cost a
// session its lease. Pass it whenever the cluster has auth enabled.
func WithClientConfig(cfg clientv3.Config) Option {
	return func(o *options) error {
		cfg.Endpoints = nil
		o.clientConfig = &cfg
		return nil
	}
}

// WithLogger sets the logger (default zap.NewNop()).
func WithLogger(lg *zap.Logger) Option {
	return func(o *options) error {
		if lg == nil {
			return errors.New("nil logger")
		}
		o.logger = lg
		return nil
	}
}

// WithRequestTimeout bounds every request to etcd whose context has no
// deadline of its own (default DefaultRequestTimeout, 10s). Without a bound
// a write under quorum loss blocks for as long as the etcd client keeps
// re-sending it; with one it ends as outcome_unknown (or
// authority_unavailable if it never left this process). A context with a
// deadline is used as it is.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("request timeout %v must be positive", d)
		}
		o.requestTimeout = d
		return nil
	}
}

// WithMaxTxnOps sets the most operations etcd accepts in one Txn branch
// (etcd's --max-txn-ops, default 128). A Txn over it — leasegate's own ops
// plus a caller's — is invalid_input before any I/O.
func WithMaxTxnOps(n int) Option {
	return func(o *options) error {
		if n < 16 {
			return fmt.Errorf("max txn ops %d is below 16, fewer than a commit needs", n)
		}
		o.maxTxnOps = n
		return nil
	}
}

// WithMaxRequestBytes sets the largest request etcd accepts (etcd's
// --max-request-bytes, default 1.5 MiB). A request over it is invalid_input
// before any I/O.
func WithMaxRequestBytes(n int) Option {
	return func(o *options) error {
		if n < 4096 {
			return fmt.Errorf("max request bytes %d is below 4096", n)
		}
		o.maxRequestBytes = n
		return nil
	}
}

// SessionOption configures NewSession.
type SessionOption func(*sessionOptions) error

type sessionOptions struct {
	margin    time.Duration
	keepAlive bool
}

// WithMargin sets how long before the lease's expiry, counted from the send
// time of the request that granted or renewed it, the session stops acting
// (default TTL/10, at least 100ms). It must be shorter than the TTL.
func WithMargin(d time.Duration) SessionOption {
	return func(o *sessionOptions) error {
		if d < 0 {
			return fmt.Errorf("margin %v is negative", d)
		}
		o.margin = d
		return nil
	}
}

// WithoutKeepAlive grants the lease and does not keep it alive: it lives its
// TTL unless renewed with Coordinator.Renew. One-shot claims (the CLI's
// claim, say) use it; a session that acts for longer wants the keepalive.
func WithoutKeepAlive() SessionOption {
	return func(o *sessionOptions) error {
		o.keepAlive = false
		return nil
	}
}
