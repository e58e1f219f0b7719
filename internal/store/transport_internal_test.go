package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClassifyEveryBranch pins each branch of classifySendError, in its
// order, on the error values etcd's client returns: a write etcd refused
// before proposing it (not leader, too many requests) is a hold, never
// outcome_unknown.
// Each case names the tracker state the request had: untagged (a client
// without DialOptions), tagged but never on a transport, or sent.
func TestClassifyEveryBranch(t *testing.T) {
	c := &Store{keys: NewKeys("/lg")}
	untagged := func() *sendTracker { return &sendTracker{} }
	unsent := func() *sendTracker { s := &sendTracker{}; s.tagged.Store(true); return s }
	sent := func() *sendTracker { s := unsent(); s.sent.Store(true); return s }
	deadline := fmt.Errorf("no answer: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name     string
		mutating bool
		tracker  func() *sendTracker
		err      error
		want     Disposition
	}{
		{"lease gone", true, sent, rpctypes.ErrLeaseNotFound, ExpiredOwner},
		{"auth: permission denied", true, sent, rpctypes.ErrPermissionDenied, PermissionDenied},
		{"auth: bad password", true, sent, rpctypes.ErrAuthFailed, Unauthenticated},
		{"auth: no user", false, sent, rpctypes.ErrUserEmpty, Unauthenticated},
		{"auth: a token not renewed", true, sent, rpctypes.ErrInvalidAuthToken, Unauthenticated},
		{"auth: gRPC unauthenticated", true, sent, status.Error(codes.Unauthenticated, "no"), Unauthenticated},
		{"auth: role not granted", true, sent, rpctypes.ErrRoleNotGranted, PermissionDenied},
		{"NOSPACE", true, sent, rpctypes.ErrNoSpace, NoSpace},
		{"too many ops", true, sent, rpctypes.ErrTooManyOps, InvalidInput},
		{"over gRPC's send limit", true, unsent, status.Error(codes.ResourceExhausted, "trying to send message larger than max (3 vs. 2)"), InvalidInput},
		{"a read sent, no answer", false, sent, deadline, AuthorityUnavailable},
		{"a read never sent", false, unsent, deadline, AuthorityUnavailable},
		{"not leader: refused before it was proposed", true, sent, rpctypes.ErrNotLeader, AuthorityUnavailable},
		{"too many requests: refused before it was proposed", true, sent, rpctypes.ErrTooManyRequests, AuthorityUnavailable},
		{"future revision", true, sent, rpctypes.ErrFutureRev, AuthorityUnavailable},
		{"a write, client without DialOptions", true, untagged, deadline, OutcomeUnknown},
		{"a write never sent", true, unsent, status.Error(codes.Unavailable, "connection refused"), AuthorityUnavailable},
		{"a write sent, no answer", true, sent, deadline, OutcomeUnknown},
		{"a write sent, connection lost", true, sent, status.Error(codes.Unavailable, "transport is closing"), OutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.classifySendError(Request{Op: "test", Mutating: tc.mutating}, tc.tracker(), tc.err)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("classify(%v) = %T %v, want an *Error", tc.err, err, err)
			}
			if e.Disposition != tc.want {
				t.Fatalf("classify(%v) = %s (%s), want %s", tc.err, e.Disposition, e.Detail, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("classify(%v) lost its cause: %v", tc.err, err)
			}
		})
	}
}
