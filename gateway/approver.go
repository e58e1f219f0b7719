package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// approvers serves ApproverService; operators serves OperatorService. The
// approver (or operator) a decision records is the caller's identity.
type (
	approvers struct{ s *Server }
	operators struct{ s *Server }
)

// currentGrant is the task's current grant, read linearizably: an
// approver's or operator's decision is made under the task's owner, and the
// ledger's Txn checks that owner is still current when it applies.
func (s *Server) currentGrant(ctx context.Context, op, tenant, task string) (coordinator.Grant, error) {
	if err := tenantAllowed(ctx, op, tenant, task); err != nil {
		return coordinator.Grant{}, err
	}
	o, err := s.c.Owner(ctx, tenant, task)
	if err != nil {
		return coordinator.Grant{}, err
	}
	if !o.Owned() {
		return coordinator.Grant{}, store.NewError(coordinator.ExpiredOwner, op, tenant, task, "nobody holds the task: a decision is recorded under the task's current owner; make it once a worker holds the task", nil)
	}
	return coordinator.Grant{Realm: s.c.Realm(), Tenant: tenant, Task: task, Owner: o.Owner, Epoch: o.Epoch, Lease: o.Lease}, nil
}

func (a approvers) Authorize(ctx context.Context, req *leasegatev1.AuthorizeRequest) (*leasegatev1.AuthorizeResponse, error) {
	return connectAnswer(a.s.authorize(ctx, req))
}

func (a approvers) Reject(ctx context.Context, req *leasegatev1.RejectRequest) (*leasegatev1.RejectResponse, error) {
	return connectAnswer(a.s.reject(ctx, req))
}

func (o operators) Resolve(ctx context.Context, req *leasegatev1.ResolveRequest) (*leasegatev1.ResolveResponse, error) {
	return connectAnswer(o.s.resolve(ctx, req))
}

// authorize records the caller's approval of the digests req names.
func (s *Server) authorize(ctx context.Context, req *leasegatev1.AuthorizeRequest) (*leasegatev1.AuthorizeResponse, error) {
	const op = "authorize"
	g, err := s.currentGrant(ctx, op, req.GetTenant(), req.GetTask())
	if err != nil {
		return nil, err
	}
	rec, err := s.led.Authorize(ctx, g, req.GetOperation(), ledger.Approval{
		Approver: callerOf(ctx).ID, ParamsDigest: req.GetParamsDigest(), PreconditionDigest: req.GetPreconditionDigest(),
		Policy: req.GetPolicy(), At: time.Now(), Note: req.GetNote()})
	if err != nil {
		return nil, err
	}
	return &leasegatev1.AuthorizeResponse{Record: wire.RecordToProto(rec)}, nil
}

func (s *Server) reject(ctx context.Context, req *leasegatev1.RejectRequest) (*leasegatev1.RejectResponse, error) {
	const op = "reject"
	g, err := s.currentGrant(ctx, op, req.GetTenant(), req.GetTask())
	if err != nil {
		return nil, err
	}
	reason := fmt.Sprintf("rejected by %s: %s", callerOf(ctx).ID, req.GetReason())
	if strings.TrimSpace(req.GetReason()) == "" {
		return nil, store.NewError(store.InvalidInput, op, "", "", "reason is required", nil)
	}
	rec, err := s.led.Reject(ctx, g, req.GetOperation(), reason)
	if err != nil {
		return nil, err
	}
	return &leasegatev1.RejectResponse{Record: wire.RecordToProto(rec)}, nil
}

func (s *Server) resolve(ctx context.Context, req *leasegatev1.ResolveRequest) (*leasegatev1.ResolveResponse, error) {
	const op = "resolve"
	to, err := ledger.ParseState(req.GetTo())
	if err != nil {
		return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("to: %v", err), nil)
	}
	ev, err := wire.EvidenceFromProto(op, req.GetEvidence())
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.GetWhy()) == "" {
		return nil, store.NewError(store.InvalidInput, op, "", "", "why is required: what the evidence shows", nil)
	}
	g, err := s.currentGrant(ctx, op, req.GetTenant(), req.GetTask())
	if err != nil {
		return nil, err
	}
	if p := req.GetGrant(); p != nil {
		if err := decidedUnder(op, p, g); err != nil {
			return nil, err
		}
	}
	rec, err := s.led.Resolve(ctx, g, req.GetOperation(), to, ev, callerOf(ctx).ID, req.GetWhy())
	if err != nil {
		return nil, err
	}
	return &leasegatev1.ResolveResponse{Record: wire.RecordToProto(rec)}, nil
}

func (o operators) RevokeLease(ctx context.Context, req *leasegatev1.RevokeLeaseRequest) (*leasegatev1.RevokeLeaseResponse, error) {
	const op = "lease revoke"
	if err := allTenants(ctx, op); err != nil {
		return nil, ConnectError(err)
	}
	id, err := coordinator.ParseLeaseID(req.GetLease())
	if err != nil {
		return nil, ConnectError(store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("lease: %v", err), nil))
	}
	li, err := o.s.c.RevokeOwnerLease(ctx, id)
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.RevokeLeaseResponse{Revoked: wire.LeaseInfoToProto(li)}, nil
}

// ListLeases lists the keyspace's leases: a keyspace-wide read, an
// operator of all tenants only (a lease may hold tasks of any tenant).
func (o operators) ListLeases(ctx context.Context, _ *leasegatev1.ListLeasesRequest) (*leasegatev1.ListLeasesResponse, error) {
	if err := allTenants(ctx, "lease list"); err != nil {
		return nil, ConnectError(err)
	}
	leases, err := o.s.c.Leases(ctx)
	if err != nil {
		return nil, ConnectError(err)
	}
	out := &leasegatev1.ListLeasesResponse{Leases: make([]*leasegatev1.LeaseInfo, 0, len(leases))}
	for _, li := range leases {
		out.Leases = append(out.Leases, wire.LeaseInfoToProto(li))
	}
	return out, nil
}

// ShowLease shows one lease to an operator of every tenant it holds a task
// of: an operator of some tenants is refused a lease that also holds
// another tenant's task (and is told no more of it), and a lease that holds
// no task, whose tenant nothing shows.
func (o operators) ShowLease(ctx context.Context, req *leasegatev1.ShowLeaseRequest) (*leasegatev1.ShowLeaseResponse, error) {
	const op = "lease show"
	id, err := coordinator.ParseLeaseID(req.GetLease())
	if err != nil {
		return nil, ConnectError(store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("lease: %v", err), nil))
	}
	li, err := o.s.c.Lease(ctx, id)
	if err != nil {
		return nil, ConnectError(err)
	}
	caller := callerOf(ctx)
	if len(li.Tasks) == 0 {
		// A lease that holds no task names no tenant: its owner label is
		// for an operator of all tenants only.
		if err := allTenants(ctx, op); err != nil {
			return nil, ConnectError(err)
		}
	}
	for _, t := range li.Tasks {
		if !caller.Serves(t.Tenant) {
			return nil, ConnectError(refuseCaller(store.NewError(coordinator.PermissionDenied, op, "", "", fmt.Sprintf("lease %s holds tasks of tenants identity %q does not serve", coordinator.FormatLeaseID(id), caller.ID), nil)))
		}
	}
	return &leasegatev1.ShowLeaseResponse{Lease: wire.LeaseInfoToProto(li)}, nil
}

// decidedUnder refuses a decision made under grant p that is not cur, the
// task's current grant.
func decidedUnder(op string, p *leasegatev1.Grant, cur coordinator.Grant) error {
	g, err := wire.GrantFromProto(op, p)
	if err != nil {
		return err
	}
	if g.Tenant != cur.Tenant || g.Task != cur.Task {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("the grant is of %s/%s, the call names %s/%s", g.Tenant, g.Task, cur.Tenant, cur.Task), nil)
	}
	if g.Realm != cur.Realm || g.Epoch != cur.Epoch || g.Lease != cur.Lease {
		return store.NewError(coordinator.StaleOwner, op, cur.Tenant, cur.Task, fmt.Sprintf("the grant is epoch %d on lease %s; the task's owner is now %s at epoch %d",
			g.Epoch, coordinator.FormatLeaseID(g.Lease), cur.Owner, cur.Epoch), nil)
	}
	return nil
}

// allTenants refuses a keyspace-wide operation to an operator of some
// tenants only.
func allTenants(ctx context.Context, op string) error {
	if callerOf(ctx).Serves(AllTenants) {
		return nil
	}
	return refuseCaller(store.NewError(coordinator.PermissionDenied, op, "", "", "it acts on the whole keyspace: it needs an operator of all tenants (\"*\")", nil))
}

func (o operators) ShowRealm(ctx context.Context, _ *leasegatev1.ShowRealmRequest) (*leasegatev1.ShowRealmResponse, error) {
	if err := allTenants(ctx, "realm show"); err != nil {
		return nil, ConnectError(err)
	}
	chk, err := o.s.c.CheckOrigin(ctx)
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.ShowRealmResponse{Realm: chk.Realm, Warnings: chk.Warnings, Origin: wire.OriginToProto(chk.Origin)}, nil
}

func (o operators) RotateRealm(ctx context.Context, _ *leasegatev1.RotateRealmRequest) (*leasegatev1.RotateRealmResponse, error) {
	if err := allTenants(ctx, "realm rotate"); err != nil {
		return nil, ConnectError(err)
	}
	realm, err := o.s.c.RotateRealm(ctx)
	if err != nil {
		return nil, ConnectError(err)
	}
	return &leasegatev1.RotateRealmResponse{Realm: realm}, nil
}
