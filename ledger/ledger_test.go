package ledger

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReasonsQuoteTheReadablePart: a journal reason quotes an
// observation's readable detail, not a 12-character cut of its digest;
// only an observation with no readable detail falls back to the digest.
func TestReasonsQuoteTheReadablePart(t *testing.T) {
	d := "writer=aurora-usw2;promoting=-"
	for _, c := range []struct {
		detail string
		want   string
	}{
		{`{"writer":"aurora-usw2","promoting":""}`, "promoting=- writer=aurora-usw2"},
		{`{"record":"maintenance-page","writer":"aurora-use1","promoting":"aurora-usw2"}`, "promoting=aurora-usw2 record=maintenance-page writer=aurora-use1"},
		{``, "writer=auror"},
		{`"a string"`, "writer=auror"},
		{`{}`, "writer=auror"},
	} {
		if got := seen(Observation{Digest: d, Detail: json.RawMessage(c.detail)}); got != c.want {
			t.Errorf("seen(detail %s) = %q, want %q", c.detail, got, c.want)
		}
	}
	long := `{"k":"` + strings.Repeat("x", 300) + `"}`
	if got := seen(Observation{Digest: d, Detail: json.RawMessage(long)}); len(got) != seenLen+3 || !strings.HasSuffix(got, "...") {
		t.Errorf("a long detail is quoted as %d bytes", len(got))
	}
}
