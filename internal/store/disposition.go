package store

import (
	"errors"
	"fmt"
	"strings"
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
)

// dispositions is every disposition, done ones first.
var dispositions = []Disposition{
	OK, Granted, Renewed, Released, Committed, HistoricalRetry,
	Busy, StaleOwner, ExpiredOwner, GenerationMismatch, ScopeMismatch, OperationConflict, VersionConflict,
	IllegalTransition,
	InvalidInput, AuthorityUnavailable, NoSpace, OutcomeUnknown,
	PermissionDenied, Unauthenticated, NoKeyspace, CorruptRecord,
}

// Dispositions lists every disposition, done ones first. It returns a new
// slice each time: the caller may keep or change it.
func Dispositions() []Disposition { return append([]Disposition(nil), dispositions...) }

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

// Class says whether d is done, refused, invalid, a hold or unknown.
func (d Disposition) Class() Class {
	switch d {
	case OK, Granted, Renewed, Released, Committed, HistoricalRetry:
		return ClassDone
	case Busy, StaleOwner, ExpiredOwner, GenerationMismatch, ScopeMismatch, OperationConflict, VersionConflict,
		IllegalTransition, CorruptRecord:
		return ClassRefused
	case InvalidInput:
		return ClassInvalid
	case AuthorityUnavailable, NoSpace:
		return ClassUnavailable
	case PermissionDenied, Unauthenticated:
		return ClassDenied
	case NoKeyspace:
		return ClassNotFound
	case OutcomeUnknown:
		return ClassOutcomeUnknown
	}
	return ClassUnknown
}

// Hint tells an operator what to do next after d.
func (d Disposition) Hint() string {
	switch d {
	case Busy:
		return "another grant holds the task; wait for it to be released or expire ('leasegate run --wait' or Session.Acquire waits for you)"
	case StaleOwner:
		return "this grant is no longer the task's current one; this worker must stop acting for it"
	case ExpiredOwner:
		return "the lease of this grant ran out or was revoked; claim again for a new epoch"
	case GenerationMismatch:
		return "the grant was issued under another realm (rotated or different cluster); claim again"
	case ScopeMismatch:
		return "the intent names another task than the grant; use the grant of that task"
	case OperationConflict:
		return "this operation id was already committed with another payload; use a new operation id for a new intent"
	case VersionConflict:
		return "the state moved on; read the current version and decide again"
	case IllegalTransition:
		return "the ledger's transition table forbids this state change; read the record (ops show) and act on its current state"
	case InvalidInput:
		return "fix the input; nothing was sent"
	case PermissionDenied:
		return "etcd's auth refused access to this prefix; check --prefix first (a mistyped prefix lies outside the role), else grant the user's role readwrite on the prefix (docs/operations.md); nothing was written"
	case Unauthenticated:
		return "etcd did not accept the credentials; check the user, password and client certificate; retrying will not help; nothing was written"
	case CorruptRecord:
		return "a stored record cannot be decoded (written or edited outside leasegate?); inspect the key named in the error with etcdctl get; nothing was written"
	case NoKeyspace:
		return "no leasegate keyspace at this prefix (no realm key); check --prefix, or create it with an acting command (claim); nothing was written"
	case NoSpace:
		return "etcd's NOSPACE alarm is raised and it refuses every write; compact, defragment and disarm the alarm (docs/operations.md), or run leasegate gc; nothing was written"
	case AuthorityUnavailable:
		return "etcd could not be reached; nothing was written; hold and retry later"
	case OutcomeUnknown:
		return "the request may have applied; retry the same request to learn its outcome"
	}
	return ""
}

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
)

var sentinels = map[Disposition]error{
	Busy:                 ErrBusy,
	StaleOwner:           ErrStaleOwner,
	ExpiredOwner:         ErrExpiredOwner,
	GenerationMismatch:   ErrGenerationMismatch,
	ScopeMismatch:        ErrScopeMismatch,
	OperationConflict:    ErrOperationConflict,
	VersionConflict:      ErrVersionConflict,
	InvalidInput:         ErrInvalidInput,
	AuthorityUnavailable: ErrAuthorityUnavailable,
	OutcomeUnknown:       ErrOutcomeUnknown,
	IllegalTransition:    ErrIllegalTransition,
	PermissionDenied:     ErrPermissionDenied,
	Unauthenticated:      ErrUnauthenticated,
	NoKeyspace:           ErrNoKeyspace,
	CorruptRecord:        ErrCorruptRecord,
	NoSpace:              ErrNoSpace,
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
	if s, ok := sentinels[e.Disposition]; ok {
		errs = append(errs, s)
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
	for _, d := range dispositions { // in the table's order, so the answer is stable
		if s, ok := sentinels[d]; ok && errors.Is(err, s) {
			return d
		}
	}
	return OutcomeUnknown
}

// NewError is an *Error of disposition d for op on a task (tenant and task
// empty where none is involved), with detail and cause.
func NewError(d Disposition, op, tenant, task, detail string, cause error) *Error {
	return &Error{Disposition: d, Op: op, Tenant: tenant, Task: task, Detail: detail, Err: cause}
}

// Invalid is an invalid_input error for op: bad input refused before any I/O.
func Invalid(op, format string, args ...any) *Error {
	return &Error{Disposition: InvalidInput, Op: op, Detail: fmt.Sprintf(format, args...)}
}
