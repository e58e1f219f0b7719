package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// The seed-003 incident, made harmless: the provider applied, its answer was
// lost; the next owner reconciles against the provider's authority and
// confirms the same operation — the provider applied it exactly once.
func TestDroppedResponseIsReconciledNotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "promote", promote("db-b"))
	e.p.set(func(p *provider) { p.dropResponse = true })
	rec, err := e.l.Dispatch(e.ctx, e.g, "promote")
	if err != nil || rec.State != Unknown {
		t.Fatalf("dispatch: %+v %v", rec, err)
	}
	g2 := e.takeover("worker-b")
	recs, err := e.l.Reconcile(e.ctx, g2)
	if err != nil || len(recs) != 1 || recs[0].State != Confirmed || recs[0].Evidence.Empty() {
		t.Fatalf("reconcile: %+v %v", recs, err)
	}
	if n := e.p.appliedCount("promote"); n != 1 {
		t.Fatalf("provider applied %d times", n)
	}
	if _, apply, _ := e.p.calls(); apply != 1 {
		t.Fatalf("%d Apply calls", apply)
	}
	_, js := e.journal("promote")
	wantStates(t, js, Proposed, Authorized, Dispatching, Unknown, Confirmed)
	if js[4].Epoch != g2.Epoch || js[4].By != StepReconcile {
		t.Fatalf("confirmation %+v", js[4])
	}
}

// The worker's lease ends after the provider applied, before it could
// persist the receipt: its confirmation Txn is refused, the answer is kept
// on the DISPATCHING record, and the next owner settles from it without
// asking the provider.
func TestWorkerStoppedBeforeReceiptIsReconciledByNextOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "promote", promote("db-b"))
	e.p.set(func(p *provider) {
		p.afterApply = func(string) { // the worker's lease ends while the answer travels back
			if err := e.c.RevokeLease(context.Background(), e.g.Lease); err != nil {
				t.Errorf("revoke: %v", err)
			}
		}
	})
	rec, err := e.l.Dispatch(e.ctx, e.g, "promote")
	lgtest.Want(t, err, coordinator.ExpiredOwner)
	if rec.State != Dispatching || rec.Epoch != e.g.Epoch {
		t.Fatalf("after a refused confirmation: state %s epoch %d, want DISPATCHING %d", rec.State, rec.Epoch, e.g.Epoch)
	}
	if a := rec.answer(); a == nil || a.To != Confirmed || a.Evidence.Empty() {
		t.Fatalf("after a refused confirmation: kept answer %+v, want CONFIRMED with evidence", rec.Answer)
	}
	e.p.set(func(p *provider) { p.afterApply = nil })
	s := lgtest.Session(t, e.c, "worker-b", 10*time.Second)
	g2 := lgtest.Claim(t, s, tenant, task)
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Confirmed)(recs, err)
	if n := e.p.appliedCount("promote"); n != 1 {
		t.Fatalf("provider applied %d times", n)
	}
	if _, apply, obs := e.p.calls(); apply != 1 || obs != 0 {
		t.Fatalf("%d Apply, %d Observe calls; want 1, 0 (settled from the kept answer)", apply, obs)
	}
	if recs[0].Answer != nil || recs[0].Evidence.Empty() {
		t.Fatalf("settled record: answer %+v, evidence %+v; want the answer cleared and its evidence the record's", recs[0].Answer, recs[0].Evidence)
	}
	_, js := e.journal("promote")
	wantStates(t, js, Proposed, Authorized, Dispatching, Dispatching, Confirmed)
	if js[3].By != StepAnswer || js[3].Epoch != e.g.Epoch || js[4].By != StepReconcile || js[4].Epoch != g2.Epoch {
		t.Fatalf("journal %+v: want the answer kept by epoch %d, settled by %d", js[3:], e.g.Epoch, g2.Epoch)
	}
}

// Ownership moves while the provider call is in flight: the newer epoch
// cannot cancel it, the old owner's confirmation is refused, and the next
// owner resolves the operation.
func TestOwnershipLostMidDispatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "promote", promote("db-b"))
	entered, release := make(chan struct{}), make(chan struct{})
	e.p.set(func(p *provider) {
		p.onApply = func(string) { close(entered); <-release }
	})
	type result struct {
		rec Record
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := e.l.Dispatch(e.ctx, e.g, "promote")
		done <- result{rec, err}
	}()
	lgtest.Wait(t, entered, "the dispatch to reach the provider")
	// The owner's own Reconcile leaves its in-flight dispatch alone.
	if recs, err := e.l.Reconcile(e.ctx, e.g); err != nil || len(recs) != 0 {
		t.Fatalf("reconcile by the dispatching owner: %+v %v", recs, err)
	}
	g2 := e.takeover("worker-b")
	// The new owner cannot claim the dispatch again while it is DISPATCHING.
	_, err := e.l.Dispatch(e.ctx, g2, "promote")
	lgtest.Want(t, err, coordinator.IllegalTransition)
	close(release)
	var r result
	select {
	case r = <-done:
	case <-time.After(lgtest.Timeout):
		t.Fatal("dispatch did not return")
	}
	lgtest.Want(t, r.err, coordinator.StaleOwner)
	if r.rec.State != Dispatching || r.rec.answer() == nil {
		t.Fatalf("old owner's record: state %s, answer %+v; want DISPATCHING with the answer kept", r.rec.State, r.rec.Answer)
	}
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Confirmed)(recs, err)
	if _, apply, obs := e.p.calls(); apply != 1 || obs != 0 || e.p.appliedCount("promote") != 1 {
		t.Fatalf("%d Apply, %d Observe calls; want 1, 0", apply, obs)
	}
}

// The answer arrives after the next owner already made the record UNKNOWN
// (its Observe was still pending): it is kept on the UNKNOWN record, and the
// next Reconcile settles from it with no further provider call.
func TestAnswerAfterTheNextOwnerReconciledIsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "promote", promote("db-b"))
	entered, release := make(chan struct{}), make(chan struct{})
	e.p.set(func(p *provider) { p.onApply = func(string) { close(entered); <-release } })
	done := make(chan error, 1)
	go func() { _, err := e.l.Dispatch(e.ctx, e.g, "promote"); done <- err }()
	lgtest.Wait(t, entered, "the dispatch to reach the provider")
	g2 := e.takeover("worker-b")
	e.p.set(func(p *provider) {
		p.observeScript = []Outcome{Pending, Pending, Pending, Pending, Pending, Pending, Pending, Pending}
	})
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Unknown)(recs, err)
	_, _, observed := e.p.calls()
	close(release)
	var derr error
	select {
	case derr = <-done:
	case <-time.After(lgtest.Timeout):
		t.Fatal("dispatch did not return")
	}
	lgtest.Want(t, derr, coordinator.StaleOwner)
	rec, js := e.journal("promote")
	if rec.State != Unknown || rec.answer() == nil || rec.answer().To != Confirmed {
		t.Fatalf("after the late answer: state %s answer %+v; want UNKNOWN with a CONFIRMED answer", rec.State, rec.Answer)
	}
	wantStates(t, js, Proposed, Authorized, Dispatching, Unknown, Unknown)
	recs, err = e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Confirmed)(recs, err)
	if _, apply, obs := e.p.calls(); apply != 1 || obs != observed {
		t.Fatalf("%d Apply, %d Observe calls; want 1, %d (no call after the answer)", apply, obs, observed)
	}
	rec, js = e.journal("promote")
	if rec.Evidence == nil || rec.Evidence.Empty() || js[len(js)-1].Epoch != g2.Epoch {
		t.Fatalf("confirmation: evidence %+v, by epoch %d; want the answer's evidence, by %d", rec.Evidence, js[len(js)-1].Epoch, g2.Epoch)
	}
}

// A kept answer of an earlier dispatch is not the record's to settle from:
// only one under the record's current dispatch id is.
func TestAnswerOfAnotherDispatchIsIgnored(t *testing.T) {
	t.Parallel()
	rec := Record{DispatchID: "d-2", Answer: &Answer{DispatchID: "d-1", To: Confirmed}}
	if rec.answer() != nil {
		t.Fatal("an answer under dispatch d-1 was taken for dispatch d-2's")
	}
	rec.Answer.DispatchID = "d-2"
	if rec.answer() == nil {
		t.Fatal("the answer under the record's dispatch id was not found")
	}
}

// A provider that stays pending keeps the record UNKNOWN (nothing written),
// polled with a bounded backoff; once it settles, CONFIRMED.
func TestPendingStaysUnknownThenConfirms(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var waits []time.Duration
	e := newEnv(t, WithPolling(10*time.Millisecond, 25*time.Millisecond, 4),
		WithSleep(func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			return ctx.Err()
		}))
	e.authorized(e.g, "dns", promote("db-b"))
	e.p.set(func(p *provider) {
		p.dropResponse = true
		p.observeScript = []Outcome{Pending, Pending, Pending, Pending, Pending, Pending} // then the truth: applied
	})
	wantState(t, "dispatch", Unknown)(e.l.Dispatch(e.ctx, e.g, "dns"))
	lgtest.WritesNothing(t, e.c.Client(), e.c.Keys().Prefix(), "a reconcile that stayed pending", func() {
		wantOne(t, "reconcile", Unknown)(e.l.Reconcile(e.ctx, e.g))
	})
	mu.Lock()
	if fmt.Sprint(waits) != "[10ms 20ms 25ms]" {
		t.Fatalf("backoff waits %v", waits)
	}
	mu.Unlock()
	wantOne(t, "reconcile", Confirmed)(e.l.Reconcile(e.ctx, e.g)) // two more pending, then settled
	_, js := e.journal("dns")
	wantStates(t, js, Proposed, Authorized, Dispatching, Unknown, Confirmed)
}

// Inconclusive past the bound goes to MANUAL_REVIEW; only an operator's
// Resolve, with evidence, approver and why, moves it on.
func TestInconclusiveGoesToManualReviewThenOperatorResolves(t *testing.T) {
	t.Parallel()
	t.Run("observe fails", func(t *testing.T) {
		t.Parallel()
		testManualReview(t, func(p *provider) { p.observeErr = errObserve })
	})
	t.Run("applied without evidence", func(t *testing.T) {
		t.Parallel()
		testManualReview(t, func(p *provider) { p.observeBare = true })
	})
}

func testManualReview(t *testing.T, fault func(p *provider)) {
	e := newEnv(t, WithPolling(time.Millisecond, time.Millisecond, 3))
	e.authorized(e.g, "op", promote("db-b"))
	e.p.set(func(p *provider) { p.dropResponse = true; fault(p) })
	wantState(t, "dispatch", Unknown)(e.l.Dispatch(e.ctx, e.g, "op"))
	recs, err := e.l.Reconcile(e.ctx, e.g)
	wantOne(t, "reconcile", ManualReview)(recs, err)
	if _, _, obs := e.p.calls(); obs != 3 {
		t.Fatalf("%d observations, want the bound 3", obs)
	}
	// Reconcile leaves MANUAL_REVIEW alone.
	if recs, err := e.l.Reconcile(e.ctx, e.g); err != nil || len(recs) != 0 {
		t.Fatalf("second reconcile: %+v %v", recs, err)
	}
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.InvalidInput, func() error { // CONFIRMED needs evidence
		_, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, Evidence{}, "imani", "CloudTrail shows the promotion")
		return err
	})
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
		_, err := e.l.Resolve(e.ctx, e.g, "op", Dispatching, Evidence{}, "imani", "retry it")
		return err
	})
	ev := Evidence{ProviderIDs: []string{"cloudtrail-evt-42"}, Detail: json.RawMessage(`{"writer":"db-b"}`)}
	rec, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, ev, "imani", "CloudTrail shows the promotion")
	if err != nil || rec.State != Confirmed {
		t.Fatalf("resolve: %+v %v", rec, err)
	}
	_, js := e.journal("op")
	wantStates(t, js, Proposed, Authorized, Dispatching, Unknown, ManualReview, Confirmed)
	if last := js[5]; last.Approver != "imani" || last.By != StepResolve || last.Evidence == nil || last.Reason == "" {
		t.Fatalf("resolution entry %+v", last)
	}
	// Retrying the same decision (after an unknown outcome, say) returns the record.
	ev.Detail = json.RawMessage(`{ "writer": "db-b" }`)
	again, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, ev, "imani", "CloudTrail shows the promotion")
	if err != nil || again.Revision != rec.Revision {
		t.Fatalf("retried resolve: %+v %v", again, err)
	}
	_, err = e.l.Resolve(e.ctx, e.g, "op", Confirmed, ev, "imani", "another reason")
	lgtest.Want(t, err, coordinator.IllegalTransition)
	_, err = e.l.Resolve(e.ctx, e.g, "op", Failed, ev, "imani", "changed my mind")
	lgtest.Want(t, err, coordinator.IllegalTransition)
}

// "Not applied" is retried under the same operation id only where the
// provider's contract makes that safe, within its retention, in the same
// world; superseded in a changed world only where a late attempt is ruled
// out (a provider-side precondition, or a lookup within the retention),
// whether or not a retry would be safe; MANUAL_REVIEW otherwise. Each
// branch of notApplied's classification, in its order, has a case here
// that another order or a missing branch gets wrong.
func TestNotApplied(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		contract Contract
		later    time.Duration // how long after the dispatch the reconcile runs
		world    string
		want     State
		observes int  // Observe calls: one with a lookup by id; without, every poll up to the bound
		noWorld  bool // the world is not observed: no outcome but review could follow
	}{
		{"retry-safe", Contract{Lookup: true, RetrySafe: true, Retention: time.Hour}, time.Minute, "world-1", Authorized, 1, false},
		{"retry-unsafe", Contract{Lookup: true, RetrySafe: false, Retention: time.Hour}, time.Minute, "world-1", ManualReview, 1, false},
		{"past retention", Contract{Lookup: true, RetrySafe: true, Retention: time.Hour}, 2 * time.Hour, "world-1", ManualReview, 1, true},
		{"no retention promised", Contract{Lookup: true, RetrySafe: true}, time.Minute, "world-1", ManualReview, 1, true},
		{"world changed", Contract{Lookup: true, RetrySafe: true, Retention: time.Hour}, time.Minute, "world-2", Superseded, 1, false},
		// Without a lookup by id, not applied is what the provider's state
		// shows now: observed again up to the bound, then decided.
		{"no lookup, retry-safe", Contract{RetrySafe: true, Retention: time.Hour}, time.Minute, "world-1", Authorized, DefaultPolls, false},
		{"no lookup, retry-unsafe", Contract{Retention: time.Hour}, time.Minute, "world-1", ManualReview, DefaultPolls, true},
		// A late attempt could still land in the changed world: not
		// superseded unless the provider checks the precondition itself.
		{"no lookup, world changed", Contract{RetrySafe: true, Retention: time.Hour}, time.Minute, "world-2", ManualReview, DefaultPolls, false},
		{"no lookup, conditional, world changed", Contract{RetrySafe: true, Retention: time.Hour, Conditional: true}, time.Minute, "world-2", Superseded, DefaultPolls, false},
		// A provider-side precondition (DNS prerequisites) rules out a late
		// attempt in the changed world without making a retry safe: it
		// supersedes, and in the approved world goes to review.
		{"conditional only, world changed", Contract{Conditional: true}, time.Minute, "world-2", Superseded, DefaultPolls, false},
		{"conditional only, same world", Contract{Conditional: true}, time.Minute, "world-1", ManualReview, DefaultPolls, false},
		{"conditional, past retention, world changed", Contract{RetrySafe: true, Retention: time.Hour, Conditional: true}, 2 * time.Hour, "world-2", Superseded, DefaultPolls, false},
		// A lookup covers every attempt while the provider remembers the id.
		{"lookup, retry-unsafe, world changed", Contract{Lookup: true, Retention: time.Hour}, time.Minute, "world-2", Superseded, 1, false},
		{"lookup, past retention, world changed", Contract{Lookup: true, RetrySafe: true, Retention: time.Hour}, 2 * time.Hour, "world-2", ManualReview, 1, true},
		{"lookup, no retention promised, world changed", Contract{Lookup: true}, time.Minute, "world-2", ManualReview, 1, true},
		// Nothing but review can follow: the world is not even observed.
		{"zero contract, world changed", Contract{}, time.Minute, "world-2", ManualReview, DefaultPolls, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			now := time.Date(2026, 11, 30, 2, 13, 24, 0, time.UTC)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			e := newEnv(t, WithClock(clock))
			e.p.set(func(p *provider) { p.contract, p.lostRequest = tc.contract, true })
			e.authorized(e.g, "op", promote("db-b"))
			wantState(t, "dispatch", Unknown)(e.l.Dispatch(e.ctx, e.g, "op"))
			mu.Lock()
			now = now.Add(tc.later)
			mu.Unlock()
			e.p.set(func(p *provider) { p.lostRequest, p.world = false, tc.world })
			g2 := e.takeover("worker-b")
			preBefore, _, _ := e.p.calls()
			recs, err := e.l.Reconcile(e.ctx, g2)
			if err != nil || len(recs) != 1 || recs[0].State != tc.want {
				t.Fatalf("reconcile: %+v %v", recs, err)
			}
			pre, _, obs := e.p.calls()
			if obs != tc.observes {
				t.Fatalf("%d Observe calls, want %d", obs, tc.observes)
			}
			if observed := pre > preBefore; observed == tc.noWorld {
				t.Fatalf("the world observed by Reconcile: %v, want %v", observed, !tc.noWorld)
			}
			if tc.want != Authorized {
				if _, apply, _ := e.p.calls(); apply != 1 {
					t.Fatalf("%d Apply calls: a silent retry", apply)
				}
				return
			}
			rec, err := e.l.Dispatch(e.ctx, g2, "op")
			if err != nil || rec.State != Confirmed || rec.Attempts != 2 || rec.Epoch != g2.Epoch {
				t.Fatalf("retry: %+v %v", rec, err)
			}
			e.p.mu.Lock()
			calls := fmt.Sprint(e.p.applyCalls)
			e.p.mu.Unlock()
			if want := fmt.Sprintf("[op@%d op@%d]", e.g.Epoch, g2.Epoch); calls != want {
				t.Fatalf("apply calls %s, want %s (the same operation id)", calls, want)
			}
			_, js := e.journal("op")
			wantStates(t, js, Proposed, Authorized, Dispatching, Unknown, Authorized, Dispatching, Confirmed)
		})
	}
}

func TestReconcileByStaleGrantObservesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	e.p.set(func(p *provider) { p.dropResponse = true })
	if _, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil {
		t.Fatal(err)
	}
	old := e.g
	e.takeover("worker-b")
	_, err := e.l.Reconcile(e.ctx, old)
	lgtest.Want(t, err, coordinator.StaleOwner)
	if _, _, obs := e.p.calls(); obs != 0 {
		t.Fatalf("a stale reconcile observed %d times", obs)
	}
}

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
// not back to AUTHORIZED.
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
// AUTHORIZED, and Dispatch revalidates before any retry).
func TestNotAppliedWithThePreconditionUnobservableIsNotSuperseded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notAppliedAfter(t, e, func(time.Duration) {}, 0)
	e.p.set(func(p *provider) { p.preErr = errObserve })
	g2 := e.takeover("worker-b")
	recs, err := e.l.Reconcile(e.ctx, g2)
	wantOne(t, "reconcile", Authorized)(recs, err)
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

// Reconcile revalidates an effect's requirements as it does its own
// precondition: an operation the provider shows not applied, whose own
// world is unchanged but whose required world (another adapter's) moved,
// is SUPERSEDED rather than put back to AUTHORIZED for a retry; with the
// required world unchanged it is retried.
func TestReconcileRevalidatesRequirements(t *testing.T) {
	t.Parallel()
	for _, moved := range []bool{true, false} {
		t.Run(fmt.Sprintf("required world moved %v", moved), func(t *testing.T) {
			t.Parallel()
			topo := newProvider("topology")
			e := newEnv(t, WithAdapters(topo))
			e.p.set(func(p *provider) { p.lostRequest = true })
			eff := promote("db-b")
			pre, err := e.p.Precondition(e.ctx, eff)
			if err != nil {
				t.Fatal(err)
			}
			seenTopo, err := topo.Precondition(e.ctx, Effect{Kind: "topology", Target: "cluster"})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := e.l.ProposeRequiring(e.ctx, e.g, "op", eff, pre,
				[]Requirement{{Effect: Effect{Kind: "topology", Target: "cluster"}, Precondition: seenTopo}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.l.Authorize(e.ctx, e.g, "op", Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
				PreconditionDigest: rec.Precondition.Digest}); err != nil {
				t.Fatal(err)
			}
			wantState(t, "dispatch", Unknown)(e.l.Dispatch(e.ctx, e.g, "op"))
			e.p.set(func(p *provider) { p.lostRequest = false })
			if moved {
				topo.set(func(p *provider) { p.world = "world-2" })
			}
			recs, err := e.l.Reconcile(e.ctx, e.takeover("worker-b"))
			want := Authorized
			if moved {
				want = Superseded
			}
			if err != nil || len(recs) != 1 || recs[0].State != want {
				t.Fatalf("reconcile: %+v %v; want %s", recs, err, want)
			}
			if _, js := e.journal("op"); moved && !strings.Contains(js[len(js)-1].Reason, "requirement 0 changed") {
				t.Fatalf("the journal says %q; want the requirement named", js[len(js)-1].Reason)
			}
			if _, apply, _ := e.p.calls(); apply != 1 {
				t.Fatalf("%d Apply calls", apply)
			}
		})
	}
}
