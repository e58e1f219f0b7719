package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/internal/store"
)

// Why a session stopped, as Session.Err reports it.
var (
	ErrSessionLeaseLost = errors.New("coordinator: session lease expired or was revoked")
	ErrSessionDeadline  = errors.New("coordinator: session passed its local deadline without a confirmed renewal")
	ErrSessionClosed    = errors.New("coordinator: session closed")
)

// minMargin is the least default margin between the local deadline and the
// lease's expiry as the authority counts it.
const minMargin = 100 * time.Millisecond

// Session is one etcd lease held for one owner label, kept alive by exactly
// one goroutine (unless WithoutKeepAlive). It keeps a conservative local
// deadline — the send time of the last request that granted or renewed the
// lease, plus the TTL, minus a margin — and refuses to act past it. The
// authority stays etcd: a Txn is what decides.
type Session struct {
	c      *Coordinator
	owner  string
	lease  clientv3.LeaseID
	ttl    time.Duration
	margin time.Duration
	lg     *zap.Logger

	ctx    context.Context
	cancel context.CancelCauseFunc
	donec  chan struct{} // closed when the keepalive goroutine (if any) returned

	renews bool // renewed by its own goroutine (not WithoutKeepAlive, not attach)

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer // local deadline, without keepalive
	closed   bool
	ended    bool // stop ran: counted once, however many callers race to it
}

// NewSession grants a lease of ttl for owner. TTL must be whole seconds
// (etcd counts leases in seconds); a TTL etcd would raise to its minimum is
// refused as invalid_input, and the lease revoked, rather than silently
// changed: the TTL in force is the TTL asked for.
func (c *Coordinator) NewSession(ctx context.Context, owner string, ttl time.Duration, opts ...SessionOption) (*Session, error) {
	if err := CheckLabel("owner", owner); err != nil {
		return nil, store.NewError(InvalidInput, "session", "", "", fmt.Sprintf("%v", err), nil)
	}
	if err := CheckTTL(ttl); err != nil {
		return nil, store.NewError(InvalidInput, "session", "", "", fmt.Sprintf("%v", err), nil)
	}
	o := sessionOptions{margin: max(ttl/10, minMargin), keepAlive: true}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, store.NewError(InvalidInput, "session", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if o.margin >= ttl {
		return nil, store.NewError(InvalidInput, "session", "", "", fmt.Sprintf("margin %v must be shorter than ttl %v", o.margin, ttl), nil)
	}
	sent := time.Now()
	var resp *clientv3.LeaseGrantResponse
	err := c.s.Do(ctx, store.Request{Op: "session", Mutating: true}, func(ctx context.Context) (err error) {
		resp, err = c.client.Grant(ctx, int64(ttl/time.Second))
		return err
	})
	if err != nil {
		return nil, err
	}
	if granted := time.Duration(resp.TTL) * time.Second; granted != ttl {
		rerr := c.revoke(ctx, "session", int64(resp.ID))
		e := store.NewError(InvalidInput, "session", "", "", fmt.Sprintf("etcd granted ttl %v instead of %v (below the cluster's minimum lease TTL); ask for at least %v", granted, ttl, granted), nil)
		e.Err = rerr
		return nil, e
	}
	s := &Session{
		c: c, owner: owner, lease: resp.ID, ttl: ttl, margin: o.margin,
		lg:       c.lg.Named("session").With(zap.String("owner", owner), leaseField(int64(resp.ID))),
		donec:    make(chan struct{}),
		deadline: sent.Add(ttl - o.margin),
		renews:   o.keepAlive,
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	c.metrics.sessionRenewed(s, sent)
	if o.keepAlive {
		go s.keepAlive()
	} else {
		close(s.donec)
		s.mu.Lock() // the timer may fire (and stop read s.timer) before this returns
		s.timer = time.AfterFunc(time.Until(s.deadline), func() { s.stop(ErrSessionDeadline) })
		s.mu.Unlock()
	}
	s.lg.Info("session started", zap.Duration("ttl", ttl), zap.Bool("keepalive", o.keepAlive))
	return s, nil
}

// MaxTTL is the longest lease TTL leasegate asks for. A grant lives as long
// as its lease; a TTL of days keeps a crashed owner's task held for days, and
// is nearly always a unit mistake (10h for 10s).
const MaxTTL = 24 * time.Hour

// CheckTTL reports why ttl cannot be a lease TTL: etcd counts leases in
// whole seconds, so anything else would be silently rounded; and at most
// MaxTTL.
func CheckTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl%time.Second != 0 {
		return fmt.Errorf("ttl %v must be a positive whole number of seconds (etcd leases are counted in seconds)", ttl)
	}
	if ttl > MaxTTL {
		return fmt.Errorf("ttl %v is over the maximum of %v: a crashed owner would hold its tasks that long", ttl, MaxTTL)
	}
	return nil
}

// revoke revokes a lease: etcd deletes every key attached to it.
func (c *Coordinator) revoke(ctx context.Context, op string, lease int64) error {
	return c.s.Do(ctx, store.Request{Op: op, Mutating: true}, func(ctx context.Context) error {
		_, err := c.client.Revoke(ctx, clientv3.LeaseID(lease))
		return err
	})
}

// Owner is the session's owner label.
func (s *Session) Owner() string { return s.owner }

// Lease is the session's etcd lease ID.
func (s *Session) Lease() int64 { return int64(s.lease) }

// TTL is the lease's TTL, as granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Deadline is the local deadline past which the session refuses to act.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// Done is closed when the session can no longer act: its lease was lost, its
// local deadline passed, or it was closed.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err is nil while the session may act, and an expired_owner *Error once it
// may not: its lease was lost, its local deadline passed (even before Done
// closes) or it was closed; errors.Is tells which (ErrSessionLeaseLost,
// ErrSessionDeadline, ErrSessionClosed). It asks nothing of etcd.
func (s *Session) Err() error { return s.usable("session", "", "") }

// cause says why Done is closed (ErrSessionLeaseLost, ErrSessionDeadline,
// ErrSessionClosed); nil while it is open.
func (s *Session) cause() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// Close stops the keepalive and revokes the lease, which deletes the owner
// key of every task the session holds. Closing twice is a no-op.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop(ErrSessionClosed)
	<-s.donec
	err := s.c.revoke(ctx, "session close", int64(s.lease))
	if DispositionOf(err) == ExpiredOwner { // already gone: nothing left to revoke
		err = nil
	}
	if err == nil {
		s.lg.Info("session closed; lease revoked")
	}
	return err
}

// usable refuses an action of a session that can no longer act.
func (s *Session) usable(op, tenant, task string) error {
	if err := s.cause(); err != nil {
		return store.NewError(ExpiredOwner, op, tenant, task, "the session can no longer act", err)
	}
	if time.Now().After(s.Deadline()) {
		return store.NewError(ExpiredOwner, op, tenant, task, "the session is past its local deadline", ErrSessionDeadline)
	}
	return nil
}

// stop ends the session once: the timer, the keepalive goroutine and Close
// may all race to it; the first cause wins and is counted once.
func (s *Session) stop(cause error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	// Counted before Done closes, so whoever sees Done sees the count.
	s.c.metrics.sessionEnded(s, sessionEndReason(cause, s.renews))
	s.cancel(cause)
	if cause != ErrSessionClosed {
		s.lg.Warn("session lost", zap.Error(cause))
	}
}

// sessionEndReason is the keepalive_failures_total reason of a session's
// end: "" for a close, or for the planned end of a session without
// keepalive.
func sessionEndReason(cause error, keepAlive bool) string {
	switch {
	case cause == ErrSessionLeaseLost:
		return "lease_lost"
	case cause == ErrSessionDeadline && keepAlive:
		return "deadline"
	}
	return ""
}
