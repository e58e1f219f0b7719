package gateway

import (
	"context"
	"time"
)

// SetIdleTimeout sets how long s's Serve keeps an idle connection open.
func SetIdleTimeout(s *Server, d time.Duration) { s.idleTimeout = d }

// ProbeAdapters probes every adapter's provider now (probeAdapters).
func (s *Server) ProbeAdapters(ctx context.Context) map[string]error { return s.probeAdapters(ctx) }

// WithoutLimits makes a server count no limit: the baseline
// BenchmarkLimits measures the limits' cost against.
func WithoutLimits() Option {
	return func(o *options) error {
		o.noLimits = true
		return nil
	}
}
