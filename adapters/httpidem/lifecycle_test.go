package httpidem_test

import (
	"testing"

	"github.com/leasegate/leasegate/ledger"
)

func TestExpiredApprovalIsNotDispatched(t *testing.T) {
	w := newWorld(t, false)
	w.env.ExpiredApproval(w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	if w.srv.Applied("traffic-db-b") != 0 || w.srv.Value("checkout") != "db-a" {
		t.Fatal("the service applied it")
	}
}

func TestChangedPolicyIsNotDispatched(t *testing.T) {
	w := newWorld(t, false)
	w.env.ChangedPolicy(w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	if w.srv.Applied("traffic-db-b") != 0 || w.srv.Value("checkout") != "db-a" {
		t.Fatal("the service applied it")
	}
}

func TestAnswerInHandAfterOwnershipChangedConfirms(t *testing.T) {
	w := newWorld(t, false)
	w.env.AnswerInHand(w.cnt, "traffic-db-b", w.effect(t, "db-b"), nil, ledger.Confirmed, ledger.Confirmed)
	if w.srv.Applied("traffic-db-b") != 1 {
		t.Fatalf("applied %d", w.srv.Applied("traffic-db-b"))
	}
}

// The service refuses (412: the resource moved in the gap) while the task
// passes to worker-b: FAILED from the kept answer, no lookup, no re-POST.
func TestRefusalInHandAfterOwnershipChangedIsNotConfirmed(t *testing.T) {
	w := newWorld(t, false)
	w.env.AnswerInHand(w.cnt, "traffic-db-b", w.effect(t, "db-b"), func() { w.srv.Set("checkout", "db-c") }, ledger.Failed, ledger.Failed)
	if w.srv.Value("checkout") != "db-c" {
		t.Fatalf("value %s", w.srv.Value("checkout"))
	}
}
