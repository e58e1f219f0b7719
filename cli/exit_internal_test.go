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
