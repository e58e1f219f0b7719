package store

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
)

// Disposition names the outcome of a leasegate request. The zero value
// means "don't know" and never reads as success: success has a name (OK,
// or the done disposition of the request).
type Disposition string

// Every disposition of the table in docs/design.md ("Dispositions and the
// hold").
const (
	// OK: the request succeeded. It is DispositionOf(nil), and the
	// disposition of a command that reads or administers rather than acting
	// under a grant (status, list, watch, realm, gc).
	OK              Disposition = "ok"
	Granted         Disposition = "granted"
	Renewed         Disposition = "renewed"
	Released        Disposition = "released"
	Committed       Disposition = "committed"
	HistoricalRetry Disposition = "historical_retry"

	Busy               Disposition = "busy"
	StaleOwner         Disposition = "stale_owner"
	ExpiredOwner       Disposition = "expired_owner"
	GenerationMismatch Disposition = "authority_generation_mismatch"
	ScopeMismatch      Disposition = "scope_mismatch"
	OperationConflict  Disposition = "operation_conflict"
	VersionConflict    Disposition = "version_conflict"
	// IllegalTransition: the effect ledger's transition table forbids the
	// requested state change; nothing was written.
	IllegalTransition Disposition = "illegal_transition"

	InvalidInput         Disposition = "invalid_input"
	AuthorityUnavailable Disposition = "authority_unavailable"
	OutcomeUnknown       Disposition = "outcome_unknown"

	// PermissionDenied: etcd's auth refused the request (the user's role
	// lacks the prefix); nothing was written. Not a hold: retrying with the
	// same credentials gets the same answer.
	PermissionDenied Disposition = "permission_denied"
	// Unauthenticated: etcd did not accept who the client says it is (a
	// bad password, an unknown user, no user at all, a token it no longer
	// accepts that the client could not renew), or the TLS handshake
	// failed on a certificate; nothing was written. Not a hold: the same
	// credentials get the same answer.
	Unauthenticated Disposition = "unauthenticated"
	// NoKeyspace: a read of a prefix that holds no leasegate keyspace (no
	// realm key). Nothing was written: reads never create the realm.
	NoKeyspace Disposition = "no_keyspace"
	// CorruptRecord: a stored record leasegate cannot decode (written or
	// edited outside leasegate, or by an incompatible version). Nothing was
	// written; a read answers it too, never outcome_unknown. Retrying will
	// not help: inspect the key.
	CorruptRecord Disposition = "corrupt_record"
	// NoSpace: etcd raised its NOSPACE alarm (the backend reached its quota);
	// it refuses every write until an operator compacts, defragments and
	// disarms the alarm. Nothing was written: a hold.
	NoSpace Disposition = "no_space"
	// LimitExceeded: the gateway refused a call that would take its caller
	// past one of its identity's limits (open sessions, grants, watch
	// streams); the error names the limit. Nothing was written. Not a hold:
	// the same call succeeds once the identity holds fewer (a session
	// closed or expired, a grant released, a stream ended), or with a
	// larger limit.
	LimitExceeded Disposition = "limit_exceeded"
)

// Class groups dispositions by what the caller should do.
type Class int

// The classes, in the order of docs/design.md's table. The zero value is
// unknown.
const (
	ClassUnknown Class = iota
	ClassDone
	ClassRefused
	ClassInvalid
	ClassUnavailable
	ClassOutcomeUnknown
	ClassDenied   // permission_denied, unauthenticated: fix the configuration; retrying will not help
	ClassNotFound // no_keyspace: nothing there to read
)

// The leasegate CLI's exit statuses for the dispositions, one per class
// (cli/exit.go adds its own: ownership lost under run, bench interrupted).
const (
	ExitDone           = 0 // granted, renewed, released, committed, historical_retry, ok
	ExitRefused        = 1 // refused by the authority; nothing written
	ExitInvalid        = 2 // invalid input or usage; refused before any I/O
	ExitUnavailable    = 3 // authority unavailable; nothing written; hold
	ExitOutcomeUnknown = 4 // it may have applied; retry the same request to learn
	ExitDenied         = 6 // permission_denied, unauthenticated: etcd's auth refused; nothing written
	ExitNotFound       = 7 // no_keyspace: nothing at this prefix to read; nothing written
)

// Sentinel errors, one per refusal, hold and unknown disposition. errors.Is
// matches them through any *Error.
var (
	ErrBusy                 = errors.New("coordinator: busy")
	ErrStaleOwner           = errors.New("coordinator: stale owner")
	ErrExpiredOwner         = errors.New("coordinator: expired owner")
	ErrGenerationMismatch   = errors.New("coordinator: authority generation mismatch")
	ErrScopeMismatch        = errors.New("coordinator: scope mismatch")
	ErrOperationConflict    = errors.New("coordinator: operation conflict")
	ErrVersionConflict      = errors.New("coordinator: version conflict")
	ErrInvalidInput         = errors.New("coordinator: invalid input")
	ErrAuthorityUnavailable = errors.New("coordinator: authority unavailable")
	ErrOutcomeUnknown       = errors.New("coordinator: outcome unknown")
	ErrIllegalTransition    = errors.New("coordinator: illegal transition")
	ErrPermissionDenied     = errors.New("coordinator: permission denied")
	ErrUnauthenticated      = errors.New("coordinator: unauthenticated")
	ErrNoKeyspace           = errors.New("coordinator: no keyspace")
	ErrCorruptRecord        = errors.New("coordinator: corrupt record")
	ErrNoSpace              = errors.New("coordinator: no space")
	ErrLimitExceeded        = errors.New("coordinator: limit exceeded")
)

// Meaning is one row of the disposition table: everything leasegate says
// about one disposition, wherever it says it.
type Meaning struct {
	Disposition Disposition
	Class       Class      // what the caller should do
	Exit        int        // the CLI's exit status (cli/exit.go)
	Wire        codes.Code // the code a gateway call ends with (gRPC's numbering, which Connect shares); OK for a done one
	HTTP        int        // the HTTP status the Connect protocol answers Wire with (docs/gateway.md)
	Sentinel    error      // what errors.Is matches through an *Error; nil for a done one
	Hint        string     // what an operator should do next; "" for a done one
}

// table is the dispositions, done ones first, in docs/design.md's order
// ("Dispositions and the hold"). Dispositions, Class, Hint, Unwrap's
// sentinels, DispositionOf's order, the CLI's exit statuses (cli/exit.go)
// and the gateway's codes (gateway/errors.go) are all read from it;
// TestDispositionTable walks it.
var table = []Meaning{
	{OK, ClassDone, ExitDone, codes.OK, 200, nil, ""},
	{Granted, ClassDone, ExitDone, codes.OK, 200, nil, ""},
	{Renewed, ClassDone, ExitDone, codes.OK, 200, nil, ""},
	{Released, ClassDone, ExitDone, codes.OK, 200, nil, ""},
	{Committed, ClassDone, ExitDone, codes.OK, 200, nil, ""},
	{HistoricalRetry, ClassDone, ExitDone, codes.OK, 200, nil, ""},

	{Busy, ClassRefused, ExitRefused, codes.Aborted, 409, ErrBusy,
		"another grant holds the task; wait for it to be released or expire ('leasegate run --wait' or Session.Acquire waits for you)"},
	{StaleOwner, ClassRefused, ExitRefused, codes.FailedPrecondition, 400, ErrStaleOwner,
		"this grant is no longer the task's current one; this worker must stop acting for it"},
	{ExpiredOwner, ClassRefused, ExitRefused, codes.FailedPrecondition, 400, ErrExpiredOwner,
		"the lease of this grant ran out or was revoked; claim again for a new epoch"},
	{GenerationMismatch, ClassRefused, ExitRefused, codes.FailedPrecondition, 400, ErrGenerationMismatch,
		"the grant was issued under another realm (rotated or different cluster); claim again"},
	{ScopeMismatch, ClassRefused, ExitRefused, codes.FailedPrecondition, 400, ErrScopeMismatch,
		"the intent names another task than the grant; use the grant of that task"},
	{OperationConflict, ClassRefused, ExitRefused, codes.AlreadyExists, 409, ErrOperationConflict,
		"this operation id was already committed with another payload; use a new operation id for a new intent"},
	{VersionConflict, ClassRefused, ExitRefused, codes.Aborted, 409, ErrVersionConflict,
		"the state moved on; read the current version and decide again"},
	{IllegalTransition, ClassRefused, ExitRefused, codes.FailedPrecondition, 400, ErrIllegalTransition,
		"the ledger's transition table forbids this state change; read the record (ops show) and act on its current state"},
	{LimitExceeded, ClassRefused, ExitRefused, codes.ResourceExhausted, 429, ErrLimitExceeded,
		"the caller's identity holds as many of what it asked for as the gateway's limits allow (the detail names the limit); close sessions, release grants or end watch streams it no longer uses, or raise the limit (limits in the gateway's configuration); nothing was written"},

	{InvalidInput, ClassInvalid, ExitInvalid, codes.InvalidArgument, 400, ErrInvalidInput,
		"fix the input; nothing was sent"},
	{AuthorityUnavailable, ClassUnavailable, ExitUnavailable, codes.Unavailable, 503, ErrAuthorityUnavailable,
		"etcd could not be reached; nothing was written; hold and retry later"},
	{NoSpace, ClassUnavailable, ExitUnavailable, codes.ResourceExhausted, 429, ErrNoSpace,
		"etcd's NOSPACE alarm is raised and it refuses every write; compact, defragment and disarm the alarm (docs/operations.md), or run leasegate gc; nothing was written"},
	{OutcomeUnknown, ClassOutcomeUnknown, ExitOutcomeUnknown, codes.Unknown, 500, ErrOutcomeUnknown,
		"the request may have applied; retry the same request to learn its outcome"},

	{PermissionDenied, ClassDenied, ExitDenied, codes.PermissionDenied, 403, ErrPermissionDenied,
		"etcd's auth refused access to this prefix; check --prefix first (a mistyped prefix lies outside the role), else grant the user's role readwrite on the prefix (docs/operations.md); nothing was written"},
	{Unauthenticated, ClassDenied, ExitDenied, codes.Unauthenticated, 401, ErrUnauthenticated,
		"etcd did not accept the credentials; check the user, password and client certificate; retrying will not help; nothing was written"},
	{NoKeyspace, ClassNotFound, ExitNotFound, codes.NotFound, 404, ErrNoKeyspace,
		"no leasegate keyspace at this prefix (no realm key); check --prefix, or create it with an acting command (claim); nothing was written"},
	{CorruptRecord, ClassRefused, ExitRefused, codes.DataLoss, 500, ErrCorruptRecord,
		"a stored record cannot be decoded (written or edited outside leasegate?); inspect the key named in the error with etcdctl get; nothing was written"},
}

// meanings is table by disposition.
var meanings = func() map[Disposition]*Meaning {
	m := make(map[Disposition]*Meaning, len(table))
	for i := range table {
		m[table[i].Disposition] = &table[i]
	}
	return m
}()

// MeaningOf is d's row of the table; false for a disposition the table
// lacks (the zero value, "don't know", among them).
func MeaningOf(d Disposition) (Meaning, bool) {
	if m, ok := meanings[d]; ok {
		return *m, true
	}
	return Meaning{}, false
}

// Dispositions lists every disposition, done ones first. It returns a new
// slice each time: the caller may keep or change it.
func Dispositions() []Disposition {
	out := make([]Disposition, len(table))
	for i, m := range table {
		out[i] = m.Disposition
	}
	return out
}

// Class says whether d is done, refused, invalid, a hold or unknown.
func (d Disposition) Class() Class {
	if m, ok := meanings[d]; ok {
		return m.Class
	}
	return ClassUnknown
}

// Hint tells an operator what to do next after d.
func (d Disposition) Hint() string {
	if m, ok := meanings[d]; ok {
		return m.Hint
	}
	return ""
}

// Error is every non-done outcome the leasegate packages return. It carries
// what the authority showed (the holder of a busy task, say) and the cause.
type Error struct {
	Disposition Disposition
	Op          string     // "claim", "commit", "renew", ...
	Tenant      string     // empty where no task is involved
	Task        string     //
	Detail      string     // one line on what was observed
	Holder      *Ownership // the current owner, where the authority showed one
	Err         error      // the cause, if any (a transport error, say)
}

// Error reads "<op> [tenant/task]: <disposition>[: detail][: cause]".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Tenant != "" || e.Task != "" {
		fmt.Fprintf(&b, " %s/%s", e.Tenant, e.Task)
	}
	b.WriteString(": ")
	b.WriteString(string(e.Disposition))
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap exposes the disposition's sentinel and the cause to errors.Is.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if m, ok := meanings[e.Disposition]; ok && m.Sentinel != nil {
		errs = append(errs, m.Sentinel)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// DispositionOf names the outcome err stands for: OK for nil. An error that
// is none of the packages' own is outcome_unknown: never a guess of success
// or of denial.
func DispositionOf(err error) Disposition {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Disposition
	}
	for _, m := range table { // in the table's order, so the answer is stable
		if m.Sentinel != nil && errors.Is(err, m.Sentinel) {
			return m.Disposition
		}
	}
	return OutcomeUnknown
}

// NewError is an *Error of disposition d for op on a task (tenant and task
// empty where none is involved), with a detail line and the cause (nil if
// none). It is the one way the leasegate packages build an *Error: every
// field is named at every call, beside the table that gives d its
// meaning. A caller that has seen the task's holder sets Holder on the
// result.
func NewError(d Disposition, op, tenant, task, detail string, cause error) *Error {
	return &Error{Disposition: d, Op: op, Tenant: tenant, Task: task, Detail: detail, Err: cause}
}
