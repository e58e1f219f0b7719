package gateway

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// CodeOf is the code a call ends with for disposition d, from the
// disposition table (internal/store/disposition.go, whose HTTP column and
// docs/gateway.md give the status Connect answers it with): 0 (OK) for a
// done one, and unknown for a disposition the table lacks — never a
// success or a refusal.
func CodeOf(d coordinator.Disposition) connect.Code {
	if m, ok := store.MeaningOf(d); ok {
		return connect.Code(m.Wire) // Connect's codes are gRPC's, number for number
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
