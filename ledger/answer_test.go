package ledger

import (
	"slices"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// An answer that comes back after the next owner dispatched the operation
// again is not kept on that newer dispatch: it would be taken for its
// outcome.
func TestLateAnswerOfAnEarlierDispatchIsNotKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
	entered := []chan struct{}{make(chan struct{}), make(chan struct{})}
	calls := 0
	e.p.set(func(p *provider) {
		p.lostRequest = true // the first attempt never lands: Observe shows it not applied
		p.onApply = func(string) {
			p.mu.Lock()
			i := calls
			calls++
			p.mu.Unlock()
			close(entered[i])
			<-gates[i]
		}
	})
	first := make(chan error, 1)
	go func() { _, err := e.l.Dispatch(e.ctx, e.g, "op"); first <- err }()
	lgtest.Wait(t, entered[0], "the first dispatch to reach the provider")
	g2 := e.takeover("worker-b")
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Authorized)(recs, err)
	second := make(chan Record, 1)
	go func() {
		rec, err := e.l.Dispatch(e.ctx, g2, "op")
		if err != nil {
			t.Errorf("second dispatch: %v", err)
		}
		second <- rec
	}()
	lgtest.Wait(t, entered[1], "the second dispatch to reach the provider")
	e.p.set(func(p *provider) { p.lostRequest = false })
	close(gates[0]) // the first answer comes back while the second dispatch is in flight
	lgtest.Want(t, <-first, coordinator.StaleOwner)
	rec, _, err := e.l.Record(e.ctx, tenant, task, "op")
	if err != nil || rec.State != Dispatching || rec.Answer != nil || rec.Epoch != g2.Epoch {
		t.Fatalf("after the first answer: state %s epoch %d answer %+v (%v); want DISPATCHING by %d, no answer",
			rec.State, rec.Epoch, rec.Answer, err, g2.Epoch)
	}
	close(gates[1])
	if rec := <-second; rec.State != Confirmed {
		t.Fatalf("second dispatch ended %s", rec.State)
	}
}

// An ambiguous answer kept after ownership changed settles nothing, but
// its evidence (a change id) reaches the next owner's Observe.
func TestAmbiguousKeptAnswerGoesToObserve(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "traffic", promote("db-b"))
	e.p.set(func(p *provider) {
		p.pendingChange = true
		p.afterApply = func(string) {
			if err := e.c.RevokeLease(e.ctx, e.g.Lease); err != nil {
				t.Errorf("revoke: %v", err)
			}
		}
	})
	rec, err := e.l.Dispatch(e.ctx, e.g, "traffic")
	lgtest.Want(t, err, coordinator.ExpiredOwner)
	if a := rec.answer(); a == nil || a.To != Unknown || a.Evidence == nil {
		t.Fatalf("kept answer %+v; want UNKNOWN with the change id", rec.Answer)
	}
	e.p.set(func(p *provider) { p.afterApply = nil })
	g2 := lgtest.Claim(t, lgtest.Session(t, e.c, "worker-b", 10*time.Second), tenant, task)
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Confirmed)(recs, err)
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	if len(e.p.observed) == 0 || e.p.observed[0].Evidence == nil ||
		!slices.Equal(e.p.observed[0].Evidence.ProviderIDs, []string{"change-traffic"}) {
		t.Fatalf("Observe was given %+v; want the kept answer's change id as evidence", e.p.observed)
	}
}

// An answer that comes back after the next owner settled the record (from
// the provider's authority) is not kept: the record has moved past it.
func TestAnswerAfterTheRecordSettledIsNotKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	entered, release := make(chan struct{}), make(chan struct{})
	e.p.set(func(p *provider) { p.afterApply = func(string) { close(entered); <-release } })
	done := make(chan error, 1)
	go func() { _, err := e.l.Dispatch(e.ctx, e.g, "op"); done <- err }()
	lgtest.Wait(t, entered, "the provider to apply")
	g2 := e.takeover("worker-b")
	wantOne(t, "reconcile", Confirmed)(e.l.Reconcile(e.ctx, g2))
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.StaleOwner, func() error {
		close(release) // the late answer of a settled record
		return <-done
	})
}

// The answer is kept while the next owner is observing the UNKNOWN record:
// that owner's transition is refused (the record moved), and Reconcile
// decides again on the record as it is — settled from the answer, not an
// error.
func TestAnswerKeptWhileTheNextOwnerObserves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	entered, release := make(chan struct{}), make(chan struct{})
	e.p.set(func(p *provider) { p.afterApply = func(string) { close(entered); <-release } })
	done := make(chan error, 1)
	go func() { _, err := e.l.Dispatch(e.ctx, e.g, "op"); done <- err }()
	lgtest.Wait(t, entered, "the provider to apply")
	g2 := e.takeover("worker-b")
	e.p.set(func(p *provider) {
		p.onObserve = func() { // the old owner's answer lands while the new owner asks
			p.mu.Lock()
			p.onObserve = nil
			p.mu.Unlock()
			close(release)
			lgtest.Want(t, <-done, coordinator.StaleOwner)
		}
	})
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Confirmed)(recs, err)
	_, js := e.journal("op")
	wantStates(t, js, Proposed, Authorized, Dispatching, Unknown, Unknown, Confirmed)
}

// A definite refusal kept on an UNKNOWN record is read as "not applied"
// for that dispatch: a retry-safe contract puts it back to AUTHORIZED, with
// no Observe; an uncertain operation never ends FAILED by itself.
func TestKeptRefusalOfAnUnknownRecordIsNotApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	entered, release := make(chan struct{}), make(chan struct{})
	e.p.set(func(p *provider) {
		p.refuse = &RefusedError{Reason: "validation", Evidence: Evidence{ProviderIDs: []string{"req-refused"}}}
		p.onApply = func(string) { close(entered); <-release }
	})
	done := make(chan error, 1)
	go func() { _, err := e.l.Dispatch(e.ctx, e.g, "op"); done <- err }()
	lgtest.Wait(t, entered, "the dispatch to reach the provider")
	g2 := e.takeover("worker-b")
	e.p.set(func(p *provider) { p.observeScript = slices.Repeat([]Outcome{Pending}, DefaultPolls) })
	wantOne(t, "reconcile", Unknown)(e.l.Reconcile(e.ctx, g2))
	_, _, observed := e.p.calls()
	close(release)
	lgtest.Want(t, <-done, coordinator.StaleOwner)
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Authorized)(recs, err)
	if _, _, obs := e.p.calls(); obs != observed {
		t.Fatalf("%d Observe calls after the kept refusal, want none", obs-observed)
	}
}
