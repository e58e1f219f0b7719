package ledger

import (
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestTransitionFromAMovedRecordNamesWhereItIs: a transition decided on a
// record as it was (AUTHORIZED) whose record has meanwhile moved to a state
// the step may not leave (CONFIRMED, by a dispatch) is illegal_transition —
// the decision no longer applies — not a version conflict to retry; and it
// writes nothing (pinned for indep/ledger/moved-illegal-as-conflict).
func TestTransitionFromAMovedRecordNamesWhereItIs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stale := e.authorized(e.g, "op", promote("db-b"))
	if rec, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil || rec.State != Confirmed {
		t.Fatalf("dispatch: %+v %v", rec, err)
	}
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
		_, err := e.l.transition(e.ctx, e.g, stale, change{to: Rejected, by: StepReject, reason: "decided on the AUTHORIZED record"})
		return err
	})
}
