package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// leasegate's exit codes: one per class of the disposition table
// (internal/store/disposition.go, where each disposition's is written), and
// two of the CLI's own: run's child stopped because ownership was lost, and
// bench interrupted.
const (
	ExitDone           = store.ExitDone           // granted, renewed, released, committed, historical_retry, ok; drill passed
	ExitRefused        = store.ExitRefused        // refused by the authority; nothing written; drill failed
	ExitInvalid        = store.ExitInvalid        // invalid input or usage; refused before any I/O
	ExitUnavailable    = store.ExitUnavailable    // authority unavailable; nothing written; hold
	ExitOutcomeUnknown = store.ExitOutcomeUnknown // it may have applied; retry the same request to learn
	ExitOwnershipLost  = 5                        // run: ownership was lost and the child was stopped
	ExitDenied         = store.ExitDenied         // permission_denied, unauthenticated: etcd's auth refused; nothing written
	ExitNotFound       = store.ExitNotFound       // no_keyspace: nothing at this prefix to read; nothing written
	// ExitInterrupted: bench stopped by a signal after printing what it had
	// measured (128 + SIGINT, as a shell reports an interrupted command).
	ExitInterrupted = 130
)

// exitCodes says what each exit code means, in the words of the app's help
// (exitCodesHelp); a test checks that it names every code ExitCode returns.
var exitCodes = []struct {
	code  int
	means string
}{
	{ExitDone, "done"},
	{ExitRefused, "refused"},
	{ExitInvalid, "invalid input"},
	{ExitUnavailable, "authority unavailable (hold)"},
	{ExitOutcomeUnknown, "outcome unknown (retry the same request)"},
	{ExitOwnershipLost, "ownership lost under 'run'"},
	{ExitDenied, "permission denied or unauthenticated (fix the prefix, role or credentials; retrying will not help)"},
	{ExitNotFound, "no leasegate keyspace at --prefix (reads never create one)"},
	{ExitInterrupted, "bench interrupted (what it measured until then is printed)"},
}

// exitCodesHelp is the exit-code sentence of the app's help, from
// exitCodes.
func exitCodesHelp() string {
	parts := make([]string, len(exitCodes))
	for i, e := range exitCodes {
		parts[i] = fmt.Sprintf("%d %s", e.code, e.means)
	}
	return "Exit codes: " + strings.Join(parts, ", ") + "."
}

// ExitCode maps an error returned by the app to the process's exit status.
// `run` exits with its child's status (128+n if a signal n ended it).
func ExitCode(err error) int {
	if err == nil {
		return ExitDone
	}
	var child childExit
	if errors.As(err, &child) {
		return child.code
	}
	var lost *ownershipLost
	if errors.As(err, &lost) {
		return ExitOwnershipLost
	}
	var release *releaseFailed
	if errors.As(err, &release) {
		return release.out.Child.ExitCode
	}
	var failed *drillFailed
	if errors.As(err, &failed) {
		return ExitRefused
	}
	var intr *interrupted
	if errors.As(err, &intr) {
		return ExitInterrupted
	}
	if isUsageExit(err) {
		return ExitInvalid
	}
	// The disposition's own exit status, from the table; a done
	// disposition carried by an error, outcome_unknown, and any error that
	// names no disposition: never read as done or as refused.
	if m, ok := store.MeaningOf(coordinator.DispositionOf(err)); ok && m.Class != coordinator.ClassDone {
		return m.Exit
	}
	return ExitOutcomeUnknown
}

// isUsageExit reports whether err holds one of urfave's own exit errors:
// a usage error ("No help topic", say). A process's exit status in an
// error (*exec.ExitError: a drill worker's, a provider tool's) has an
// ExitCode too, and is no usage error: it must not read as invalid input.
func isUsageExit(err error) bool {
	var ec cli.ExitCoder
	var proc *exec.ExitError
	return errors.As(err, &ec) && !errors.As(err, &proc)
}

// childExit is `run`'s child's own non-zero exit status: not an error of
// leasegate's, so nothing more is printed for it.
type childExit struct{ code int }

func (e childExit) Error() string { return fmt.Sprintf("child exited with status %d", e.code) }

// drillFailed is a drill that ran and did not pass (its report says why),
// or could not finish for a reason of its own: exit 1.
type drillFailed struct{ why string }

func (e *drillFailed) Error() string { return "drill failed: " + e.why }

// releaseFailed is `run`'s child ending by itself with ownership held, and
// the release of its grant failing: the line reports the release, the JSON
// is run's result (its disposition the release's), and the exit status is
// the child's.
type releaseFailed struct {
	cause error
	out   runOutput
}

func (e *releaseFailed) Error() string {
	return fmt.Sprintf("release after the child %s: %v", e.out.Child, e.cause)
}

func (e *releaseFailed) Unwrap() error { return e.cause }

// ownershipLost is `run` stopping its child because the grant stopped being
// current.
type ownershipLost struct {
	cause *coordinator.Error
	grant coordinator.Grant
	child childStatus
}

func (e *ownershipLost) Error() string {
	return fmt.Sprintf("ownership lost: %v; child %s", e.cause, e.child)
}

func (e *ownershipLost) Unwrap() error { return e.cause }

// errorOutput is what every failure prints with -o json.
type errorOutput struct {
	Disposition coordinator.Disposition `json:"disposition"`
	Op          string                  `json:"op,omitempty"`
	Tenant      string                  `json:"tenant,omitempty"`
	Task        string                  `json:"task,omitempty"`
	Detail      string                  `json:"detail,omitempty"`
	Hint        string                  `json:"hint"`
	Holder      *coordinator.Ownership  `json:"holder,omitempty"`
	Grant       *coordinator.Grant      `json:"grant,omitempty"` // run: the grant that was lost
	Child       *childStatus            `json:"child,omitempty"` // run: how the child ended

	cause string // the cause of a busy answer (a --wait-timeout given up on), for its line
}

func errorOutputOf(err error) errorOutput {
	d := coordinator.DispositionOf(err)
	if isUsageExit(err) {
		d = coordinator.InvalidInput
	}
	if d.Class() == coordinator.ClassUnknown {
		d = coordinator.OutcomeUnknown
	}
	out := errorOutput{Disposition: d, Hint: d.Hint(), Detail: err.Error()}
	var e *coordinator.Error
	if errors.As(err, &e) {
		out.Op, out.Tenant, out.Task, out.Holder = e.Op, e.Tenant, e.Task, e.Holder
		if h, ok := operatorHints[e.Op][d]; ok {
			out.Hint = h
		}
		// An error with advice of its own says what to do next where the
		// disposition's hint, written for a caller of etcd, would be
		// untrue: through --gateway the gateway's or its client's (a role
		// the certificate lacks, a gateway that cannot be reached), and a
		// command's own (advised: a lease revoke of another application's
		// lease).
		var gw interface{ Hint() string }
		if errors.As(err, &gw) && gw.Hint() != "" && gw.Hint() != d.Hint() {
			out.Hint = gw.Hint()
		}
		out.Detail = e.Detail
		if e.Err != nil {
			out.cause = e.Err.Error()
			out.Detail = strings.TrimPrefix(out.Detail+": "+e.Err.Error(), ": ")
		}
	}
	var lost *ownershipLost
	if errors.As(err, &lost) {
		out.Grant, out.Child = &lost.grant, &lost.child
		out.Detail += "; child " + lost.child.String()
	}
	return out
}

// operatorHints replace a disposition's hint, written for a worker acting
// under a grant, where an operator's command gets that disposition.
var operatorHints = map[string]map[coordinator.Disposition]string{
	"lease show": {coordinator.ExpiredOwner: "etcd no longer knows this lease (it expired or was revoked): " +
		"no task is held through it; 'leasegate lease list' shows the live ones"},
	"lease revoke": {coordinator.ExpiredOwner: "etcd no longer knows this lease (it expired or was revoked, " +
		"perhaps by an earlier revoke whose answer was lost): its tasks are already vacated; nothing to revoke"},
}

// line is the one line a failure prints on stderr:
// "<disposition>: <what to do next> [<op> <tenant>/<task>: <what was seen>]".
func (o errorOutput) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", o.Disposition, o.Hint)
	where := o.Op
	if o.Tenant != "" || o.Task != "" {
		where += " " + o.Tenant + "/" + o.Task
	}
	detail := o.Detail
	if h := o.Holder; h != nil && o.Disposition == coordinator.Busy && h.Owned() {
		detail = fmt.Sprintf("held by %q since epoch %d, lease %s", h.Owner, h.Epoch, coordinator.FormatLeaseID(h.Lease))
		if h.TTLLeft >= 0 {
			detail += fmt.Sprintf(", %ds left", h.TTLLeft)
		}
		if o.cause != "" {
			detail += "; " + o.cause
		}
	}
	// One line, whatever a cause's text holds (gRPC and TLS errors may
	// span lines).
	detail = strings.Join(strings.Fields(detail), " ")
	switch {
	case where != "" && detail != "":
		fmt.Fprintf(&b, " [%s: %s]", where, detail)
	case detail != "":
		fmt.Fprintf(&b, " [%s]", detail)
	}
	return b.String()
}

// report is the app's ExitErrHandler, the one place a failure is printed:
// the JSON object on the app's writer with -o json, and always one line on
// its error writer. It never exits: main does, with ExitCode.
func report(c *cli.Context, err error) {
	if err == nil {
		return
	}
	var child childExit
	if errors.As(err, &child) {
		return
	}
	var failed *drillFailed
	if errors.As(err, &failed) { // the report (JSON or table) is already printed
		fmt.Fprintln(c.App.ErrWriter, failed.Error())
		return
	}
	var intr *interrupted
	if errors.As(err, &intr) { // bench: what was measured is already printed
		fmt.Fprintln(c.App.ErrWriter, intr.Error())
		return
	}
	out := errorOutputOf(err)
	var result any = out
	var release *releaseFailed
	if errors.As(err, &release) {
		result, out = release.out, errorOutputOf(release.cause)
	}
	if g := globalsOf(c); g != nil && g.out.json {
		_ = json.NewEncoder(c.App.Writer).Encode(result)
	}
	fmt.Fprintln(c.App.ErrWriter, out.line())
}
