package cli

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// TestRefusalLineIsOneLine: a cause whose text spans lines still prints as
// one stderr line.
func TestRefusalLineIsOneLine(t *testing.T) {
	t.Parallel()
	err := store.NewError(coordinator.AuthorityUnavailable, "connect", "", "", "read failed", errors.New("rpc error: code = Unavailable desc = connection error:\n\tdesc = \"transport: tls: bad certificate\"\n"))
	line := errorOutputOf(err).line()
	if strings.ContainsAny(line, "\n\r\t") || !strings.HasPrefix(line, "authority_unavailable: ") ||
		!strings.Contains(line, `desc = "transport: tls: bad certificate"]`) {
		t.Fatalf("line %q", line)
	}
}

// TestExitCodesHelpNamesEveryCode: every exit code ExitCode gives — for
// each disposition, and for each of the app's own outcomes — is in
// exitCodes, and the app's help carries the sentence made from it.
func TestExitCodesHelpNamesEveryCode(t *testing.T) {
	inTable := map[int]bool{}
	for _, e := range exitCodes {
		inTable[e.code] = true
	}
	errs := []error{nil, &ownershipLost{cause: store.NewError(coordinator.ExpiredOwner, "", "", "", "", nil)},
		&drillFailed{why: "x"}, &interrupted{err: errors.New("x")}, errors.New("no disposition")}
	for _, d := range coordinator.Dispositions() {
		errs = append(errs, store.NewError(d, "", "", "", "", nil))
	}
	for _, err := range errs {
		if code := ExitCode(err); !inTable[code] {
			t.Errorf("ExitCode(%v) = %d, which the help's exit codes do not name", err, code)
		}
	}
	if !strings.Contains(New().Description, strings.Fields(exitCodesHelp())[0]) ||
		!strings.Contains(strings.Join(strings.Fields(New().Description), " "), exitCodesHelp()) {
		t.Fatalf("the app's help does not carry %q", exitCodesHelp())
	}
}

// TestDrillErrorExitCodes: how a drill that could not complete exits. An
// error that names its disposition keeps it — a real-provider worker's
// hold or denial among them, beside that worker's exit status — and
// anything else is the drill's own failure, exit 1: a plain error, and a
// worker's exit status alone (an *exec.ExitError, whose ExitCode made it
// read as a usage error, exit 2, invalid_input).
func TestDrillErrorExitCodes(t *testing.T) {
	exitStatus := exec.Command("sh", "-c", "exit 2").Run() // a worker that could not start
	var proc *exec.ExitError
	if !errors.As(exitStatus, &proc) {
		t.Fatalf("sh -c 'exit 2': %v", exitStatus)
	}
	trial := func(errs ...error) error {
		return fmt.Errorf("drill: fenced trial 0: %w", errors.Join(errs...))
	}
	worker := fmt.Errorf("worker worker-a (pid 1): %w: drill worker worker-a: could not start", exitStatus)
	reported := func(d coordinator.Disposition) error {
		return store.NewError(d, "drill worker worker-a", "", "", "could not start", nil)
	}
	for _, tc := range []struct {
		name string
		err  error
		code int
		d    coordinator.Disposition // "": the drill's own failure (drillFailed)
	}{
		{"the drill's own error", trial(errors.New("journal: closed")), ExitRefused, ""},
		{"a worker's exit status alone", trial(worker), ExitRefused, ""},
		{"a worker's hold beside its exit status", trial(reported(coordinator.AuthorityUnavailable), worker), ExitUnavailable, coordinator.AuthorityUnavailable},
		{"a worker's denial beside its exit status", trial(reported(coordinator.PermissionDenied), worker), ExitDenied, coordinator.PermissionDenied},
		{"invalid input", store.NewError(store.InvalidInput, "drill", "", "", "--trials 0", nil), ExitInvalid, coordinator.InvalidInput},
		{"etcd's outcome_unknown", store.NewError(coordinator.OutcomeUnknown, "drill", "", "", "", nil), ExitOutcomeUnknown, coordinator.OutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := drillError(tc.err)
			var failed *drillFailed
			if code := ExitCode(err); code != tc.code || errors.As(err, &failed) != (tc.d == "") {
				t.Fatalf("exit %d, want %d (drill failed: %v): %v", code, tc.code, tc.d == "", err)
			}
			if d := errorOutputOf(err).Disposition; tc.d != "" && d != tc.d {
				t.Fatalf("disposition %s, want %s: %v", d, tc.d, err)
			}
		})
	}
}
