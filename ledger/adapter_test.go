package ledger

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// Apply is given the precondition the approval was given under, so that a
// Conditional adapter can send it with the write.
func TestApplyIsGivenTheApprovedPrecondition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	approved := e.authorized(e.g, "promote", promote("db-b"))
	if _, err := e.l.Dispatch(e.ctx, e.g, "promote"); err != nil {
		t.Fatal(err)
	}
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	if len(e.p.applyApproved) != 1 {
		t.Fatalf("%d Apply calls", len(e.p.applyApproved))
	}
	got, want := e.p.applyApproved[0], approved.Precondition
	if got.Digest != want.Digest {
		t.Errorf("Apply was given precondition digest %q, the approval's is %q", got.Digest, want.Digest)
	}
	if !got.At.Equal(want.At) {
		t.Errorf("Apply was given an observation seen at %v, the approval's was seen at %v", got.At, want.At)
	}
	if !bytes.Equal(got.Detail, want.Detail) || len(want.Detail) == 0 {
		t.Errorf("Apply was given detail %s, the approval's is %s", got.Detail, want.Detail)
	}
}

// Observe is given the record as stored: the change id an ambiguous Apply
// returned, and the epoch, time and attempt of the dispatch — what a
// provider with change ids (and no lookup by operation id) polls.
func TestObserveIsGivenTheStoredEvidence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "traffic", promote("db-b"))
	e.p.set(func(p *provider) { p.pendingChange = true })
	rec, err := e.l.Dispatch(e.ctx, e.g, "traffic")
	if err != nil || rec.State != Unknown {
		t.Fatalf("dispatch: state %s, error %v; want UNKNOWN, nil", rec.State, err)
	}
	g2 := e.takeover("worker-b")
	if _, err := e.l.Reconcile(e.ctx, g2); err != nil {
		t.Fatal(err)
	}
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	if len(e.p.observed) == 0 {
		t.Fatal("Observe was not called")
	}
	got := e.p.observed[0]
	if got.Evidence == nil || !slices.Equal(got.Evidence.ProviderIDs, []string{"change-traffic"}) {
		t.Errorf("Observe was given evidence %+v, want the change id Apply returned", got.Evidence)
	}
	if got.Epoch != e.g.Epoch || got.Owner != e.g.Owner {
		t.Errorf("Observe was given dispatch epoch %d owner %q, want %d %q", got.Epoch, got.Owner, e.g.Epoch, e.g.Owner)
	}
	if got.DispatchedAt.IsZero() || got.Attempts != 1 || got.State != Unknown {
		t.Errorf("Observe was given dispatched_at %v, attempts %d, state %s; want a time, 1, UNKNOWN", got.DispatchedAt, got.Attempts, got.State)
	}
	if got.Operation != "traffic" || got.Effect.Target != "db-b" {
		t.Errorf("Observe was given operation %q target %q", got.Operation, got.Effect.Target)
	}
}

// A contract that cannot hold is refused at New.
func TestNewRefusesAnImpossibleContract(t *testing.T) {
	t.Parallel()
	c := lgtest.Coordinator(t, embedtest.NewCluster(t))
	p := newProvider("db-promote")
	p.contract = Contract{RetrySafe: true, Retention: -time.Second}
	_, err := New(c, WithAdapters(p))
	lgtest.Want(t, err, coordinator.InvalidInput)
}
