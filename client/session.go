package client

import (
	"context"
	"sync"
	"time"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Session is a lease the gateway granted this client's identity. The
// gateway never renews it on its own: this Session does, with one goroutine
// (WithKeepAlive), or the caller does with Renew. Its local deadline is
// the send time of the last confirmed renewal, plus the TTL, minus the
// margin; past it the Session refuses to act and Done closes.
type Session struct {
	c      *Client
	owner  string
	lease  int64
	ttl    time.Duration
	margin time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc
	donec  chan struct{}

	mu       sync.Mutex
	token    string
	deadline time.Time
	timer    *time.Timer
}

type sessionOptions struct{ keepAlive bool }

// SessionOption configures OpenSession.
type SessionOption func(*sessionOptions)

// WithKeepAlive renews the lease every TTL/3 from one goroutine (retrying
// every min(TTL/3, 200ms) after a failure) until the local deadline, Close,
// or the gateway saying the lease is gone.
func WithKeepAlive() SessionOption { return func(o *sessionOptions) { o.keepAlive = true } }

// OpenSession asks the gateway for a lease of ttl (whole seconds).
func (c *Client) OpenSession(ctx context.Context, ttl time.Duration, opts ...SessionOption) (*Session, error) {
	var o sessionOptions
	for _, opt := range opts {
		opt(&o)
	}
	sent := time.Now()
	resp, err := call(ctx, "session", true, c.workers.OpenSession, &leasegatev1.OpenSessionRequest{Ttl: wire.Dur(ttl)})
	if err != nil {
		return nil, err
	}
	lease, err := coordinator.ParseLeaseID(resp.GetSession().GetLease())
	if err != nil {
		return nil, store.NewError(coordinator.OutcomeUnknown, "session", "", "", "the gateway answered with a malformed lease", err)
	}
	s := &Session{c: c, owner: resp.GetSession().GetOwner(), lease: lease, ttl: resp.GetSession().GetTtl().AsDuration(),
		donec: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.update(resp.GetRenewal(), sent)
	if o.keepAlive {
		go s.keepAlive()
	} else {
		close(s.donec)
		s.mu.Lock()
		s.timer = time.AfterFunc(time.Until(s.deadline), func() { s.cancel(coordinator.ErrSessionDeadline) })
		s.mu.Unlock()
	}
	return s, nil
}

// update takes a renewal whose request was sent at sent: the local deadline
// is the earlier of sent + ttl - margin and now + stop_within.
func (s *Session) update(r *leasegatev1.Renewal, sent time.Time) time.Time {
	ttl, margin := r.GetTtl().AsDuration(), r.GetMargin().AsDuration()
	d := sent.Add(ttl - margin)
	if within := time.Now().Add(r.GetStopWithin().AsDuration()); within.Before(d) {
		d = within
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token, s.deadline, s.margin = r.GetToken(), d, margin
	if s.timer != nil {
		s.timer.Reset(time.Until(d))
	}
	return d
}

// Owner is the session's owner label: this client's identity.
func (s *Session) Owner() string { return s.owner }

// Lease is the session's lease ID.
func (s *Session) Lease() int64 { return s.lease }

// TTL is the lease's TTL.
func (s *Session) TTL() time.Duration { return s.ttl }

// Deadline is the local deadline past which the session refuses to act.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// Token is the current session token (for a process that hands the session
// on).
func (s *Session) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// Done closes when the session can no longer act.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err says why Done closed (coordinator.ErrSessionLeaseLost,
// ErrSessionDeadline, ErrSessionClosed); nil while live.
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

func (s *Session) usable(op, tenant, task string) error {
	if err := s.Err(); err != nil {
		return store.NewError(coordinator.ExpiredOwner, op, tenant, task, "the session can no longer act", err)
	}
	if time.Now().After(s.Deadline()) {
		return store.NewError(coordinator.ExpiredOwner, op, tenant, task, "the session is past its local deadline", coordinator.ErrSessionDeadline)
	}
	return nil
}

// Renew renews the lease once and moves the local deadline, counted from
// this call's send time.
func (s *Session) Renew(ctx context.Context) error {
	if err := s.usable("renew", "", ""); err != nil {
		return err
	}
	sent := time.Now()
	resp, err := call(ctx, "renew", true, s.c.workers.RenewSession, &leasegatev1.RenewSessionRequest{SessionToken: s.Token()})
	if err != nil {
		if coordinator.DispositionOf(err) == coordinator.ExpiredOwner {
			s.cancel(coordinator.ErrSessionLeaseLost)
		}
		return err
	}
	s.update(resp.GetRenewal(), sent)
	return nil
}

// Claim grants the task to this session, its identity as owner label.
func (s *Session) Claim(ctx context.Context, tenant, task string) (coordinator.Grant, error) {
	if err := s.usable("claim", tenant, task); err != nil {
		return coordinator.Grant{}, err
	}
	resp, err := call(ctx, "claim", true, s.c.workers.Claim, &leasegatev1.ClaimRequest{SessionToken: s.Token(), Tenant: tenant, Task: task})
	if err != nil {
		return coordinator.Grant{}, err
	}
	g, err := wire.GrantFromProto("claim", resp.GetGrant())
	if err != nil {
		return coordinator.Grant{}, store.NewError(coordinator.OutcomeUnknown, "claim", tenant, task, "the gateway answered with a malformed grant", err)
	}
	return g, nil
}

// Close stops the keepalive and revokes the lease (every task it holds is
// released). Closing twice is a no-op.
func (s *Session) Close(ctx context.Context) error {
	if s.ctx.Err() != nil && context.Cause(s.ctx) == coordinator.ErrSessionClosed {
		return nil
	}
	s.cancel(coordinator.ErrSessionClosed)
	<-s.donec
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	_, err := call(ctx, "session close", true, s.c.workers.CloseSession, &leasegatev1.CloseSessionRequest{SessionToken: s.Token()})
	return err
}

// keepAlive is the session's one goroutine.
func (s *Session) keepAlive() {
	defer close(s.donec)
	interval := s.ttl / 3
	retry := min(interval, 200*time.Millisecond)
	next := time.NewTimer(interval)
	defer next.Stop()
	deadline := time.NewTimer(time.Until(s.Deadline()))
	defer deadline.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-deadline.C:
			s.cancel(coordinator.ErrSessionDeadline)
			return
		case <-next.C:
		}
		sent := time.Now()
		// Each attempt is bounded by a third of what is left, so one that
		// hangs leaves time to try again.
		rctx, cancel := context.WithTimeout(s.ctx, max(time.Until(s.Deadline())/3, 50*time.Millisecond))
		resp, err := call(rctx, "renew", true, s.c.workers.RenewSession, &leasegatev1.RenewSessionRequest{SessionToken: s.Token()})
		cancel()
		switch {
		case err == nil:
			d := s.update(resp.GetRenewal(), sent)
			deadline.Reset(time.Until(d))
			next.Reset(interval)
		case coordinator.DispositionOf(err) == coordinator.ExpiredOwner:
			s.cancel(coordinator.ErrSessionLeaseLost)
			return
		default:
			next.Reset(retry)
		}
	}
}
