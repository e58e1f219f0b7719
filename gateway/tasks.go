package gateway

import (
	"context"

	"connectrpc.com/connect"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
)

// The task reads served to approvers and operators (ApproverService's and
// OperatorService's ListTasks, GetOwnership, WatchOwnership): the incident
// commander approving an effect, and the operator settling one, see who
// holds which task at which epoch. Each is WorkerService's handler, with
// its tenant check (tenantAllowed) on the caller's tenants: authenticate
// has already checked the caller's role for the service called.

func (a approvers) ListTasks(ctx context.Context, req *leasegatev1.ListTasksRequest) (*leasegatev1.ListTasksResponse, error) {
	return workers(a).ListTasks(ctx, req)
}

func (a approvers) GetOwnership(ctx context.Context, req *leasegatev1.GetOwnershipRequest) (*leasegatev1.GetOwnershipResponse, error) {
	return workers(a).GetOwnership(ctx, req)
}

func (a approvers) WatchOwnership(ctx context.Context, req *leasegatev1.WatchOwnershipRequest, stream *connect.ServerStream[leasegatev1.WatchOwnershipResponse]) error {
	return workers(a).WatchOwnership(ctx, req, stream)
}

func (o operators) ListTasks(ctx context.Context, req *leasegatev1.ListTasksRequest) (*leasegatev1.ListTasksResponse, error) {
	return workers(o).ListTasks(ctx, req)
}

func (o operators) GetOwnership(ctx context.Context, req *leasegatev1.GetOwnershipRequest) (*leasegatev1.GetOwnershipResponse, error) {
	return workers(o).GetOwnership(ctx, req)
}

func (o operators) WatchOwnership(ctx context.Context, req *leasegatev1.WatchOwnershipRequest, stream *connect.ServerStream[leasegatev1.WatchOwnershipResponse]) error {
	return workers(o).WatchOwnership(ctx, req, stream)
}
