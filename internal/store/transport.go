package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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

// Request names one call to etcd for error classification.
type Request struct {
	Op, Tenant, Task string
	Mutating         bool // it may write: a failure after it was sent is outcome_unknown
}

// errRequestTimeout is the cause of a request cut off by the coordinator's
// request timeout.
var errRequestTimeout = errors.New("coordinator: request timeout")

// Do runs f against etcd, bounded by the request timeout when ctx has no
// deadline, and turns its failure into an *Error (classifySendError).
func (s *Store) Do(ctx context.Context, r Request, f func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return NewError(AuthorityUnavailable, r.Op, r.Tenant, r.Task, "not sent: context already done", err)
	}
	own := false
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.limits.RequestTimeout, errRequestTimeout)
		defer cancel()
		own = true
	}
	t := &sendTracker{}
	err := f(context.WithValue(ctx, trackerKey{}, t))
	if err == nil {
		return nil
	}
	if own && timedOut(ctx) {
		err = requestTimeoutError(s.limits.RequestTimeout, err)
	}
	return s.classifySendError(r, t, err)
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
func (s *Store) classifySendError(r Request, t *sendTracker, err error) error {
	code := codeOf(err)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return NewError(ExpiredOwner, r.Op, r.Tenant, r.Task, "lease not found", err)
	case unauthenticated(err, code):
		return NewError(Unauthenticated, r.Op, r.Tenant, r.Task, "etcd did not accept the credentials"+s.userNamed(), err)
	case deniedByAuth(err, code):
		return NewError(PermissionDenied, r.Op, r.Tenant, r.Task,
			fmt.Sprintf("etcd's auth refused the request; %s may be mistyped, or the user's role lacks readwrite on %s/", s.keys.prefix, s.keys.prefix), err)
	case isNoSpace(err):
		return NewError(NoSpace, r.Op, r.Tenant, r.Task, "etcd's NOSPACE alarm is raised: it applies no write until an operator frees space and disarms it", err)
	case neverAcceptable(err, code):
		return NewError(InvalidInput, r.Op, r.Tenant, r.Task, "etcd can never accept this request", err)
	case notEtcd(err, code):
		return NewError(AuthorityUnavailable, r.Op, r.Tenant, r.Task,
			fmt.Sprintf("endpoint %s did not answer as etcd (check --endpoints)", strings.Join(s.client.Endpoints(), ",")), err)
	case !r.Mutating:
		return NewError(AuthorityUnavailable, r.Op, r.Tenant, r.Task, "read failed", err)
	case definitelyNotApplied(code) || errors.Is(err, rpctypes.ErrTooManyRequests):
		return NewError(AuthorityUnavailable, r.Op, r.Tenant, r.Task, "etcd refused the request before applying it", err)
	case !t.tagged.Load():
		return NewError(OutcomeUnknown, r.Op, r.Tenant, r.Task,
			"the etcd client lacks coordinator.DialOptions(), so an unsent request cannot be told from a lost answer", err)
	case !t.sent.Load():
		return NewError(AuthorityUnavailable, r.Op, r.Tenant, r.Task, "not sent: no connection to etcd", err)
	}
	return NewError(OutcomeUnknown, r.Op, r.Tenant, r.Task, "sent, but no answer came back", err)
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
func (s *Store) userNamed() string {
	if s.client == nil || s.client.Username == "" {
		return ""
	}
	return fmt.Sprintf(" (user %q)", s.client.Username)
}

// DialError names the failure of clientv3.New, which logs in when its
// Config has a user, before any coordinator exists: unauthenticated when
// etcd did not accept the credentials (as classifySendError names it), else
// authority_unavailable (nothing was sent that could have applied). op
// names the step ("connect").
func DialError(op string, endpoints []string, err error) error {
	if unauthenticated(err, codeOf(err)) {
		return NewError(Unauthenticated, op, "", "", fmt.Sprintf("etcd at %s did not accept the credentials", strings.Join(endpoints, ",")), err)
	}
	return NewError(AuthorityUnavailable, op, "", "", fmt.Sprintf("cannot open a session with etcd at %s", strings.Join(endpoints, ",")), err)
}

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
