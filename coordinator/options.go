package coordinator

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Option configures New.
type Option func(*options) error

type options struct {
	prefix string
	logger *zap.Logger
}

// WithPrefix sets the key prefix (default "/leasegate"): it starts with '/',
// does not end with one, and is printable ASCII.
func WithPrefix(p string) Option {
	return func(o *options) error {
		if err := checkPrefix(p); err != nil {
			return err
		}
		o.prefix = p
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
