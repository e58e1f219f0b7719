package pgpromote_test

import (
	"testing"

	"github.com/leasegate/leasegate/ledger"
)

// An approval older than the ledger's validity is not dispatched: the
// standby is not promoted, the record is back in PROPOSED.
func TestExpiredApprovalIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	w.env.ExpiredApproval(w.cnt, "promote-db-b", w.effect(t, "db-b"))
	if w.role(t, w.pair.Standby) != "standby" {
		t.Fatal("db-b was promoted")
	}
}

// A policy changed since the approval: not dispatched.
func TestChangedPolicyIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	w.env.ChangedPolicy(w.cnt, "promote-db-b", w.effect(t, "db-b"))
	if w.role(t, w.pair.Standby) != "standby" {
		t.Fatal("db-b was promoted")
	}
}

// worker-a's promote succeeds while the task passes to worker-b: the
// answer is kept, and worker-b confirms from it without reading the
// topology again or promoting again.
func TestAnswerInHandAfterOwnershipChangedConfirms(t *testing.T) {
	w := newWorld(t)
	rec := w.env.AnswerInHand(w.cnt, "promote-db-b", w.effect(t, "db-b"), nil, ledger.Confirmed, ledger.Confirmed)
	if w.role(t, w.pair.Standby) != "writer" || rec.Evidence == nil || rec.Evidence.Empty() {
		t.Fatalf("db-b %s, evidence %+v", w.role(t, w.pair.Standby), rec.Evidence)
	}
}

// The server refuses worker-a's promote (an operator promoted db-b by hand
// in the gap) while the task passes to worker-b: the refusal is kept and
// settles the record without a second call. "Assume applied" would
// confirm a promotion the server refused.
func TestRefusalInHandAfterOwnershipChangedIsNotConfirmed(t *testing.T) {
	w := newWorld(t)
	promoteByHand := func() {
		if err := w.pair.Standby.Promote(w.env.Ctx); err != nil {
			t.Error(err)
		}
	}
	w.env.AnswerInHand(w.cnt, "promote-db-b", w.effect(t, "db-b"), promoteByHand, ledger.Failed, ledger.Failed)
}
