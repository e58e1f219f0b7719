package ledger

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestOnlyTheSameApprovalRepeatsOnAnAuthorizedRecord: repeating the very
// approval of an AUTHORIZED record returns it; another approval of it —
// another approver, or the same one with another note — is not that
// approval and is refused, nothing written (pinned for
// indep/ledger/authorize-repeat-any, indep/ledger/approval-digest-no-note).
func TestOnlyTheSameApprovalRepeatsOnAnAuthorizedRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, err := e.l.Propose(e.ctx, e.g, "op", promote("db-b"), Observation{Digest: "world-1", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	a := Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, At: at, Note: "ticket 1"}
	if _, err := e.l.Authorize(e.ctx, e.g, "op", a); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Authorize(e.ctx, e.g, "op", a); err != nil {
		t.Fatalf("the same approval again: %v", err)
	}
	otherNote, otherApprover := a, a
	otherNote.Note = "ticket 2"
	otherApprover.Approver = "erin"
	for name, b := range map[string]Approval{"another note": otherNote, "another approver": otherApprover} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
				_, err := e.l.Authorize(e.ctx, e.g, "op", b)
				return err
			})
		})
	}
}
