package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
)

// TestRefusalLineIsOneLine: a cause whose text spans lines still prints as
// one stderr line.
func TestRefusalLineIsOneLine(t *testing.T) {
	t.Parallel()
	err := &coordinator.Error{Disposition: coordinator.AuthorityUnavailable, Op: "connect", Detail: "read failed",
		Err: errors.New("rpc error: code = Unavailable desc = connection error:\n\tdesc = \"transport: tls: bad certificate\"\n")}
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
	errs := []error{nil, &ownershipLost{cause: &coordinator.Error{Disposition: coordinator.ExpiredOwner}},
		&drillFailed{why: "x"}, &interrupted{err: errors.New("x")}, errors.New("no disposition")}
	for _, d := range coordinator.Dispositions() {
		errs = append(errs, &coordinator.Error{Disposition: d})
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
