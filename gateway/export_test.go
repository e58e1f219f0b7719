package gateway

import "time"

// SetIdleTimeout sets how long s's Serve keeps an idle connection open.
func SetIdleTimeout(s *Server, d time.Duration) { s.idleTimeout = d }
