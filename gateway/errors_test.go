package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/internal/store"
)

// docTable reads docs/gateway.md's disposition table: disposition → code
// name and HTTP status.
func docTable(t *testing.T) map[coordinator.Disposition][2]string {
	t.Helper()
	b, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| `([a-z_]+)` \\| ([0-9]{3}) \\|")
	out := map[coordinator.Disposition][2]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(l); m != nil {
			out[coordinator.Disposition(m[1])] = [2]string{m[2], m[3]}
		}
	}
	return out
}

// TestEveryDispositionHasOneCode: every disposition coordinator knows has a
// row in the disposition table, whose code is the one CodeOf answers with,
// done ones OK and no other; an error of it answers a JSON call with that
// code, the table's HTTP status, and the disposition, detail and hint in
// its body; and docs/gateway.md's table says the same.
func TestEveryDispositionHasOneCode(t *testing.T) {
	doc := docTable(t)
	for _, d := range coordinator.Dispositions() {
		t.Run(string(d), func(t *testing.T) {
			m, ok := store.MeaningOf(d)
			if !ok {
				t.Fatalf("disposition %s has no row in the disposition table", d)
			}
			code := gateway.CodeOf(d)
			if code != connect.Code(m.Wire) {
				t.Fatalf("disposition %s: CodeOf answers %v, the table says %v", d, code, m.Wire)
			}
			done := d.Class() == coordinator.ClassDone
			if done != (code == 0) {
				t.Fatalf("disposition %s (class %v) has code %v: done ones, and only they, are OK", d, d.Class(), code)
			}
			row, ok := doc[d]
			if !ok {
				t.Fatalf("docs/gateway.md has no row for %s", d)
			}
			if done {
				if row != [2]string{"ok", "200"} {
					t.Fatalf("docs/gateway.md: %s is %v, want ok 200", d, row)
				}
				return
			}
			err := gateway.ConnectError(store.NewError(d, "commit", "t", "k", "what was seen", nil))
			req := httptest.NewRequest(http.MethodPost, "/leasegate.v1.WorkerService/Commit", strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			if werr := connect.NewErrorWriter().Write(rec, req, err); werr != nil {
				t.Fatal(werr)
			}
			if row[0] != code.String() || row[1] != strconv.Itoa(rec.Code) || rec.Code != m.HTTP {
				t.Fatalf("docs/gateway.md says %s is %s %s, the table %d; the gateway answers %s %d", d, row[0], row[1], m.HTTP, code, rec.Code)
			}
			var body struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Details []struct {
					Type  string `json:"type"`
					Debug struct {
						Disposition, Op, Tenant, Task, Detail, Hint string
					} `json:"debug"`
				} `json:"details"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			if body.Code != code.String() || len(body.Details) != 1 || body.Details[0].Type != "leasegate.v1.Refusal" {
				t.Fatalf("body %s: want code %s and one leasegate.v1.Refusal", rec.Body, code)
			}
			r := body.Details[0].Debug
			if r.Disposition != string(d) || r.Hint != d.Hint() || r.Detail != "what was seen" || r.Op != "commit" || r.Tenant != "t" || r.Task != "k" {
				t.Fatalf("refusal %+v, want %s with its hint and detail", r, d)
			}
			if !strings.HasPrefix(body.Message, string(d)+": "+d.Hint()) {
				t.Fatalf("message %q: want the CLI's line", body.Message)
			}
		})
	}
}

// An error that names no disposition is answered as outcome_unknown: never
// as success or as a refusal.
func TestAForeignErrorIsOutcomeUnknown(t *testing.T) {
	err := gateway.ConnectError(os.ErrClosed)
	if connect.CodeOf(err) != connect.CodeUnknown {
		t.Fatalf("code %v, want unknown", connect.CodeOf(err))
	}
	if d := coordinator.DispositionOf(asRefusal(err)); d != coordinator.OutcomeUnknown {
		t.Fatalf("disposition %s, want outcome_unknown", d)
	}
}
