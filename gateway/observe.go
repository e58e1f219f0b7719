package gateway

import (
	"context"
	"fmt"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// ObservePrecondition reads, through the adapter of the effect's kind and
// so with the gateway's credentials, the world the effect depends on now:
// what a worker that holds no provider access proposes against, and what
// Dispatch revalidates (the same Adapter.Precondition, so the same
// digest for the same world). It writes nothing. The caller needs a
// current grant of its own (only the task's owner reads through the
// gateway's credentials); a bad effect or a kind no adapter serves is
// invalid_input, a provider that cannot show its world a hold
// (authority_unavailable), as at dispatch.
func (w workers) ObservePrecondition(ctx context.Context, req *leasegatev1.ObservePreconditionRequest) (*leasegatev1.ObservePreconditionResponse, error) {
	const op = "observe"
	g, err := grantOf(ctx, op, req.GetGrant())
	if err != nil {
		return nil, ConnectError(err)
	}
	e, err := wire.EffectFromProto(op, req.GetEffect())
	if err != nil {
		return nil, ConnectError(err)
	}
	if err := checkEffect(op, e); err != nil {
		return nil, ConnectError(err)
	}
	ad, ok := w.s.adapters[e.Kind]
	if !ok {
		return nil, ConnectError(store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("no adapter for effect kind %q", e.Kind), nil))
	}
	if err := w.s.c.Current(ctx, g); err != nil {
		return nil, ConnectError(err)
	}
	now, err := ad.Precondition(ctx, e)
	if err == nil && (now.Digest == "" || now.At.IsZero()) {
		err = fmt.Errorf("the adapter's observation has no digest or no time")
	}
	if err != nil {
		return nil, ConnectError(store.NewError(coordinator.AuthorityUnavailable, op, g.Tenant, g.Task, fmt.Sprintf("the %s provider could not show the world now; nothing written; hold", e.Kind), err))
	}
	return &leasegatev1.ObservePreconditionResponse{Precondition: wire.ObservationToProto(now)}, nil
}

// checkEffect refuses an effect Propose would refuse as input, before any
// provider is asked.
func checkEffect(op string, e ledger.Effect) error {
	if err := coordinator.CheckLabel("effect kind", e.Kind); err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
	}
	if e.Target == "" || len(e.Target) > ledger.MaxTargetLen {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("effect target must be 1-%d bytes, is %d", ledger.MaxTargetLen, len(e.Target)), nil)
	}
	if len(e.Params) > ledger.MaxParamsBytes {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("effect params are %d bytes; at most %d", len(e.Params), ledger.MaxParamsBytes), nil)
	}
	if _, err := ledger.Digest(e); err != nil {
		return store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("effect params: %v", err), nil)
	}
	return nil
}
