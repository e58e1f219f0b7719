package coordinator

import (
	"context"
	"errors"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// DialOptions are the gRPC dial options leasegate needs on the etcd client
// it is given: add them to clientv3.Config.DialOptions. They let leasegate
// tell a request that never left this process (authority_unavailable: hold,
// nothing written) from one that was sent and whose answer never came back
// (outcome_unknown). On a client built without them, every failed write is
// reported as outcome_unknown, since nothing shows that it was not sent.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStatsHandler(sendObserver{})}
}

// sendTracker records, for one request, whether the stats handler saw the
// RPC start (tagged) and whether any attempt of it opened a stream on a
// transport (sent).
type sendTracker struct {
	tagged atomic.Bool
	sent   atomic.Bool
}

type trackerKey struct{}

func trackerOf(ctx context.Context) *sendTracker {
	t, _ := ctx.Value(trackerKey{}).(*sendTracker)
	return t
}

// sendObserver is a grpc stats.Handler that marks the sendTracker of the
// request's context.
type sendObserver struct{}

func (sendObserver) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	if t := trackerOf(ctx); t != nil {
		t.tagged.Store(true)
	}
	return ctx
}

func (sendObserver) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.OutHeader, *stats.OutPayload:
		if t := trackerOf(ctx); t != nil && s.IsClient() {
			t.sent.Store(true)
		}
	}
}

func (sendObserver) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (sendObserver) HandleConn(context.Context, stats.ConnStats)                       {}

// request names one call to etcd for error classification.
type request struct {
	op, tenant, task string
	mutating         bool
}

// do runs f against etcd and turns its failure into an *Error: a lease that
// is gone is expired_owner; a read that failed, or a write that never left
// this process, is authority_unavailable; a write that may have reached etcd
// is outcome_unknown.
func (r request) do(ctx context.Context, f func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task, "not sent: context already done", err)
	}
	t := &sendTracker{}
	err := f(context.WithValue(ctx, trackerKey{}, t))
	if err == nil {
		return nil
	}
	return r.classify(t, err)
}

func (r request) classify(t *sendTracker, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return newError(ExpiredOwner, r.op, r.tenant, r.task, "lease not found", err)
	}
	if isNoSpace(err) {
		return newError(NoSpace, r.op, r.tenant, r.task, "etcd's NOSPACE alarm is raised: it applies no write until an operator frees space and disarms it", err)
	}
	if !r.mutating {
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task, "read failed", err)
	}
	if definitelyNotApplied(err) {
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task, "etcd refused the request before applying it", err)
	}
	switch {
	case !t.tagged.Load():
		return newError(OutcomeUnknown, r.op, r.tenant, r.task,
			"the etcd client lacks coordinator.DialOptions(), so an unsent request cannot be told from a lost answer", err)
	case !t.sent.Load():
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task, "not sent: no connection to etcd", err)
	}
	return newError(OutcomeUnknown, r.op, r.tenant, r.task, "sent, but no answer came back", err)
}

// isNoSpace reports etcd's quota refusal: the backend reached its quota
// (checked before the request is proposed) or the NOSPACE alarm is raised
// (the apply refuses every write). Either way nothing was applied.
func isNoSpace(err error) bool {
	return errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace)
}

// definitelyNotApplied reports errors etcd returns before it proposes a
// request: it was not applied and never will be.
func definitelyNotApplied(err error) bool {
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if s, ok := status.FromError(err); ok {
		code = s.Code()
	} else {
		return false
	}
	switch code {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange:
		return true
	}
	return false
}

// TxnRequest is one Txn for packages built on coordinator (fencedtxn's
// commit and ledger), so their transport failures are classified like the
// coordinator's own.
type TxnRequest struct {
	Op, Tenant, Task string
	If               []clientv3.Cmp
	Then, Else       []clientv3.Op
	ReadOnly         bool // no Then op writes: a failure is authority_unavailable
}

// Txn runs r. Its error, if any, is an *Error: authority_unavailable when
// the request never left this process (or was a read), outcome_unknown when
// it may have reached etcd, expired_owner when etcd named a lease gone.
func (c *Coordinator) Txn(ctx context.Context, r TxnRequest) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	req := request{op: r.Op, tenant: r.Tenant, task: r.Task, mutating: !r.ReadOnly}
	err := req.do(ctx, func(ctx context.Context) (err error) {
		resp, err = c.client.Txn(ctx).If(r.If...).Then(r.Then...).Else(r.Else...).Commit()
		return err
	})
	return resp, err
}
