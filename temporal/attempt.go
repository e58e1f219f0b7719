package temporal

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// Attempt is one activity attempt acting under its own grant: a session
// (lease) of its own through the gateway, and a claim of the workflow's
// task under it. Its lease is renewed only by Heartbeat.
type Attempt struct {
	c        *client.Client
	s        *client.Session
	g        coordinator.Grant
	ttl      time.Duration
	poll     time.Duration
	hearbeat func(ctx context.Context, details ...any)

	mu        sync.Mutex
	lastRenew time.Time
}

// Begin opens a session of ttl through c and claims tenant/task under it,
// waiting while another grant holds the task (an earlier attempt whose
// lease has not yet lapsed): every poll it heartbeats and claims again,
// until the claim is granted, ctx ends (Temporal cancels or times the
// attempt out) or the gateway refuses for another reason. ctx must be an
// activity's context. The grant's epoch is newer than that of every
// earlier claim of the task.
//
// Outside an activity (a test, a tool) Heartbeat only renews.
func Begin(ctx context.Context, c *client.Client, tenant, task string, ttl, poll time.Duration) (*Attempt, error) {
	if c == nil {
		return nil, store.NewError(store.InvalidInput, "attempt", "", "", "nil gateway client", nil)
	}
	hb := func(context.Context, ...any) {}
	if activity.IsActivity(ctx) {
		hb = activity.RecordHeartbeat
	}
	if ttl < time.Second || ttl%time.Second != 0 {
		return nil, store.NewError(store.InvalidInput, "attempt", "", "", fmt.Sprintf("ttl %v must be a positive whole number of seconds", ttl), nil)
	}
	if poll <= 0 {
		return nil, store.NewError(store.InvalidInput, "attempt", "", "", fmt.Sprintf("poll interval %v must be positive", poll), nil)
	}
	sent := time.Now()
	s, err := c.OpenSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	a := &Attempt{c: c, s: s, ttl: ttl, poll: poll, hearbeat: hb, lastRenew: sent}
	for {
		g, err := s.Claim(ctx, tenant, task)
		if err == nil {
			a.g = g
			return a, nil
		}
		if coordinator.DispositionOf(err) != coordinator.Busy {
			a.closeSession()
			return nil, err
		}
		if err := a.wait(ctx, "waiting for "+tenant+"/"+task); err != nil {
			a.closeSession()
			return nil, err
		}
	}
}

// Grant is the attempt's grant.
func (a *Attempt) Grant() coordinator.Grant { return a.g }

// Client is the gateway client the attempt acts through.
func (a *Attempt) Client() *client.Client { return a.c }

// Heartbeat records Temporal's heartbeat (with details) and renews the
// attempt's lease through the gateway, at most every TTL/4 (more often
// changes nothing: the lease's deadline counts from the renewal's send).
// A renewal the gateway refuses (the lease is gone) is returned: the
// attempt must stop acting, and its next call would be refused anyway.
func (a *Attempt) Heartbeat(ctx context.Context, details ...any) error {
	a.hearbeat(ctx, details...)
	a.mu.Lock()
	due := time.Since(a.lastRenew) >= a.ttl/4
	if due {
		a.lastRenew = time.Now()
	}
	a.mu.Unlock()
	if !due {
		return nil
	}
	err := a.s.Renew(ctx)
	if err != nil && coordinator.DispositionOf(err) != coordinator.ExpiredOwner && a.s.Err() == nil {
		return nil // a hold: the lease stands until its deadline; the next heartbeat tries again
	}
	return err
}

// wait heartbeats, then sleeps one poll interval (or until ctx ends).
func (a *Attempt) wait(ctx context.Context, why string) error {
	if err := a.Heartbeat(ctx, why); err != nil {
		return err
	}
	t := time.NewTimer(a.poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return store.NewError(coordinator.AuthorityUnavailable, "attempt", a.g.Tenant, a.g.Task, "the activity's context ended while "+why, ctx.Err())
	case <-t.C:
		return nil
	}
}

// during runs f while heartbeating every TTL/3 from one goroutine, which
// stops when f returns: a call in flight (a dispatch, a reconcile) keeps
// the lease, and an attempt that is not in a call renews only through its
// own Heartbeat.
func (a *Attempt) during(ctx context.Context, why string, f func() error) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(a.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				_ = a.Heartbeat(ctx, why)
			}
		}
	}()
	err := f()
	close(done)
	wg.Wait()
	return err
}

// End releases the grant and closes the session (revoking the lease), so
// the workflow's next activity claims the task at once. A superseded
// attempt's release is refused (stale_owner or expired_owner) and
// returned; nothing is released for it.
func (a *Attempt) End(ctx context.Context) error {
	err := a.c.Release(ctx, a.g)
	a.closeSession()
	return err
}

func (a *Attempt) closeSession() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.s.Close(ctx) // a lease already gone is nothing to close
}
