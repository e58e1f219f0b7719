package coordinator

import "github.com/leasegate/leasegate/internal/store"

// Disposition names the outcome of a leasegate request. The zero value
// means "don't know" and never reads as success: success has a name (OK,
// or the done disposition of the request). Class says what a caller should
// do about one, Hint what an operator should do next; both, and the
// sentinels below, are read from one table, internal/store/disposition.go.
type Disposition = store.Disposition

// Every disposition of the table in docs/design.md ("Dispositions and the
// hold").
const (
	// OK: the request succeeded. It is DispositionOf(nil), and the
	// disposition of a command that reads or administers rather than acting
	// under a grant (status, list, watch, realm, gc).
	OK              = store.OK
	Granted         = store.Granted
	Renewed         = store.Renewed
	Released        = store.Released
	Committed       = store.Committed
	HistoricalRetry = store.HistoricalRetry

	Busy               = store.Busy
	StaleOwner         = store.StaleOwner
	ExpiredOwner       = store.ExpiredOwner
	GenerationMismatch = store.GenerationMismatch
	ScopeMismatch      = store.ScopeMismatch
	OperationConflict  = store.OperationConflict
	VersionConflict    = store.VersionConflict
	// IllegalTransition: the effect ledger's transition table forbids the
	// requested state change; nothing was written.
	IllegalTransition = store.IllegalTransition

	InvalidInput         = store.InvalidInput
	AuthorityUnavailable = store.AuthorityUnavailable
	OutcomeUnknown       = store.OutcomeUnknown

	// PermissionDenied: etcd's auth refused the request (the user's role
	// lacks the prefix); nothing was written. Not a hold: retrying with the
	// same credentials gets the same answer.
	PermissionDenied = store.PermissionDenied
	// Unauthenticated: etcd did not accept who the client says it is (a
	// bad password, an unknown user, no user at all, a token it no longer
	// accepts that the client could not renew), or the TLS handshake
	// failed on a certificate; nothing was written. Not a hold: the same
	// credentials get the same answer.
	Unauthenticated = store.Unauthenticated
	// NoKeyspace: a read of a prefix that holds no leasegate keyspace (no
	// realm key). Nothing was written: reads never create the realm.
	NoKeyspace = store.NoKeyspace
	// CorruptRecord: a stored record leasegate cannot decode (written or
	// edited outside leasegate, or by an incompatible version). Nothing was
	// written; a read answers it too, never outcome_unknown. Retrying will
	// not help: inspect the key.
	CorruptRecord = store.CorruptRecord
	// NoSpace: etcd raised its NOSPACE alarm (the backend reached its quota);
	// it refuses every write until an operator compacts, defragments and
	// disarms the alarm. Nothing was written: a hold.
	NoSpace = store.NoSpace
	// LimitExceeded: the gateway refused a call that would take its caller
	// past one of its identity's limits (open sessions, grants, watch
	// streams); nothing was written. Not a hold: it succeeds once the
	// identity holds fewer, or with a larger limit.
	LimitExceeded = store.LimitExceeded
)

// Dispositions lists every disposition, done ones first. It returns a new
// slice each time: the caller may keep or change it.
func Dispositions() []Disposition { return store.Dispositions() }

// Class groups dispositions by what the caller should do.
type Class = store.Class

// The classes, in the order of docs/design.md's table. The zero value is
// unknown.
const (
	ClassUnknown        = store.ClassUnknown
	ClassDone           = store.ClassDone
	ClassRefused        = store.ClassRefused
	ClassInvalid        = store.ClassInvalid
	ClassUnavailable    = store.ClassUnavailable
	ClassOutcomeUnknown = store.ClassOutcomeUnknown
	ClassDenied         = store.ClassDenied   // permission_denied, unauthenticated: fix the configuration; retrying will not help
	ClassNotFound       = store.ClassNotFound // no_keyspace: nothing there to read
)

// Sentinel errors, one per refusal, hold and unknown disposition. errors.Is
// matches them through any *Error.
var (
	ErrBusy                 = store.ErrBusy
	ErrStaleOwner           = store.ErrStaleOwner
	ErrExpiredOwner         = store.ErrExpiredOwner
	ErrGenerationMismatch   = store.ErrGenerationMismatch
	ErrScopeMismatch        = store.ErrScopeMismatch
	ErrOperationConflict    = store.ErrOperationConflict
	ErrVersionConflict      = store.ErrVersionConflict
	ErrInvalidInput         = store.ErrInvalidInput
	ErrAuthorityUnavailable = store.ErrAuthorityUnavailable
	ErrOutcomeUnknown       = store.ErrOutcomeUnknown
	ErrIllegalTransition    = store.ErrIllegalTransition
	ErrPermissionDenied     = store.ErrPermissionDenied
	ErrUnauthenticated      = store.ErrUnauthenticated
	ErrNoKeyspace           = store.ErrNoKeyspace
	ErrCorruptRecord        = store.ErrCorruptRecord
	ErrNoSpace              = store.ErrNoSpace
	ErrLimitExceeded        = store.ErrLimitExceeded
)

// Error is every non-done outcome the leasegate packages return: its
// Disposition, the Op ("claim", "commit", "renew", ...), the Tenant and
// Task (empty where no task is involved), a Detail line on what was
// observed, the Holder the authority showed (the current owner of a busy
// task, say) and the cause Err. It reads "<op> [tenant/task]:
// <disposition>[: detail][: cause]", and errors.Is sees both the
// disposition's sentinel and the cause.
type Error = store.Error

// DispositionOf names the outcome err stands for: OK for nil. An error that
// is none of the packages' own is outcome_unknown: never a guess of success
// or of denial.
func DispositionOf(err error) Disposition { return store.DispositionOf(err) }
