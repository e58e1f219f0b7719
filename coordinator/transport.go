package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/leasegate/leasegate/internal/core"
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

// errRequestTimeout is the cause of a request cut off by the coordinator's
// request timeout.
var errRequestTimeout = errors.New("coordinator: request timeout")

// do runs f against etcd, bounded by the request timeout when ctx has no
// deadline, and turns its failure into an *Error (classifySendError).
func (c *Coordinator) do(ctx context.Context, r request, f func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task, "not sent: context already done", err)
	}
	own := false
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.opts.requestTimeout, errRequestTimeout)
		defer cancel()
		own = true
	}
	t := &sendTracker{}
	err := f(context.WithValue(ctx, trackerKey{}, t))
	if err == nil {
		return nil
	}
	if own && timedOut(ctx) {
		err = requestTimeoutError(c.opts.requestTimeout, err)
	}
	return c.classifySendError(r, t, err)
}

// requestTimeoutError is err, a request's failure at its request timeout
// d, named as the timeout's: context.DeadlineExceeded is in its chain even
// when err is etcd's own answer to the deadline.
func requestTimeoutError(d time.Duration, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (%w)", err, context.DeadlineExceeded)
	}
	return fmt.Errorf("no answer within the request timeout of %v: %w", d, err)
}

// timedOut reports whether ctx, a request's context with the request
// timeout as its deadline, has reached that deadline. gRPC carries the
// deadline to etcd, whose own answer to it ("etcdserver: request timed
// out") can come back an instant before ctx's timer fires: an answer at or
// after the deadline is the timeout's all the same.
func timedOut(ctx context.Context) bool {
	if errors.Is(context.Cause(ctx), errRequestTimeout) {
		return true
	}
	d, _ := ctx.Deadline()
	return !time.Now().Before(d)
}

// classifySendError names a failed request by its error, first match wins:
//
//   - etcd named the lease gone: expired_owner;
//   - etcd did not accept the credentials (a bad password, an unknown
//     user, no user, a token it no longer accepts that the client could
//     not renew): unauthenticated;
//   - etcd's auth refused it (the role lacks the prefix): permission_denied;
//   - etcd's NOSPACE alarm: no_space (a hold);
//   - a request etcd can never accept (too many ops, too large, a key
//     twice, another InvalidArgument), or one gRPC would not send (over its
//     send limit): invalid_input;
//   - an endpoint that does not speak etcd's API: authority_unavailable;
//   - a read: authority_unavailable — a read is never outcome_unknown;
//   - a write etcd refused before proposing it (not leader, too many
//     requests): authority_unavailable;
//   - a write on a client without DialOptions, so nothing shows whether it
//     was sent: outcome_unknown;
//   - a write never sent: authority_unavailable;
//   - a write that was sent and got no answer: outcome_unknown.
func (c *Coordinator) classifySendError(r request, t *sendTracker, err error) error {
	code := codeOf(err)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return newError(ExpiredOwner, r.op, r.tenant, r.task, "lease not found", err)
	case unauthenticated(err, code):
		return newError(Unauthenticated, r.op, r.tenant, r.task, "etcd did not accept the credentials"+c.userNamed(), err)
	case deniedByAuth(err, code):
		return newError(PermissionDenied, r.op, r.tenant, r.task,
			fmt.Sprintf("etcd's auth refused the request; %s may be mistyped, or the user's role lacks readwrite on %s/", c.keys.prefix, c.keys.prefix), err)
	case isNoSpace(err):
		return newError(NoSpace, r.op, r.tenant, r.task, "etcd's NOSPACE alarm is raised: it applies no write until an operator frees space and disarms it", err)
	case neverAcceptable(err, code):
		return newError(InvalidInput, r.op, r.tenant, r.task, "etcd can never accept this request", err)
	case notEtcd(err, code):
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task,
			fmt.Sprintf("endpoint %s did not answer as etcd (check --endpoints)", strings.Join(c.client.Endpoints(), ",")), err)
	case !r.mutating:
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task, "read failed", err)
	case definitelyNotApplied(code) || errors.Is(err, rpctypes.ErrTooManyRequests):
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task, "etcd refused the request before applying it", err)
	case !t.tagged.Load():
		return newError(OutcomeUnknown, r.op, r.tenant, r.task,
			"the etcd client lacks coordinator.DialOptions(), so an unsent request cannot be told from a lost answer", err)
	case !t.sent.Load():
		return newError(AuthorityUnavailable, r.op, r.tenant, r.task, "not sent: no connection to etcd", err)
	}
	return newError(OutcomeUnknown, r.op, r.tenant, r.task, "sent, but no answer came back", err)
}

// codeOf is the gRPC code of an etcd client error, codes.Unknown if none.
func codeOf(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unknown
}

// loginErrors are etcd's answers that it does not know who the client is:
// the password or user is wrong, no user was given, or the token is one
// etcd no longer accepts (the etcd client renews an expired token itself,
// so one that reaches leasegate could not be renewed). Some are
// InvalidArgument on the wire, so they are matched by value before codes
// are.
var loginErrors = []error{
	rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound, rpctypes.ErrInvalidAuthToken,
}

func unauthenticated(err error, code codes.Code) bool {
	for _, a := range loginErrors {
		if errors.Is(err, a) {
			return true
		}
	}
	return code == codes.Unauthenticated
}

// authErrors are etcd's answers that the user's roles do not allow the
// request.
var authErrors = []error{rpctypes.ErrPermissionDenied, rpctypes.ErrRoleNotGranted, rpctypes.ErrPermissionNotGranted}

func deniedByAuth(err error, code codes.Code) bool {
	for _, a := range authErrors {
		if errors.Is(err, a) {
			return true
		}
	}
	return code == codes.PermissionDenied
}

// userNamed is " (user NAME)" for a client that logs in with a password,
// for the detail of an unauthenticated answer.
func (c *Coordinator) userNamed() string {
	if c.client == nil || c.client.Username == "" {
		return ""
	}
	return fmt.Sprintf(" (user %q)", c.client.Username)
}

// dialError names the failure of clientv3.New, which logs in when its
// Config has a user: unauthenticated when etcd did not accept the
// credentials (as classifySendError names it), else authority_unavailable (nothing
// was sent that could have applied). op names the step ("connect"). The
// CLI calls it as core.DialError (set in init).
func dialError(op string, endpoints []string, err error) error {
	if unauthenticated(err, codeOf(err)) {
		return newError(Unauthenticated, op, "", "", fmt.Sprintf("etcd at %s did not accept the credentials", strings.Join(endpoints, ",")), err)
	}
	return newError(AuthorityUnavailable, op, "", "", fmt.Sprintf("cannot open a session with etcd at %s", strings.Join(endpoints, ",")), err)
}

func init() { core.DialError = dialError }

// neverAcceptable reports a request etcd refuses as malformed whatever its
// state (it was not applied, and sending it again changes nothing), or that
// gRPC refused to send for its size.
func neverAcceptable(err error, code codes.Code) bool {
	for _, a := range []error{rpctypes.ErrTooManyOps, rpctypes.ErrRequestTooLarge, rpctypes.ErrDuplicateKey, rpctypes.ErrEmptyKey} {
		if errors.Is(err, a) {
			return true
		}
	}
	if code == codes.InvalidArgument {
		return true
	}
	return code == codes.ResourceExhausted && strings.Contains(err.Error(), "trying to send message larger than max")
}

// notEtcd reports an answer from an endpoint that does not serve etcd's
// gRPC API: a gRPC server without etcd's services (Unimplemented), or a
// plain HTTP/2 server, whose response gRPC names by its HTTP status (404 is
// Unimplemented, others Unknown). Nothing was applied.
func notEtcd(err error, code codes.Code) bool {
	return code == codes.Unimplemented || strings.Contains(err.Error(), "unexpected HTTP status code received from server")
}

// isNoSpace reports etcd's quota refusal: the backend reached its quota
// (checked before the request is proposed) or the NOSPACE alarm is raised
// (the apply refuses every write). Either way nothing was applied.
func isNoSpace(err error) bool {
	return errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace)
}

// definitelyNotApplied reports codes etcd returns before it proposes a
// request: it was not applied and never will be.
func definitelyNotApplied(code codes.Code) bool {
	switch code {
	case codes.FailedPrecondition, codes.OutOfRange: // InvalidArgument and the auth codes are named earlier in classifySendError
		return true
	}
	return false
}

// txn runs r. Its error, if any, is an *Error: authority_unavailable when
// the request never left this process (or was a read), outcome_unknown when
// it may have reached etcd, expired_owner when etcd named a lease gone. The
// packages built on coordinator (fencedtxn, ledger, retention) run their
// Txns through it as core.Txn, so their transport failures are classified
// like the coordinator's own.
func (c *Coordinator) txn(ctx context.Context, r core.TxnRequest) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	req := request{op: r.Op, tenant: r.Tenant, task: r.Task, mutating: !r.ReadOnly}
	if err := c.checkTxn(r); err != nil {
		return nil, err
	}
	start := time.Now()
	err := c.do(ctx, req, func(ctx context.Context) (err error) {
		resp, err = c.client.Txn(ctx).If(r.If...).Then(r.Then...).Else(r.Else...).Commit()
		return err
	})
	c.metrics.txn(r.Op, time.Since(start))
	return resp, err
}
