package ledger

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestEvidenceAndParamsAreCheckedBeforeAnyIO: evidence must show
// something — an empty provider id or whitespace detail is none — so a
// Resolve to CONFIRMED or FAILED with either is invalid_input; params that
// hold two JSON values are not one set of parameters. Each is refused
// before any I/O, nothing written (pinned for indep/ledger/empty-provider-id,
// indep/ledger/evidence-whitespace, indep/resolve/failed-no-evidence,
// indep/ledger/canonical-trailing).
func TestEvidenceAndParamsAreCheckedBeforeAnyIO(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	twoValues := promote("db-c")
	twoValues.Params = json.RawMessage(`{"cluster":"db-c"} {"max_loss_s":500}`)
	for name, f := range map[string]func() error{
		"resolve confirmed, an empty provider id": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, Evidence{ProviderIDs: []string{""}}, "darius", "checked")
			return err
		},
		"resolve confirmed, whitespace detail": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, Evidence{Detail: json.RawMessage(" \n ")}, "darius", "checked")
			return err
		},
		"resolve failed, no evidence": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Failed, Evidence{}, "darius", "checked")
			return err
		},
		"propose params of two JSON values": func() error {
			_, err := e.l.Propose(e.ctx, e.g, "op2", twoValues, Observation{Digest: "world-1", At: time.Now()})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.InvalidInput, f)
		})
	}
}
