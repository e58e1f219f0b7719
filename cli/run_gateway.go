package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// run through the gateway: the same claim, child, monitor and release as
// through etcd, with the gateway's session API as the lease. This process
// alone renews it (client.WithKeepAlive: one renewal per TTL/3, sent by
// this process; the gateway never renews on its own), so a paused or dead
// run loses the task at its TTL exactly as through etcd. Ownership is
// watched on the gateway's ownership stream of the task's tenant, opened
// and synced before the claim, so that nothing the claim is followed by
// can be missed.

func runViaGateway(c *cli.Context, spec runSpec) error {
	g := globalsOf(c)
	return withGatewayClient(c, func(gw *client.Client) error {
		ctx, cancel := commandContext(c)
		defer cancel()
		s, err := gw.OpenSession(ctx, spec.ttl, client.WithKeepAlive())
		if err != nil {
			return err
		}
		lg := g.lg.Named("run").With(zap.String("tenant", spec.tenant), zap.String("task", spec.task), zap.String("owner", s.Owner()))
		// Closing revokes the lease: whatever happens below, no owner key
		// of this run outlives it.
		defer func() {
			cctx, ccancel := cleanupContext(c)
			defer ccancel()
			if err := s.Close(cctx); err != nil {
				lg.Warn("revoking the session's lease failed; it expires after its TTL", zap.Error(err))
			}
		}()
		fctx, stopFeed := context.WithCancel(context.WithoutCancel(c.Context))
		defer stopFeed()
		f := newOwnerFeed(fctx, gw, spec.tenant)
		if err := f.wait(ctx, s.Done()); err != nil {
			return err
		}
		grant, f, err := claimThroughGateway(c, gw, s, f, spec, lg)
		if err != nil {
			return err
		}
		lg = lg.With(zap.Int64("epoch", grant.Epoch), zap.String("lease-id", coordinator.FormatLeaseID(grant.Lease)))

		monitor := func(ctx context.Context) *coordinator.Error { return monitorThroughGateway(ctx, gw, s, f, grant, lg) }
		status, lost, err := superviseChild(c, monitor, gatewayChildEnv(g, grant), spec, lg)
		if err != nil {
			return err
		}
		if lost != nil {
			return &ownershipLost{cause: lost, grant: grant, child: status}
		}
		return released(c, gw.Release, runOutput{Disposition: coordinator.Released, Grant: grant, Child: status})
	})
}

// ownerFeed is one ownership stream of a tenant from the gateway, synced
// before it is used: every change after wait returns is in events, until
// broken closes (err says why).
type ownerFeed struct {
	ctx    context.Context // the feed's, and its replacements'
	events chan coordinator.OwnershipEvent
	synced chan struct{}
	broken chan struct{}
	err    error // set before broken closes
}

func newOwnerFeed(ctx context.Context, gw *client.Client, tenant string) *ownerFeed {
	f := &ownerFeed{ctx: ctx, events: make(chan coordinator.OwnershipEvent, 64), synced: make(chan struct{}), broken: make(chan struct{})}
	go func() {
		defer close(f.broken)
		f.err = gw.Watch(ctx, tenant, func(ev coordinator.OwnershipEvent) error {
			select {
			case f.events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, client.WithSynced(func() { close(f.synced) }))
		if f.err == nil {
			f.err = ctx.Err()
		}
	}()
	return f
}

// wait returns once the feed is synced, or the error that ended it first
// (a hold when the gateway cannot be reached), ctx's or done's closing.
func (f *ownerFeed) wait(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-f.synced:
		return nil
	case <-f.broken:
		return f.err
	case <-done:
		return errFeedBroken
	case <-ctx.Done():
		return store.NewError(coordinator.AuthorityUnavailable, "run", "", "", "the gateway's ownership watch was not established in time; nothing claimed", context.Cause(ctx))
	}
}

// claimThroughGateway claims the task on s: at once, or with --wait when
// it is free (within --wait-timeout, if given). A busy claim waits for the
// feed to show the task vacated, then claims again; the feed was synced
// before the first claim, so the holder's going is never missed. A broken
// feed is replaced by a new one, and the task claimed again once it is
// synced. It returns the feed in use.
func claimThroughGateway(c *cli.Context, gw *client.Client, s *client.Session, f *ownerFeed, spec runSpec, lg *zap.Logger) (coordinator.Grant, *ownerFeed, error) {
	wctx, wcancel := waitContext(c, spec)
	defer wcancel()
	for {
		ctx, cancel := commandContext(c)
		g, err := s.Claim(ctx, spec.tenant, spec.task)
		cancel()
		var busy *coordinator.Error
		if !spec.wait || !errors.As(err, &busy) || busy.Disposition != coordinator.Busy {
			return g, f, err
		}
		lg.Debug("busy; waiting for the owner key to go", zap.String("tenant", spec.tenant), zap.String("task", spec.task),
			zap.String("disposition", string(coordinator.Busy)))
		for {
			werr := waitVacated(wctx, s, f, spec.task)
			if werr == nil {
				break
			}
			if !errors.Is(werr, errFeedBroken) {
				busy.Err = werr
				return coordinator.Grant{}, f, busy
			}
			lg.Info("ownership watch through the gateway ended; watching again", zap.Error(f.err))
			select {
			case <-wctx.Done():
				busy.Err = context.Cause(wctx)
				return coordinator.Grant{}, f, busy
			case <-time.After(watchRetry):
			}
			f = newOwnerFeed(f.ctx, gw, spec.tenant)
			if f.wait(wctx, s.Done()) == nil {
				break // synced: claim again
			}
		}
	}
}

// waitVacated returns nil once f shows task vacated, errFeedBroken if f
// broke first (the caller opens another), and the cause of ctx or the
// session's end if they come first.
func waitVacated(ctx context.Context, s *client.Session, f *ownerFeed, task string) error {
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-s.Done():
			return s.Err()
		case ev := <-f.events:
			if ev.Ownership.Task == task && ev.Type == coordinator.EventVacated {
				return nil
			}
		case <-f.broken:
			return errFeedBroken
		}
	}
}

// errFeedBroken ends a wait whose feed broke: the caller opens another.
var errFeedBroken = errors.New("the gateway's ownership watch ended")

// monitorThroughGateway returns why grant stopped being current, as soon as
// the gateway's ownership stream shows it — the owner key deleted (lease
// expired or revoked), rewritten by a newer claim, made stale by a realm
// rotation — or the session ends (its lease lost, or its local deadline
// passed without a renewal); nil once ctx is done. A stream that breaks is
// opened again, synced, and the task read once through the gateway:
// whatever the stream missed while it was down, the read shows.
func monitorThroughGateway(ctx context.Context, gw *client.Client, s *client.Session, f *ownerFeed, g coordinator.Grant, lg *zap.Logger) *coordinator.Error {
	for {
		lost := watchFeed(ctx, s, f, g)
		if lost != nil || ctx.Err() != nil {
			return lost
		}
		lg.Info("ownership watch through the gateway ended; watching again", zap.Error(f.err))
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-s.Done():
				return gatewaySessionLost(g, s)
			case <-time.After(watchRetry):
			}
			f = newOwnerFeed(ctx, gw, g.Tenant)
			if f.wait(ctx, s.Done()) != nil {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, max(time.Until(s.Deadline()), watchRetry))
			o, err := gw.Owner(rctx, g.Tenant, g.Task)
			cancel()
			if err != nil {
				continue // a hold: the session's deadline, not this loop, ends ownership meanwhile
			}
			if lost := ownershipChanged(g, o, o.Revision); lost != nil {
				return lost
			}
			break
		}
	}
}

// watchFeed returns why g stopped being current as f shows it, or nil once
// ctx is done or f broke.
func watchFeed(ctx context.Context, s *client.Session, f *ownerFeed, g coordinator.Grant) *coordinator.Error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.Done():
			return gatewaySessionLost(g, s)
		case <-f.broken:
			return nil
		case ev := <-f.events:
			o := ev.Ownership
			if o.Tenant != g.Tenant || o.Task != g.Task || o.Revision < g.Epoch {
				continue
			}
			if ev.Type == coordinator.EventVacated {
				o.Owner = ""
			}
			if lost := ownershipChanged(g, o, o.Revision); lost != nil {
				return lost
			}
		}
	}
}

// ownershipChanged is why g is not the grant o shows (at revision rev),
// nil if it is.
func ownershipChanged(g coordinator.Grant, o coordinator.Ownership, rev int64) *coordinator.Error {
	refuse := func(d coordinator.Disposition, format string, args ...any) *coordinator.Error {
		return store.NewError(d, "run", g.Tenant, g.Task, fmt.Sprintf(format, args...), nil)
	}
	switch {
	case o.Stale:
		return refuse(coordinator.GenerationMismatch, "the realm changed (seen at revision %d)", rev)
	case o.Owner == "":
		return refuse(coordinator.ExpiredOwner, "the owner key of epoch %d was deleted (seen at revision %d: lease expired or revoked, or the grant released)",
			g.Epoch, rev)
	case o.Epoch != g.Epoch || o.Lease != g.Lease:
		return refuse(coordinator.StaleOwner, "the owner key was rewritten (seen at revision %d): %q holds it at epoch %d", rev, o.Owner, o.Epoch)
	}
	return nil
}

func gatewaySessionLost(g coordinator.Grant, s *client.Session) *coordinator.Error {
	e := store.NewError(coordinator.ExpiredOwner, "run", g.Tenant, g.Task, "the session can no longer act", nil)
	e.Err = s.Err()
	return e
}

// gatewayChildEnv is the grant, as the child sees it, and the gateway's URL
// (LEASEGATE_GATEWAY) so that a 'leasegate --gateway "$LEASEGATE_GATEWAY"
// commit --grant -' inside reaches the same gateway, with a certificate of
// its own: this process's key is not passed on, nor the session token
// (renewals stay this process's).
func gatewayChildEnv(g *globals, grant coordinator.Grant) []string {
	return append(grantEnv(grant), "LEASEGATE_GATEWAY="+g.gateway)
}
