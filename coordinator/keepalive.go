package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// minAttempt is the shortest bound of one renewal attempt, however little
// time is left before the local deadline (which bounds every attempt).
const minAttempt = 100 * time.Millisecond

// keepAlive is the session's one goroutine: it renews the lease every TTL/3,
// moves the local deadline forward on each confirmed renewal, and stops the
// session when etcd says the lease is gone or the deadline passes first.
// The deadline timer is its own: Done closes at the local deadline whatever
// a renewal attempt is doing.
func (s *Session) keepAlive() {
	defer close(s.donec)
	interval := s.ttl / 3
	next := time.NewTimer(interval)
	defer next.Stop()
	deadline := time.NewTimer(time.Until(s.Deadline()))
	defer deadline.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-deadline.C:
			s.stop(ErrSessionDeadline)
			return
		case <-next.C:
		}
		rctx, cancel := context.WithDeadline(s.ctx, s.Deadline())
		done := make(chan renewal, 1)
		go func() { done <- s.renew(rctx) }()
		var r renewal
		select {
		case r = <-done:
		case <-deadline.C:
			s.stop(ErrSessionDeadline)
			cancel()
			<-done
			return
		}
		cancel()
		switch {
		case r.err == nil:
			d := r.sent.Add(time.Duration(r.ttl)*time.Second - s.margin)
			s.mu.Lock()
			s.deadline = d
			s.mu.Unlock()
			s.c.metrics.sessionRenewed(s, r.sent)
			s.c.metrics.Outcome("keepalive", Renewed)
			deadline.Reset(time.Until(d))
			next.Reset(interval)
			s.lg.Debug("session renewed", zap.String("member", r.member), zap.Time("deadline", d))
		case errors.Is(r.err, rpctypes.ErrLeaseNotFound):
			s.stop(ErrSessionLeaseLost)
			return
		default:
			// Only the session's own context ends renew without an answer:
			// closed, or at the local deadline, which the timer reports.
			select {
			case <-s.ctx.Done():
				return
			case <-deadline.C:
				s.stop(ErrSessionDeadline)
				return
			}
		}
	}
}

// renewal is the outcome of one renewal: the TTL etcd granted, when the
// request that it answered was sent, and the member that answered.
type renewal struct {
	ttl    int64
	sent   time.Time
	member string
	err    error
}

// renew renews the lease once. Each attempt is bounded by half the time
// left before the local deadline (ctx's): an attempt that lands on a hung
// member gives up in time for another. A round of attempts starts on the
// client's own connection (its balancer picks the member); after a failure
// each goes to an endpoint whose member has not failed in this round, on a
// connection of its own, so that a retry cannot ride the balancer back to
// the member that hung. It returns etcd's answer, or, once ctx is done,
// its error.
func (s *Session) renew(ctx context.Context) renewal {
	eps := s.c.client.Endpoints()
	failures := 0
	for {
		bad := map[string]bool{} // members that failed in this round
		ep := ""
		for {
			r := s.attempt(ctx, ep)
			if r.err == nil || errors.Is(r.err, rpctypes.ErrLeaseNotFound) {
				if failures > 0 && r.err == nil {
					s.lg.Info("keepalive renewed after failed attempts", zap.String("member", r.member), zap.Int("failures", failures))
				}
				return r
			}
			if ctx.Err() != nil {
				return renewal{err: ctx.Err()}
			}
			failures++
			s.attemptFailed(ctx, r, failures)
			bad[r.member] = true
			if ep != "" {
				bad[endpointHost(ep)] = true
			}
			if ep = nextEndpoint(eps, bad); ep == "" {
				break
			}
		}
		// Every member failed in this round: pause before the next, so that
		// refused connections do not spin.
		t := time.NewTimer(min(s.ttl/3, 200*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return renewal{err: ctx.Err()}
		case <-t.C:
		}
	}
}

// attemptFailed logs a failed renewal attempt, the session's first since
// its last renewal at warn, with the member it went to, and counts it in
// keepalive_failures_total{reason="unreachable"}.
func (s *Session) attemptFailed(ctx context.Context, r renewal, failures int) {
	s.c.metrics.keepAliveFailed()
	level := zap.DebugLevel
	if failures == 1 {
		level = zap.WarnLevel
	}
	if ce := s.lg.Check(level, "keepalive attempt failed; retrying on another member"); ce != nil {
		fields := []zap.Field{zap.String("member", r.member), zap.Int("failures", failures), zap.Error(r.err)}
		if dl, ok := ctx.Deadline(); ok {
			fields = append(fields, zap.Duration("left", time.Until(dl).Round(time.Millisecond)))
		}
		ce.Write(fields...)
	}
}

// nextEndpoint is the first endpoint whose member is not bad; "" when none
// is left.
func nextEndpoint(eps []string, bad map[string]bool) string {
	for _, ep := range eps {
		if !bad[endpointHost(ep)] {
			return ep
		}
	}
	return ""
}

// endpointHost is an endpoint URL's host:port, as a connection's peer
// address reads.
func endpointHost(ep string) string {
	if _, rest, ok := strings.Cut(ep, "://"); ok {
		return rest
	}
	return ep
}

// attempt sends one keepalive of the lease and waits for its answer, for
// at most half the time left before ctx's deadline (and at least
// minAttempt, ctx permitting). ep "" sends it on the client's own
// connection (its balancer picks the member); otherwise on a connection to
// ep alone, closed after.
func (s *Session) attempt(ctx context.Context, ep string) renewal {
	bound := minAttempt
	if dl, ok := ctx.Deadline(); ok {
		bound = max(time.Until(dl)/2, minAttempt)
	}
	actx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := s.c.client.Ctx().Err(); err != nil {
		// A closed client renews nothing: its owner let go of etcd.
		return renewal{member: endpointHost(ep), err: fmt.Errorf("etcd client closed: %w", err)}
	}
	conn := s.c.client.ActiveConnection()
	if ep != "" {
		own, err := s.c.client.Dial(ep)
		if err != nil {
			return renewal{member: endpointHost(ep), err: err}
		}
		defer own.Close()
		conn = own
	}
	return s.keepAliveOn(actx, conn, endpointHost(ep))
}

// keepAliveOn sends one LeaseKeepAlive on conn and waits for the answer
// until ctx is done. member names the endpoint until the stream knows its
// peer.
func (s *Session) keepAliveOn(ctx context.Context, conn *grpc.ClientConn, member string) renewal {
	sent := time.Now()
	stream, err := pb.NewLeaseClient(conn).LeaseKeepAlive(ctx)
	if err != nil {
		return renewal{member: member, err: rpctypes.Error(err)}
	}
	if p, ok := peer.FromContext(stream.Context()); ok && p.Addr != nil {
		member = p.Addr.String()
	}
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(s.lease)}); err != nil {
		return renewal{member: member, err: rpctypes.Error(err)}
	}
	resp, err := stream.Recv()
	if err != nil {
		return renewal{member: member, err: rpctypes.Error(err)}
	}
	if resp.TTL <= 0 { // etcd's answer for a lease it does not know
		return renewal{member: member, err: rpctypes.ErrLeaseNotFound}
	}
	return renewal{ttl: resp.TTL, sent: sent, member: member}
}
