package ledger

import (
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// A retried decision (Reject, Resolve) is recognised as the same one only
// under the same grant: the same owner label with a newer grant is another
// decision. (It survived the mutation tool before this test: tools/mutate,
// transition/applyonce-any-epoch.)
func TestRetriedDecisionIsTheSameGrantsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("a decision repeated under a newer grant of the same owner label is not a retry", func(t *testing.T) {
		// A retried Reject returns the record only if its last transition
		// is this very decision: same grant. The same owner label with a new
		// session is another grant (another epoch), and the record is
		// already REJECTED: illegal_transition, nothing written.
		e.authorized(e.g, "reject-once", promote("db-b"))
		rec, err := e.l.Reject(e.ctx, e.g, "reject-once", "withdrawn")
		if err != nil || rec.State != Rejected {
			t.Fatalf("reject: %+v %v", rec, err)
		}
		g2 := e.takeover("worker-a") // same label, new session and epoch
		_, err = e.l.Reject(e.ctx, g2, "reject-once", "withdrawn")
		lgtest.Want(t, err, coordinator.IllegalTransition)
		_, js := e.journal("reject-once")
		wantStates(t, js, Proposed, Authorized, Rejected)
	})
}
