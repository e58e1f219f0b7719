package dnsupdate_test

import (
	"testing"

	"github.com/leasegate/leasegate/ledger"
)

func TestExpiredApprovalIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	w.env.ExpiredApproval(w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	if w.value(t) != "10.0.0.1" {
		t.Fatalf("value %s: the record moved", w.value(t))
	}
}

func TestChangedPolicyIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	w.env.ChangedPolicy(w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"))
	if w.value(t) != "10.0.0.1" {
		t.Fatalf("value %s: the record moved", w.value(t))
	}
}

// The UPDATE applies while the task passes to worker-b: worker-b confirms
// from the kept answer, without querying the server or updating again.
func TestAnswerInHandAfterOwnershipChangedConfirms(t *testing.T) {
	w := newWorld(t)
	w.env.AnswerInHand(w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"), nil, ledger.Confirmed, ledger.Confirmed)
	if w.value(t) != "10.0.0.2" {
		t.Fatalf("value %s", w.value(t))
	}
}

// The server refuses the UPDATE (an operator's edit in the gap: NXRRSET)
// while the task passes to worker-b: the refusal is kept and settles the
// record FAILED; the operator's value stays.
func TestRefusalInHandAfterOwnershipChangedIsNotConfirmed(t *testing.T) {
	w := newWorld(t)
	w.env.AnswerInHand(w.cnt, "traffic-db-b", w.effect(t, "10.0.0.2"), func() { w.operatorEdit(t, "10.0.0.9") }, ledger.Failed, ledger.Failed)
	if w.value(t) != "10.0.0.9" {
		t.Fatalf("value %s, want the operator's", w.value(t))
	}
}
