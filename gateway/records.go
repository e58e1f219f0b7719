package gateway

import (
	"context"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/ledger"
)

// The ledger's reads are served to every role, each through its own
// service (WorkerService, ApproverService and OperatorService all have
// GetRecord and ListRecords): an approver reads what it approves — the
// effect, its parameters and their digest, the precondition and when it
// was observed — from the gateway, not from the worker that proposed it,
// and an operator reads what it resolves. Each is limited to the tenants
// the caller serves.

// getRecord reads one operation's record and its journal, for a caller of
// its tenant.
func (s *Server) getRecord(ctx context.Context, req *leasegatev1.GetRecordRequest) (*leasegatev1.GetRecordResponse, error) {
	if err := tenantAllowed(ctx, "ops show", req.GetTenant(), req.GetTask()); err != nil {
		return nil, err
	}
	rec, journal, err := s.led.Record(ctx, req.GetTenant(), req.GetTask(), req.GetOperation())
	if err != nil {
		return nil, err
	}
	out := &leasegatev1.GetRecordResponse{Record: wire.RecordToProto(rec)}
	for _, t := range journal {
		out.Journal = append(out.Journal, wire.TransitionToProto(t))
	}
	return out, nil
}

// listRecords reads the records of a task or a tenant the caller serves
// (of every tenant for a caller of all tenants).
func (s *Server) listRecords(ctx context.Context, req *leasegatev1.ListRecordsRequest) (*leasegatev1.ListRecordsResponse, error) {
	if err := tenantAllowed(ctx, "ops list", req.GetTenant(), req.GetTask()); err != nil {
		return nil, err
	}
	rs, err := s.led.List(ctx, req.GetTenant(), req.GetTask(), ledger.State(req.GetState()))
	if err != nil {
		return nil, err
	}
	return &leasegatev1.ListRecordsResponse{Records: wire.RecordsToProto(rs)}, nil
}

func (a approvers) GetRecord(ctx context.Context, req *leasegatev1.GetRecordRequest) (*leasegatev1.GetRecordResponse, error) {
	return connectAnswer(a.s.getRecord(ctx, req))
}

func (a approvers) ListRecords(ctx context.Context, req *leasegatev1.ListRecordsRequest) (*leasegatev1.ListRecordsResponse, error) {
	return connectAnswer(a.s.listRecords(ctx, req))
}

func (o operators) GetRecord(ctx context.Context, req *leasegatev1.GetRecordRequest) (*leasegatev1.GetRecordResponse, error) {
	return connectAnswer(o.s.getRecord(ctx, req))
}

func (o operators) ListRecords(ctx context.Context, req *leasegatev1.ListRecordsRequest) (*leasegatev1.ListRecordsResponse, error) {
	return connectAnswer(o.s.listRecords(ctx, req))
}

// connectAnswer is a handler's answer: resp, or err as the API's error.
func connectAnswer[T any](resp *T, err error) (*T, error) {
	if err != nil {
		return nil, ConnectError(err)
	}
	return resp, nil
}
