package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
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
			s.c.metrics.count("keepalive", Renewed)
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

// renew renews the lease once. Its first attempt goes through the
// client's own connection (its balancer picks the member), bounded by half
// the time left before the local deadline (ctx's): one that lands on a hung
// member gives up in time for the others. Then it asks every other member
// at once, each on a connection of its own, so that a retry cannot ride the
// balancer back to the member that hung, and a slow TLS handshake with the
// healthy one is not cut short by the members tried before it: the first
// answer wins. When every member failed it pauses and starts over. It
// returns etcd's answer, or, once ctx is done, its error.
func (s *Session) renew(ctx context.Context) renewal {
	failures := 0
	for {
		r := s.attempt(ctx, "", true)
		if done(r) {
			if failures > 0 {
				s.lg.Info("keepalive renewed after failed attempts", zap.String("member", r.member), zap.Int("failures", failures))
			}
			return r
		}
		if ctx.Err() != nil {
			return renewal{err: ctx.Err()}
		}
		failures++
		s.attemptFailed(ctx, r, failures)
		if r = s.fanOut(ctx, r.member, &failures); done(r) {
			s.lg.Info("keepalive renewed after failed attempts", zap.String("member", r.member), zap.Int("failures", failures))
			return r
		}
		// Every member failed: pause before the next round, so that refused
		// connections do not spin.
		t := time.NewTimer(min(s.ttl/3, 200*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return renewal{err: ctx.Err()}
		case <-t.C:
		}
	}
}

// done reports whether r ends a renewal: etcd answered, renewed or lease gone.
func done(r renewal) bool { return r.err == nil || errors.Is(r.err, rpctypes.ErrLeaseNotFound) }

// fanOut sends one keepalive to every endpoint but the member that just
// failed ("" if unknown), each on its own connection, all at once, until
// ctx is done; the first answer wins and the others are cancelled. Each
// failure is counted (and logged) as it comes.
func (s *Session) fanOut(ctx context.Context, failed string, failures *int) renewal {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var eps []string
	for _, ep := range s.c.client.Endpoints() {
		if failed == "" || endpointHost(ep) != failed {
			eps = append(eps, ep)
		}
	}
	results := make(chan renewal, len(eps))
	for _, ep := range eps {
		go func() { results <- s.attempt(fctx, ep, false) }()
	}
	last := renewal{err: errors.New("no other endpoint to try")}
	for range eps {
		r := <-results
		if done(r) {
			cancel()
			return r // the others end on fctx; results is buffered for them
		}
		if ctx.Err() == nil {
			*failures++
			s.attemptFailed(ctx, r, *failures)
		}
		last = r
	}
	return last
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
		member := r.member
		if member == "" {
			member = "unknown (picked by the client's balancer; no stream opened)"
		}
		fields := []zap.Field{zap.String("member", member), zap.Int("failures", failures), zap.Error(r.err)}
		if dl, ok := ctx.Deadline(); ok {
			fields = append(fields, zap.Duration("left", time.Until(dl).Round(time.Millisecond)))
		}
		ce.Write(fields...)
	}
}

// endpointHost is an endpoint URL's host:port, as a connection's peer
// address reads.
func endpointHost(ep string) string {
	if _, rest, ok := strings.Cut(ep, "://"); ok {
		return rest
	}
	return ep
}

// attempt sends one keepalive of the lease and waits for its answer until
// ctx is done, or, bounded, for at most half the time left before ctx's
// deadline (at least minAttempt). ep "" sends it on the client's own
// connection (its balancer picks the member); otherwise on a connection to
// ep alone, closed after.
func (s *Session) attempt(ctx context.Context, ep string, bounded bool) renewal {
	if dl, ok := ctx.Deadline(); ok && bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(time.Until(dl)/2, minAttempt))
		defer cancel()
	}
	if err := s.c.client.Ctx().Err(); err != nil {
		// A closed client renews nothing: its owner let go of etcd.
		return renewal{member: endpointHost(ep), err: fmt.Errorf("etcd client closed: %w", err)}
	}
	conn := s.c.client.ActiveConnection()
	if ep != "" {
		own, closeOwn, err := s.c.dialMember(ctx, ep)
		if err != nil {
			return renewal{member: endpointHost(ep), err: rpctypes.Error(err)}
		}
		defer closeOwn()
		conn = own
	}
	return s.keepAliveOn(ctx, conn, endpointHost(ep))
}

// dialMember opens a connection to the member at ep alone, closed by the
// func it returns. With WithClientConfig it is a client of its own, which
// logs in on that member (within ctx) before it returns; without, a
// connection on the coordinator's client, whose login (on a cluster with
// auth) goes through the client's balanced connection.
func (c *Coordinator) dialMember(ctx context.Context, ep string) (*grpc.ClientConn, func(), error) {
	if c.opts.clientConfig == nil {
		conn, err := c.client.Dial(ep)
		if err != nil {
			return nil, nil, err
		}
		return conn, func() { _ = conn.Close() }, nil
	}
	cfg := *c.opts.clientConfig
	cfg.Endpoints = []string{ep}
	cfg.Context = ctx // bounds the login New makes, and ends the client with the attempt
	cfg.DialTimeout = 0
	cfg.AutoSyncInterval = 0
	if cfg.Logger == nil && cfg.LogConfig == nil {
		cfg.Logger = zap.NewNop() // the attempt's failure is logged by attemptFailed
	}
	mc, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	return mc.ActiveConnection(), func() { _ = mc.Close() }, nil
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
