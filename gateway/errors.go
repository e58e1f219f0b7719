package gateway

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/wire"
)

// codes maps every disposition to the one code a call answers with
// (docs/gateway.md has the table with the HTTP statuses connect gives
// them). The done dispositions are no error: code 0 (OK).
var codeTable = map[coordinator.Disposition]connect.Code{
	coordinator.OK:              0,
	coordinator.Granted:         0,
	coordinator.Renewed:         0,
	coordinator.Released:        0,
	coordinator.Committed:       0,
	coordinator.HistoricalRetry: 0,

	coordinator.Busy:               connect.CodeAborted,
	coordinator.StaleOwner:         connect.CodeFailedPrecondition,
	coordinator.ExpiredOwner:       connect.CodeFailedPrecondition,
	coordinator.GenerationMismatch: connect.CodeFailedPrecondition,
	coordinator.ScopeMismatch:      connect.CodeFailedPrecondition,
	coordinator.IllegalTransition:  connect.CodeFailedPrecondition,
	coordinator.OperationConflict:  connect.CodeAlreadyExists,
	coordinator.VersionConflict:    connect.CodeAborted,

	coordinator.InvalidInput:         connect.CodeInvalidArgument,
	coordinator.AuthorityUnavailable: connect.CodeUnavailable,
	coordinator.NoSpace:              connect.CodeResourceExhausted,
	coordinator.OutcomeUnknown:       connect.CodeUnknown,

	coordinator.PermissionDenied: connect.CodePermissionDenied,
	coordinator.Unauthenticated:  connect.CodeUnauthenticated,
	coordinator.NoKeyspace:       connect.CodeNotFound,
	coordinator.CorruptRecord:    connect.CodeDataLoss,
}

// Code is the code a call ends with for disposition d: 0 (OK) for a done
// one. A disposition the table lacks is answered as outcome_unknown's code,
// never as a success or a refusal (a test keeps the table complete).
func Code(d coordinator.Disposition) (connect.Code, bool) {
	c, ok := codeTable[d]
	return c, ok
}

// CodeOf is Code without the second answer: unknown for a disposition the
// table lacks.
func CodeOf(d coordinator.Disposition) connect.Code {
	if c, ok := codeTable[d]; ok {
		return c
	}
	return connect.CodeUnknown
}

// ConnectError is the error a handler returns for err: its disposition's
// code, the CLI's one line as message, and a Refusal detail.
func ConnectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	r := refusalOf(err)
	code := CodeOf(coordinator.Disposition(r.Disposition))
	if code == 0 { // a done disposition carried by an error: never read as success
		code = connect.CodeUnknown
	}
	e := connect.NewError(code, errors.New(line(r)))
	if d, derr := connect.NewErrorDetail(r); derr == nil {
		e.AddDetail(d)
	}
	return e
}

// callerRefusal is a refusal of the caller by the gateway itself (its
// certificate, role, tenant, or another identity's grant or session), not
// by etcd: its hint says what to fix on the caller's side.
type callerRefusal struct{ e *coordinator.Error }

func (c callerRefusal) Error() string { return c.e.Error() }
func (c callerRefusal) Unwrap() error { return c.e }

func refuseCaller(e *coordinator.Error) error { return callerRefusal{e} }

// callerHints are the hints of the gateway's own refusals of a caller.
var callerHints = map[coordinator.Disposition]string{
	coordinator.Unauthenticated:  "the gateway knows its callers by their client certificates: present one its configuration names; retrying will not help; nothing was written",
	coordinator.PermissionDenied: "the caller's identity lacks the role or tenant for this call, or it used another identity's grant or session; retrying will not help; nothing was written",
}

// refusalOf is the Refusal of err: the fields of the CLI's -o json error.
func refusalOf(err error) *leasegatev1.Refusal {
	d := coordinator.DispositionOf(err)
	if d.Class() == coordinator.ClassUnknown {
		d = coordinator.OutcomeUnknown
	}
	r := &leasegatev1.Refusal{Disposition: string(d), Hint: d.Hint(), Detail: err.Error()}
	var cr callerRefusal
	if errors.As(err, &cr) && callerHints[d] != "" {
		r.Hint = callerHints[d]
	}
	var e *coordinator.Error
	if errors.As(err, &e) {
		r.Op, r.Tenant, r.Task, r.Detail = e.Op, e.Tenant, e.Task, e.Detail
		if e.Err != nil {
			r.Detail = strings.TrimPrefix(r.Detail+": "+e.Err.Error(), ": ")
		}
		if e.Holder != nil {
			r.Holder = wire.OwnershipToProto(*e.Holder)
		}
	}
	r.Detail = strings.Join(strings.Fields(r.Detail), " ")
	return r
}

// line is the CLI's one line: "<disposition>: <hint> [<op> <tenant>/<task>: <detail>]".
func line(r *leasegatev1.Refusal) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", r.Disposition, r.Hint)
	where := r.Op
	if r.Tenant != "" || r.Task != "" {
		where += " " + r.Tenant + "/" + r.Task
	}
	switch {
	case where != "" && r.Detail != "":
		fmt.Fprintf(&b, " [%s: %s]", where, r.Detail)
	case r.Detail != "":
		fmt.Fprintf(&b, " [%s]", r.Detail)
	}
	return b.String()
}
