package ledger

import (
	"testing"
	"time"
)

// TestJournalStaysInOrderPastNineTransitions: journal entries are keyed
// so that their keys sort as their sequence numbers do: an operation
// retried three times (eleven transitions) reads back in order.
func TestJournalStaysInOrderPastNineTransitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.p.set(func(p *provider) { p.lostRequest = true })
	e.authorized(e.g, "op", promote("db-b"))
	for i := 0; i < 3; i++ {
		if rec, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil || rec.State != Unknown {
			t.Fatalf("dispatch %d: %+v %v", i+1, rec, err)
		}
		if recs, err := e.l.Reconcile(e.ctx, e.g); err != nil || len(recs) != 1 || recs[0].State != Authorized {
			t.Fatalf("reconcile %d: %+v %v", i+1, recs, err)
		}
	}
	_, js := e.journal("op") // fails unless seq 1..11 come back in order
	if len(js) != 11 {
		t.Fatalf("%d journal entries, want 11", len(js))
	}
}

// TestTaskRecordsDoNotReachASiblingTask: the records of task "failover"
// are not those of "failover2": listing one task, or reconciling it, never
// touches the other's.
func TestTaskRecordsDoNotReachASiblingTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	sib, err := e.s.Claim(e.ctx, tenant, task+"2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Propose(e.ctx, sib, "sibling-op", promote("db-c"), Observation{Digest: "world-1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	recs, err := e.l.List(e.ctx, tenant, task, "")
	if err != nil || len(recs) != 1 || recs[0].Operation != "op" {
		t.Fatalf("records of %s/%s: %+v %v; want only op", tenant, task, recs, err)
	}
}
