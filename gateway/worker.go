package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
)

// WatchSynced is the type of the marker WatchOwnership sends first when
// asked (mark_synced): the watch is established.
const WatchSynced = "synced"

// workers serves WorkerService: sessions, claims, protected state and
// effects, each handler a mapping onto the Go API.
type workers struct{ s *Server }

func marginOf(ttl time.Duration) time.Duration { return max(ttl/10, DefaultMargin) }

// renewal is the answer to a grant or renewal of a session's lease sent to
// etcd at sent: its deadline counts from the send.
func (s *Server) renewal(c sessionClaims, ttl time.Duration, sent time.Time) *leasegatev1.Renewal {
	margin := marginOf(ttl)
	deadline := sent.Add(ttl - margin)
	c.TTL = int64(ttl / time.Second)
	return &leasegatev1.Renewal{Token: s.tokens.sign(c.withDeadline(deadline)), Ttl: wire.Dur(ttl), Margin: wire.Dur(margin),
		Deadline: wire.TS(deadline), StopWithin: wire.Dur(max(time.Until(deadline), 0))}
}

func (w workers) OpenSession(ctx context.Context, req *leasegatev1.OpenSessionRequest) (*leasegatev1.OpenSessionResponse, error) {
	const op = "session"
	if req.GetTtl() == nil {
		return nil, ConnectError(store.NewError(store.InvalidInput, op, "", "", "ttl is required (whole seconds, e.g. \"10s\")", nil))
	}
	ttl := req.GetTtl().AsDuration()
	if err := coordinator.CheckTTL(ttl); err != nil {
		return nil, ConnectError(store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil))
	}
	id := callerOf(ctx)
	owner := id.ID
	// The session's unit of the identity's session limit is on its own
	// lease: closing or expiring the session frees it. The lease is granted
	// only once the count found room, so a refusal grants none.
	var sess *coordinator.Session
	_, err := w.s.take(ctx, op, id, limitSessions, func() (int64, string, error) {
		var err error
		if sess, err = w.s.c.NewSession(ctx, owner, ttl, coordinator.WithoutKeepAlive(), coordinator.WithMargin(marginOf(ttl))); err != nil {
			return 0, "", err
		}
		sess.Detach() // its renewals are the worker's, through any replica
		return sess.Lease(), store.Of(w.s.c).Keys().Limit(limitSessions, owner, coordinator.FormatLeaseID(sess.Lease())), nil
	}, 0, "")
	if err != nil {
		if sess != nil { // granted, but the limit was reached meanwhile, or its unit's write failed: no session
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.s.opts.callTimeout)
			defer cancel()
			if rerr := w.s.c.RevokeLease(rctx, sess.Lease()); rerr != nil && coordinator.DispositionOf(rerr) != coordinator.ExpiredOwner {
				w.s.lg.Warn("session lease not revoked after a refused open; it expires at its TTL",
					zap.String("lease-id", coordinator.FormatLeaseID(sess.Lease())), zap.Error(rerr))
			}
		}
		return nil, ConnectError(err)
	}
	deadline := sess.Deadline()
	c := sessionClaims{Owner: owner, Lease: sess.Lease(), TTL: int64(ttl / time.Second)}
	r := w.s.renewal(c, ttl, deadline.Add(marginOf(ttl)-ttl))
	return &leasegatev1.OpenSessionResponse{
		Session: &leasegatev1.Session{Token: r.Token, Lease: wire.LeaseHex(sess.Lease()), Owner: owner, Ttl: wire.Dur(ttl)},
		Renewal: r,
	}, nil
}

// renew renews the session of token once, in answer to the caller.
func (s *Server) renew(ctx context.Context, token string) (*leasegatev1.Renewal, error) {
	c, err := s.tokens.check("renew", token, callerOf(ctx).ID)
	if err != nil {
		return nil, err
	}
	ttl, sent, err := store.Of(s.c).RenewLease(ctx, c.Lease)
	if err != nil {
		return nil, err
	}
	return s.renewal(c, ttl, sent), nil
}

func (w workers) RenewSession(ctx context.Context, req *leasegatev1.RenewSessionRequest) (*leasegatev1.RenewSessionResponse, error) {
	r, err := w.s.renew(ctx, req.GetSessionToken())
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.RenewSessionResponse{Renewal: r}, nil
}

// KeepAlive renews once per message received, never on its own: when the
// worker stops sending, the lease runs out.
func (w workers) KeepAlive(ctx context.Context, stream *connect.BidiStream[leasegatev1.KeepAliveRequest, leasegatev1.KeepAliveResponse]) error {
	for {
		req, err := stream.Receive()
		switch {
		case errors.Is(err, io.EOF) || ctx.Err() != nil:
			return nil // the worker closed its side or went away: nothing more is renewed
		case err != nil:
			return err // a message refused (oversized, unknown fields): nothing renewed for it
		}
		r, err := w.s.renew(ctx, req.GetSessionToken())
		if err != nil {
			return ConnectError(err)
		}
		if err := stream.Send(&leasegatev1.KeepAliveResponse{Renewal: r}); err != nil {
			return err
		}
	}
}

func (w workers) CloseSession(ctx context.Context, req *leasegatev1.CloseSessionRequest) (*leasegatev1.CloseSessionResponse, error) {
	c, err := w.s.tokens.check("session close", req.GetSessionToken(), callerOf(ctx).ID)
	if err == nil {
		err = w.s.c.RevokeLease(ctx, c.Lease)
	}
	if err != nil && coordinator.DispositionOf(err) != coordinator.ExpiredOwner { // already gone: closed
		return nil, ConnectError(err)
	}
	return &leasegatev1.CloseSessionResponse{}, nil
}

func (w workers) Claim(ctx context.Context, req *leasegatev1.ClaimRequest) (*leasegatev1.ClaimResponse, error) {
	const op = "claim"
	c, err := w.s.tokens.check(op, req.GetSessionToken(), callerOf(ctx).ID)
	if err != nil {
		return nil, ConnectError(err)
	}
	if err := tenantAllowed(ctx, op, req.GetTenant(), req.GetTask()); err != nil {
		return nil, ConnectError(err)
	}
	if err := coordinator.CheckLabel("task", req.GetTask()); err != nil {
		return nil, ConnectError(store.NewError(store.InvalidInput, op, "", "", err.Error(), nil))
	}
	sess, err := w.s.c.Attach(c.Owner, c.Lease, c.ttl(), c.deadline())
	if err != nil {
		return nil, ConnectError(err)
	}
	// The grant's unit of the identity's grant limit is on the session's
	// lease, one per task: a retried claim finds it held; a release, or
	// the session's end, frees it.
	unit := store.Of(w.s.c).Keys().Limit(limitGrants, c.Owner, grantUnit(req.GetTenant(), req.GetTask()))
	took, err := w.s.take(ctx, op, callerOf(ctx), limitGrants, nil, c.Lease, unit)
	if err != nil {
		return nil, ConnectError(err)
	}
	g, err := sess.Claim(ctx, req.GetTenant(), req.GetTask())
	if err != nil {
		if took && coordinator.DispositionOf(err) != coordinator.OutcomeUnknown { // not claimed: the unit it took holds nothing
			w.s.free(ctx, op, unit, c.Lease)
		}
		return nil, ConnectError(err)
	}
	return &leasegatev1.ClaimResponse{Grant: wire.GrantToProto(g)}, nil
}

// grantOf reads the request's grant and refuses one that is not the
// caller's.
func grantOf(ctx context.Context, op string, p *leasegatev1.Grant) (coordinator.Grant, error) {
	g, err := wire.GrantFromProto(op, p)
	if err != nil {
		return g, err
	}
	return g, ownGrant(ctx, op, g)
}

func (w workers) Release(ctx context.Context, req *leasegatev1.ReleaseRequest) (*leasegatev1.ReleaseResponse, error) {
	g, err := grantOf(ctx, "release", req.GetGrant())
	if err != nil {
		return nil, ConnectError(err)
	}
	err = w.s.c.Release(ctx, g)
	switch coordinator.DispositionOf(err) {
	case coordinator.OK, coordinator.ExpiredOwner:
		// The task has no owner on the grant's lease: its unit of the grant
		// limit is free. (stale_owner: a newer grant, perhaps on the same
		// session, may hold the task and its unit.)
		w.s.free(ctx, "release", store.Of(w.s.c).Keys().Limit(limitGrants, g.Owner, grantUnit(g.Tenant, g.Task)), g.Lease)
	}
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.ReleaseResponse{}, nil
}

// RenewGrant renews the lease of the caller's own grant once, in answer to
// this call (the CLI's renew, which keeps no session token).
func (w workers) RenewGrant(ctx context.Context, req *leasegatev1.RenewGrantRequest) (*leasegatev1.RenewGrantResponse, error) {
	g, err := grantOf(ctx, "renew", req.GetGrant())
	if err == nil {
		err = w.s.c.Renew(ctx, g)
	}
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.RenewGrantResponse{}, nil
}

// ListTasks reads the tasks of a tenant the caller serves (of every tenant
// for an identity of all tenants).
func (w workers) ListTasks(ctx context.Context, req *leasegatev1.ListTasksRequest) (*leasegatev1.ListTasksResponse, error) {
	if err := tenantAllowed(ctx, "list", req.GetTenant(), ""); err != nil {
		return nil, ConnectError(err)
	}
	tasks, err := w.s.c.List(ctx, req.GetTenant())
	if err != nil {
		return nil, ConnectError(err)
	}
	out := &leasegatev1.ListTasksResponse{Tasks: make([]*leasegatev1.Ownership, 0, len(tasks))}
	for _, o := range tasks {
		out.Tasks = append(out.Tasks, wire.OwnershipToProto(o))
	}
	return out, nil
}

func (w workers) GetOwnership(ctx context.Context, req *leasegatev1.GetOwnershipRequest) (*leasegatev1.GetOwnershipResponse, error) {
	if err := tenantAllowed(ctx, "owner", req.GetTenant(), req.GetTask()); err != nil {
		return nil, ConnectError(err)
	}
	o, err := w.s.c.Owner(ctx, req.GetTenant(), req.GetTask())
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.GetOwnershipResponse{Ownership: wire.OwnershipToProto(o)}, nil
}

func (w workers) WatchOwnership(ctx context.Context, req *leasegatev1.WatchOwnershipRequest, stream *connect.ServerStream[leasegatev1.WatchOwnershipResponse]) error {
	const op = "watch"
	if err := tenantAllowed(ctx, op, req.GetTenant(), ""); err != nil {
		return ConnectError(err)
	}
	if t := req.GetTenant(); t != "" {
		if err := coordinator.CheckLabel("tenant", t); err != nil {
			return ConnectError(store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil))
		}
	}
	// The stream's unit of the identity's watch limit is on this replica's
	// lease: the stream's end frees it, and so does the replica's death.
	lease, err := w.s.dispatch.get(ctx)
	if err != nil {
		return ConnectError(store.NewError(coordinator.AuthorityUnavailable, op, req.GetTenant(), "", "this replica's lease could not be granted", err))
	}
	unit := store.Of(w.s.c).Keys().Limit(limitWatches, callerOf(ctx).ID, watchUnit(lease))
	if _, err := w.s.take(ctx, op, callerOf(ctx), limitWatches, nil, lease, unit); err != nil {
		return ConnectError(err)
	}
	defer w.s.free(ctx, op, unit, lease)
	events, err := w.s.c.Watch(ctx, req.GetTenant())
	if err != nil {
		return ConnectError(err)
	}
	// Watch has listed the owners and watches every change after the
	// listing: whatever the caller does once it reads the marker, the
	// stream reports.
	if req.GetMarkSynced() {
		if err := stream.Send(&leasegatev1.WatchOwnershipResponse{Type: WatchSynced}); err != nil {
			return err
		}
	}
	for ev := range events {
		if err := stream.Send(&leasegatev1.WatchOwnershipResponse{Type: string(ev.Type), Ownership: wire.OwnershipToProto(ev.Ownership)}); err != nil {
			return err
		}
	}
	return nil
}

func (w workers) Commit(ctx context.Context, req *leasegatev1.CommitRequest) (*leasegatev1.CommitResponse, error) {
	g, err := grantOf(ctx, "commit", req.GetGrant())
	if err != nil {
		return nil, ConnectError(err)
	}
	rc, err := fencedtxn.Commit(ctx, w.s.c, g, fencedtxn.Intent{Tenant: g.Tenant, Task: g.Task, Operation: req.GetOperation(),
		Value: req.GetValue(), ExpectedVersion: req.GetExpectedVersion()})
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.CommitResponse{Receipt: wire.ReceiptToProto(rc)}, nil
}

func (w workers) GetState(ctx context.Context, req *leasegatev1.GetStateRequest) (*leasegatev1.GetStateResponse, error) {
	if err := tenantAllowed(ctx, "get", req.GetTenant(), req.GetTask()); err != nil {
		return nil, ConnectError(err)
	}
	st, err := fencedtxn.Get(ctx, w.s.c, req.GetTenant(), req.GetTask())
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.GetStateResponse{State: wire.StateToProto(st)}, nil
}

func (w workers) Propose(ctx context.Context, req *leasegatev1.ProposeRequest) (*leasegatev1.ProposeResponse, error) {
	const op = "propose"
	g, err := grantOf(ctx, op, req.GetGrant())
	if err != nil {
		return nil, ConnectError(err)
	}
	e, err := wire.EffectFromProto(op, req.GetEffect())
	if err == nil {
		e, err = w.s.proposedUnder(op, e)
	}
	if err != nil {
		return nil, ConnectError(err)
	}
	pre, err := wire.ObservationFromProto(op, req.GetPrecondition())
	if err != nil {
		return nil, ConnectError(err)
	}
	requires, err := wire.RequirementsFromProto(op, req.GetRequires())
	if err != nil {
		return nil, ConnectError(err)
	}
	rec, err := w.s.led.ProposeRequiring(ctx, g, req.GetOperation(), e, pre, requires)
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.ProposeResponse{Record: wire.RecordToProto(rec)}, nil
}

// Dispatch runs detached from the call's context: once the gateway has the
// request it owns the dispatch, and the claim, the provider call and the
// recording of its answer finish whether or not the worker is still there
// (each step bounded by the coordinator's and the ledger's timeouts). The
// trace context is kept.
func (w workers) Dispatch(ctx context.Context, req *leasegatev1.DispatchRequest) (*leasegatev1.DispatchResponse, error) {
	g, err := grantOf(ctx, "dispatch", req.GetGrant())
	if err != nil {
		return nil, ConnectError(err)
	}
	rec, err := w.s.led.Dispatch(context.WithoutCancel(ctx), g, req.GetOperation())
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.DispatchResponse{Record: wire.RecordToProto(rec)}, nil
}

func (w workers) GetRecord(ctx context.Context, req *leasegatev1.GetRecordRequest) (*leasegatev1.GetRecordResponse, error) {
	return connectAnswer(w.s.getRecord(ctx, req))
}

func (w workers) ListRecords(ctx context.Context, req *leasegatev1.ListRecordsRequest) (*leasegatev1.ListRecordsResponse, error) {
	return connectAnswer(w.s.listRecords(ctx, req))
}

func (w workers) Reconcile(ctx context.Context, req *leasegatev1.ReconcileRequest) (*leasegatev1.ReconcileResponse, error) {
	g, err := grantOf(ctx, "reconcile", req.GetGrant())
	if err != nil {
		return nil, ConnectError(err)
	}
	rs, err := w.s.led.Reconcile(ctx, g)
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.ReconcileResponse{Records: wire.RecordsToProto(rs)}, nil
}
