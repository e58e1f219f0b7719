package ledger

import (
	"context"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"strings"
	"sync"
	"testing"
	"time"
)

// notAppliedAfter dispatches op with its request lost (the provider shows
// it not applied) and moves the clock on by later: the record is UNKNOWN,
// for a new owner to reconcile.
func notAppliedAfter(t *testing.T, e *env, advance func(time.Duration), later time.Duration) {
	t.Helper()
	e.p.set(func(p *provider) { p.lostRequest = true })
	e.authorized(e.g, "op", promote("db-b"))
	wantState(t, "dispatch", Unknown)(e.l.Dispatch(e.ctx, e.g, "op"))
	advance(later)
	e.p.set(func(p *provider) { p.lostRequest = false })
}

func fakeClock() (func() time.Time, func(time.Duration)) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 2, 13, 24, 0, time.UTC)
	return func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
}

// TestNotAppliedExactlyARetentionLaterIsManualReview: the provider
// remembers an id for its Retention; a retry exactly that long after the
// first dispatch is no longer covered, so the record goes to MANUAL_REVIEW,
// not back to AUTHORIZED (pinned for indep/reconcile/retention-boundary).
func TestNotAppliedExactlyARetentionLaterIsManualReview(t *testing.T) {
	t.Parallel()
	clock, advance := fakeClock()
	e := newEnv(t, WithClock(clock))
	notAppliedAfter(t, e, advance, time.Hour) // the provider's Retention
	g2 := e.takeover("worker-b")
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", ManualReview)(recs, err)
}

// TestNotAppliedWithThePreconditionUnobservableIsNotSuperseded: when the
// provider cannot show the world at reconcile time, the ledger does not
// know that it changed: the record is not SUPERSEDED (it goes back to
// AUTHORIZED, and Dispatch revalidates before any retry) (pinned for
// indep/reconcile/precondition-error-supersedes).
func TestNotAppliedWithThePreconditionUnobservableIsNotSuperseded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notAppliedAfter(t, e, func(time.Duration) {}, 0)
	e.p.set(func(p *provider) { p.preErr = errObserve })
	g2 := e.takeover("worker-b")
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Authorized)(recs, err)
}

// TestProviderAnswerIsRecordedAfterTheCallerGivesUp: once Apply returned,
// its answer is recorded even if the caller's context ended meanwhile
// (pinned for indep/ledger/outcome-cancellable).
func TestProviderAnswerIsRecordedAfterTheCallerGivesUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	e.p.set(func(p *provider) { p.afterApply = func(string) { cancel() } })
	e.l.Dispatch(ctx, e.g, "op") //nolint:errcheck // the record is what counts
	rec, _ := e.journal("op")
	if rec.State != Confirmed {
		t.Fatalf("record after the caller gave up during Apply: %s; want CONFIRMED", rec.State)
	}
}

// TestJournalStaysInOrderPastNineTransitions: journal entries are keyed
// so that their keys sort as their sequence numbers do: an operation
// retried three times (eleven transitions) reads back in order (pinned for
// indep/keys/journal-unpadded).
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
// touches the other's (pinned for indep/keys/effect-prefix-open).
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

// TestNotAppliedConditionalWithTheWorldUnobservableIsReviewed: a
// Conditional-only provider (DNS) showing the effect not applied while its
// world cannot be observed: not superseded (the world is not known to have
// changed) and not retried (the provider's check does not make a retry
// safe): MANUAL_REVIEW, saying why.
func TestNotAppliedConditionalWithTheWorldUnobservableIsReviewed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.p.set(func(p *provider) { p.contract = Contract{Conditional: true} })
	notAppliedAfter(t, e, func(time.Duration) {}, 0)
	e.p.set(func(p *provider) { p.preErr = errObserve })
	g2 := e.takeover("worker-b")
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", ManualReview)(recs, err)
	_, js := e.journal("op")
	if last := js[len(js)-1].Reason; !strings.Contains(last, "could not be observed") || !strings.Contains(last, "retry under the same id safe") {
		t.Fatalf("reason %q", last)
	}
	if _, apply, _ := e.p.calls(); apply != 1 {
		t.Fatalf("%d Apply calls: a silent retry", apply)
	}
}

// TestRetentionCountsFromTheFirstDispatch: the provider remembers the
// operation id from its first attempt, so a second "not applied", after a
// retry, is retried again only within Retention of the first dispatch, not
// of the retry's claim: 40 minutes after the first dispatch it is retried,
// 70 minutes after it (30 after the retry) it goes to MANUAL_REVIEW.
func TestRetentionCountsFromTheFirstDispatch(t *testing.T) {
	t.Parallel()
	clock, advance := fakeClock()
	e := newEnv(t, WithClock(clock), WithApprovalValidity(2*time.Hour)) // the provider's Retention: one hour
	first := clock().UTC()
	notAppliedAfter(t, e, advance, 40*time.Minute)
	g2 := e.takeover("worker-b")
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "first reconcile", Authorized)(recs, err)

	e.p.set(func(p *provider) { p.lostRequest = true })
	rec, err := e.l.Dispatch(e.ctx, g2, "op")
	if err != nil || rec.State != Unknown || rec.Attempts != 2 || rec.DispatchedAt.Equal(first) {
		t.Fatalf("retry: %s attempts %d last claim %v (%v); want UNKNOWN, claimed after the first", rec.State, rec.Attempts, rec.DispatchedAt, err)
	}
	e.p.set(func(p *provider) { p.lostRequest = false })
	advance(30 * time.Minute)
	if err := e.c.RevokeLease(e.ctx, g2.Lease); err != nil {
		t.Fatal(err)
	}
	g3 := lgtest.Claim(t, lgtest.Session(t, e.c, "worker-c", 10*time.Second), tenant, task)
	recs, err = e.l.Reconcile(e.ctx, g3)
	wantOne(t, "second reconcile", ManualReview)(recs, err)
	if _, apply, _ := e.p.calls(); apply != 2 {
		t.Fatalf("%d Apply calls, want 2", apply)
	}
}
