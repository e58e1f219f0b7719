package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
)

// pastDeadline is a context whose deadline has passed and whose timer has
// not fired yet: the instant in which etcd's own answer to a deadline
// gRPC carried to it can arrive.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestTimedOut: a request's context has timed out when its timer fired
// with the request timeout as its cause, or when its deadline has passed
// though the timer has not fired yet; not before its deadline.
func TestTimedOut(t *testing.T) {
	fired, cancel := context.WithTimeoutCause(context.Background(), time.Nanosecond, errRequestTimeout)
	defer cancel()
	<-fired.Done()
	future, cancelFuture := context.WithTimeoutCause(context.Background(), time.Hour, errRequestTimeout)
	defer cancelFuture()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"the timer fired", fired, true},
		{"the deadline passed, the timer not fired yet", pastDeadline{context.Background()}, true},
		{"before the deadline", future, false},
	} {
		if got := timedOut(tc.ctx); got != tc.want {
			t.Errorf("%s: timedOut = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRequestTimeoutError: a failure at the request timeout names the
// timeout and holds context.DeadlineExceeded, once, whether it is the
// client's own deadline error or etcd's answer to the deadline — whose
// code still classifies it (a sent write: outcome_unknown).
func TestRequestTimeoutError(t *testing.T) {
	for _, cause := range []error{context.DeadlineExceeded, rpctypes.ErrTimeout} {
		err := requestTimeoutError(time.Second, cause)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, cause) ||
			!strings.HasPrefix(err.Error(), "no answer within the request timeout of 1s: ") ||
			strings.Count(err.Error(), context.DeadlineExceeded.Error()) > 1 {
			t.Errorf("%v: %v", cause, err)
		}
	}
	err := requestTimeoutError(time.Second, rpctypes.ErrTimeout)
	if code := codeOf(err); code != codes.Unavailable {
		t.Fatalf("etcd's timeout wrapped has code %v, want Unavailable", code)
	}
	c := &Store{}
	tr := &sendTracker{}
	tr.tagged.Store(true)
	tr.sent.Store(true)
	if d := DispositionOf(c.classifySendError(Request{Op: "commit", Mutating: true}, tr, err)); d != OutcomeUnknown {
		t.Fatalf("a sent write answered by etcd's timeout: %s, want outcome_unknown", d)
	}
}
