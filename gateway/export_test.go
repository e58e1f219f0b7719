package gateway

import (
	"context"
	"time"
)

// SetIdleTimeout sets how long s's Serve keeps an idle connection open.
func SetIdleTimeout(s *Server, d time.Duration) { s.idleTimeout = d }

// ProbeAdapters probes every adapter's provider now (probeAdapters).
func (s *Server) ProbeAdapters(ctx context.Context) map[string]error { return s.probeAdapters(ctx) }
