package ledger

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestDispatchConfirmsWithEvidence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "promote-1", promote("db-b"))
	rec, err := e.l.Dispatch(e.ctx, e.g, "promote-1")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case rec.State != Confirmed:
		t.Fatalf("state %s, want confirmed (record %+v)", rec.State, rec)
	case rec.Evidence == nil || rec.Evidence.Empty():
		t.Fatalf("no evidence on the confirmed record %+v", rec)
	case rec.Epoch != e.g.Epoch:
		t.Fatalf("epoch %d, want the dispatching grant's %d (record %+v)", rec.Epoch, e.g.Epoch, rec)
	case rec.Attempts != 1:
		t.Fatalf("%d attempts, want 1 (record %+v)", rec.Attempts, rec)
	}
	if n := e.p.appliedCount("promote-1"); n != 1 {
		t.Fatalf("applied %d times", n)
	}
	got, js := e.journal("promote-1")
	wantStates(t, js, Proposed, Authorized, Dispatching, Confirmed)
	if js[1].Approver != "darius" || js[3].Evidence == nil || js[3].Epoch != e.g.Epoch || js[3].Owner != "worker-a" {
		t.Fatalf("journal %+v", js)
	}
	if got.Revision != rec.Revision || got.State != Confirmed {
		t.Fatalf("read back %+v, dispatch returned %+v", got, rec)
	}
	// A second dispatch of a confirmed operation is refused and calls nothing.
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
		_, err := e.l.Dispatch(e.ctx, e.g, "promote-1")
		return err
	})
	if _, apply, _ := e.p.calls(); apply != 1 {
		t.Fatalf("adapter applied %d times", apply)
	}
}

func TestProposeIsIdempotentOnTheOperationID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := Observation{Digest: "world-1", At: time.Now()}
	first, err := e.l.Propose(e.ctx, e.g, "op", promote("db-b"), pre)
	if err != nil {
		t.Fatal(err)
	}
	// The same effect, its parameters written differently: the same record.
	same := promote("db-b")
	same.Params = json.RawMessage(`{ "cluster":"db-b",  "max_loss_s":5 }`)
	again, err := e.l.Propose(e.ctx, e.g, "op", same, pre)
	if err != nil || again.Revision != first.Revision || again.ParamsDigest != first.ParamsDigest {
		t.Fatalf("second propose: %+v %v (first %+v)", again, err, first)
	}
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.OperationConflict, func() error {
		_, err := e.l.Propose(e.ctx, e.g, "op", promote("db-c"), pre)
		return err
	})
}

func TestAuthorizeBindsTheExactDigests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, err := e.l.Propose(e.ctx, e.g, "op", promote("db-b"), Observation{Digest: "world-1", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Digest(promote("db-c"))
	for name, a := range map[string]Approval{
		"other parameters": {Approver: "darius", ParamsDigest: other, PreconditionDigest: rec.Precondition.Digest},
		"other world":      {Approver: "darius", ParamsDigest: rec.ParamsDigest, PreconditionDigest: "world-0"},
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.OperationConflict, func() error {
				_, err := e.l.Authorize(e.ctx, e.g, "op", a)
				return err
			})
		})
	}
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.InvalidInput, func() error {
		_, err := e.l.Authorize(e.ctx, e.g, "op", Approval{Approver: "darius"})
		return err
	})
	a := Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Policy: "policy-7", At: time.Now()}
	got, err := e.l.Authorize(e.ctx, e.g, "op", a)
	if err != nil || got.State != Authorized || got.ApprovalDigest != a.Digest() {
		t.Fatalf("authorize: %+v %v", got, err)
	}
	again, err := e.l.Authorize(e.ctx, e.g, "op", a)
	if err != nil || again.Revision != got.Revision {
		t.Fatalf("repeated approval: %+v %v", again, err)
	}
}

func TestStaleEpochRefusedBeforeTheAdapter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	old := e.g
	e.takeover("worker-b")
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.StaleOwner, func() error {
		_, err := e.l.Dispatch(e.ctx, old, "op")
		return err
	})
	if pre, apply, obs := e.p.calls(); pre+apply+obs != 0 {
		t.Fatalf("the adapter saw %d precondition, %d apply, %d observe calls", pre, apply, obs)
	}
}

func TestConcurrentDispatchReachesTheAdapterOnce(t *testing.T) {
	t.Parallel()
	t.Run("one grant, two callers", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.authorized(e.g, "op", promote("db-b"))
		// Both callers hold the AUTHORIZED record (the ledger's hint) and
		// race their claims: no I/O comes before them.
		errs := dispatchTogether(e, e.g, e.g)
		if _, apply, _ := e.p.calls(); apply != 1 || e.p.appliedCount("op") != 1 {
			t.Fatalf("adapter applied %d times (errors %v)", apply, errs)
		}
		var refused int
		for _, err := range errs {
			if coordinator.DispositionOf(err) == coordinator.IllegalTransition {
				refused++
			} else if err != nil {
				t.Fatalf("dispatch: %v", err)
			}
		}
		if refused != 1 {
			t.Fatalf("errors %v: want one illegal_transition", errs)
		}
		_, js := e.journal("op")
		wantStates(t, js, Proposed, Authorized, Dispatching, Confirmed)
	})
	t.Run("two grants", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.authorized(e.g, "op", promote("db-b"))
		old := e.g
		cur := e.takeover("worker-b")
		errs := dispatchTogether(e, old, cur)
		if _, apply, _ := e.p.calls(); apply != 1 {
			t.Fatalf("adapter applied %d times (errors %v)", apply, errs)
		}
		lgtest.Want(t, errs[0], coordinator.StaleOwner)
		if errs[1] != nil {
			t.Fatalf("current owner's dispatch: %v", errs[1])
		}
		rec, _ := e.journal("op")
		switch {
		case rec.State != Confirmed:
			t.Fatalf("state %s, want confirmed (record %+v)", rec.State, rec)
		case rec.Epoch != cur.Epoch:
			t.Fatalf("epoch %d, want the current owner's %d (record %+v)", rec.Epoch, cur.Epoch, rec)
		}
	})
}

func dispatchTogether(e *env, gs ...coordinator.Grant) []error {
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() { _, errs[i] = e.l.Dispatch(e.ctx, g, "op") })
	}
	wg.Wait()
	return errs
}

func TestChangedWorldIsSupersededNotDispatched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	e.p.set(func(p *provider) { p.world = "world-2" }) // topology changed between approval and dispatch
	rec, err := e.l.Dispatch(e.ctx, e.g, "op")
	if err != nil || rec.State != Superseded {
		t.Fatalf("dispatch: %+v %v", rec, err)
	}
	if _, apply, _ := e.p.calls(); apply != 0 {
		t.Fatal("a superseded operation reached Apply")
	}
	_, js := e.journal("op")
	wantStates(t, js, Proposed, Authorized, Dispatching, Superseded)
	_, err = e.l.Dispatch(e.ctx, e.g, "op")
	lgtest.Want(t, err, coordinator.IllegalTransition)
}

func TestApplyAnswers(t *testing.T) {
	t.Parallel()
	type applyCase struct {
		name  string
		fault func(p *provider)
		want  State
		ev    bool
	}
	cases := []applyCase{
		{"definite refusal with evidence", func(p *provider) {
			p.refuse = &RefusedError{Reason: "InvalidParameterCombination", Evidence: Evidence{ProviderIDs: []string{"req-9"}}}
		}, Failed, true},
		{"refusal without evidence", func(p *provider) { p.refuse = &RefusedError{Reason: "no"} }, Unknown, false},
		{"success without evidence", func(p *provider) { p.noEvidence = true }, Unknown, false},
		{"success with evidence too large", func(p *provider) { p.hugeEvidence = true }, Unknown, false},
		{"response lost after applying", func(p *provider) { p.dropResponse = true }, Unknown, false},
	}
	// Evidence that says nothing is none: an adapter marshalling a nil
	// map, an empty list or an empty string has shown nothing.
	for _, ph := range placeholders {
		cases = append(cases,
			applyCase{"success with detail " + ph, func(p *provider) { p.placeholder = json.RawMessage(ph) }, Unknown, false},
			applyCase{"refusal with detail " + ph, func(p *provider) {
				p.refuse = &RefusedError{Reason: "no", Evidence: Evidence{Detail: json.RawMessage(ph)}}
			}, Unknown, false})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.authorized(e.g, "op", promote("db-b"))
			e.p.set(tc.fault)
			rec, err := e.l.Dispatch(e.ctx, e.g, "op")
			if err != nil || rec.State != tc.want || (rec.Evidence != nil) != tc.ev {
				t.Fatalf("dispatch: %+v %v", rec, err)
			}
			_, js := e.journal("op")
			wantStates(t, js, Proposed, Authorized, Dispatching, tc.want)
		})
	}
}

// etcd stops answering the gateway just before it claims the dispatch, or
// while the provider applies: the claim, and the provider's answer, are
// recorded once etcd answers again — whether the attempt never left (cut)
// or applied with its answer lost (dropped). The provider applies once.
func TestDispatchRecordedWhenEtcdAnswersAgain(t *testing.T) {
	t.Parallel()
	cut := func(t *testing.T, cp *embedtest.ClientProxy, cli *clientv3.Client) {
		cp.Cut()
		lgtest.WaitDisconnected(t, cli) // the next request cannot leave: a hold
	}
	drop := func(t *testing.T, cp *embedtest.ClientProxy, cli *clientv3.Client) {
		cp.DropAnswers() // the next request applies, its answer is lost: unknown
	}
	for _, tc := range []struct {
		name  string
		claim bool // the fault hits the claim (else the outcome)
		fault func(t *testing.T, cp *embedtest.ClientProxy, cli *clientv3.Client)
	}{
		{"claim, connection cut", true, cut},
		{"claim, answer dropped", true, drop},
		{"outcome, connection cut", false, cut},
		{"outcome, answer dropped", false, drop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cp := e.cl.ClientProxy(t)
			cli := cp.Client(t)
			viaProxy := lgtest.CoordinatorOf(t, cli)
			var mu sync.Mutex
			var waits []time.Duration // persist waits through the injected sleep: the retry, as an event
			appliedAtRetry := -1      // Apply calls when the first retry waited: 0 for the claim, 1 for the outcome
			retrying := make(chan struct{})
			sleep := func(ctx context.Context, d time.Duration) error {
				mu.Lock()
				if len(waits) == 0 {
					_, appliedAtRetry, _ = e.p.calls()
					close(retrying)
				}
				waits = append(waits, d)
				mu.Unlock()
				return sleepTimer(ctx, d)
			}
			l, err := New(viaProxy, WithAdapters(e.p), WithRecordTimeout(5*time.Second), WithSleep(sleep))
			if err != nil {
				t.Fatal(err)
			}
			e.authorizedBy(l, e.g, "op", promote("db-b")) // l holds the record: the claim is its first request
			if tc.claim {
				tc.fault(t, cp, cli)
			} else {
				e.p.set(func(p *provider) { p.afterApply = func(string) { tc.fault(t, cp, cli) } })
			}
			go func() {
				select {
				case <-retrying:
				case <-time.After(lgtest.Timeout):
				}
				cp.Heal()
			}()
			rec, err := l.Dispatch(e.ctx, e.g, "op")
			if err != nil || rec.State != Confirmed {
				t.Fatalf("dispatch: %+v %v", rec, err)
			}
			_, js := e.journal("op")
			wantStates(t, js, Proposed, Authorized, Dispatching, Confirmed)
			if _, apply, _ := e.p.calls(); apply != 1 || e.p.appliedCount("op") != 1 {
				t.Fatalf("%d Apply calls", apply)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(waits) == 0 || waits[0] != 50*time.Millisecond {
				t.Fatalf("persist waited %v through WithSleep; want a first wait of 50ms", waits)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.claim]; appliedAtRetry != want {
				t.Fatalf("the first retry came after %d Apply calls, want %d (the %s retried)", appliedAtRetry, want, map[bool]string{true: "claim", false: "outcome"}[tc.claim])
			}
		})
	}
}

// An adapter call is bounded even when the caller's context is not.
func TestAdapterCallsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, WithCallTimeout(time.Minute))
	e.authorized(e.g, "op", promote("db-b"))
	start := time.Now()
	wantState(t, "dispatch", Confirmed)(e.l.Dispatch(context.Background(), e.g, "op"))
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	if d := e.p.applyDeadlines[0]; d.IsZero() || d.After(start.Add(time.Minute+time.Second)) {
		t.Fatalf("Apply's context deadline %v, want one within a minute of %v", d, start)
	}
}

// The next effect: a plan made before a promotion is evidence of what was,
// not authority for what is.
func TestRevalidateBeforeTheNextEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "traffic", promote("db-b"))
	same, now, err := e.l.Revalidate(e.ctx, e.g, "traffic")
	if err != nil || !same || now.Digest != "world-1" {
		t.Fatalf("revalidate, world unchanged: %v %+v %v", same, now, err)
	}
	e.p.set(func(p *provider) { p.world = "world-2" })
	lgtest.WritesNothing(t, e.c.Client(), e.c.Keys().Prefix(), "revalidate", func() {
		same, now, err := e.l.Revalidate(e.ctx, e.g, "traffic")
		if err != nil || same || now.Digest != "world-2" {
			t.Fatalf("revalidate, world changed: %v %+v %v", same, now, err)
		}
	})
	_, _, err = e.l.Revalidate(e.ctx, e.g, "never-proposed")
	lgtest.Want(t, err, coordinator.InvalidInput)
}

// Two dispatches of one operation under one grant, the first one's claim
// lost in transit while the second claims: the first learns the claim it
// finds is not its own, and never reaches the adapter.
func TestLostClaimIsNotMistakenForAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cp := e.cl.ClientProxy(t)
	retrying := make(chan struct{}) // the first dispatch waits to retry its claim (the injected sleep)
	var once sync.Once
	first, err := New(lgtest.CoordinatorOf(t, cp.Client(t)), WithAdapters(e.p), WithRecordTimeout(5*time.Second),
		WithSleep(func(ctx context.Context, d time.Duration) error {
			once.Do(func() { close(retrying) })
			return sleepTimer(ctx, d)
		}))
	if err != nil {
		t.Fatal(err)
	}
	other := newProvider("db-promote")
	second, err := New(e.c, WithAdapters(other))
	if err != nil {
		t.Fatal(err)
	}
	e.authorizedBy(first, e.g, "op", promote("db-b")) // first holds the record: its claim is its first request
	entered, release := make(chan struct{}), make(chan struct{})
	other.set(func(p *provider) { p.onApply = func(string) { close(entered); <-release } })
	secondDone := make(chan error, 1)
	cp.Stall() // the first dispatch's claim is held on the way...
	go func() {
		select { // ...until it is retried, while the second claims and applies
		case <-retrying:
		case <-time.After(lgtest.Timeout):
		}
		go func() {
			_, err := second.Dispatch(e.ctx, e.g, "op")
			secondDone <- err
		}()
		select {
		case <-entered:
		case <-time.After(lgtest.Timeout):
		}
		cp.Heal()
	}()
	_, err = first.Dispatch(e.ctx, e.g, "op")
	lgtest.Want(t, err, coordinator.IllegalTransition)
	close(release)
	if err := <-secondDone; err != nil {
		t.Fatalf("second dispatch: %v", err)
	}
	if pre, apply, _ := e.p.calls(); pre+apply != 0 {
		t.Fatalf("the first dispatch reached its adapter: %d precondition, %d apply calls", pre, apply)
	}
	rec, _ := e.journal("op")
	if rec.State != Confirmed || rec.Attempts != 1 {
		t.Fatalf("record: state %s, attempts %d; want CONFIRMED, 1", rec.State, rec.Attempts)
	}
}

// A provider that cannot show the world after the claim withdraws it:
// back to AUTHORIZED as it was, nothing sent, a hold; a later dispatch
// goes through.
func TestUnobservableWorldWithdrawsTheClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	e.p.set(func(p *provider) { p.preErr = errObserve })
	rec, err := e.l.Dispatch(e.ctx, e.g, "op")
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
	if rec.State != Authorized || rec.Attempts != 0 || rec.DispatchID != "" || rec.Epoch != 0 {
		t.Fatalf("withdrawn: state %s attempts %d dispatch %q epoch %d; want AUTHORIZED as before the claim",
			rec.State, rec.Attempts, rec.DispatchID, rec.Epoch)
	}
	if _, apply, _ := e.p.calls(); apply != 0 {
		t.Fatalf("%d Apply calls", apply)
	}
	_, js := e.journal("op")
	wantStates(t, js, Proposed, Authorized, Dispatching, Authorized)
	e.p.set(func(p *provider) { p.preErr = nil })
	if rec, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil || rec.State != Confirmed || rec.Attempts != 1 {
		t.Fatalf("dispatch after: state %s attempts %d, %v", rec.State, rec.Attempts, err)
	}
}

// A stale grant learns that it is stale, whatever the record's state.
func TestStaleGrantIsToldSoOnAnySettledRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	if _, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil {
		t.Fatal(err)
	}
	old := e.g
	e.takeover("worker-b")
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.StaleOwner, func() error {
		_, err := e.l.Dispatch(e.ctx, old, "op")
		return err
	})
}

// A ledger's hint of a record another ledger has moved since is decided
// again from the record as its refused Txn read it: Authorize and Dispatch
// go through, without an error for the stale hint.
func TestStaleHintIsDecidedAgain(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 2, 13, 24, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, WithClock(clock))
	other, err := New(e.c, WithAdapters(e.p), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	rec := e.authorizedBy(other, e.g, "op", promote("db-b"))
	a := *rec.Approval
	if _, err := e.l.Authorize(e.ctx, e.g, "op", a); err != nil { // e.l's hint: AUTHORIZED at this revision
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(DefaultValidity)
	mu.Unlock()
	if rec, err := other.Dispatch(e.ctx, e.g, "op"); err != nil || rec.State != Proposed {
		t.Fatalf("other's dispatch of the expired approval: state %s, %v", rec.State, err)
	}
	if _, err := other.Authorize(e.ctx, e.g, "op", a); err != nil {
		t.Fatal(err)
	}
	rec, err = e.l.Dispatch(e.ctx, e.g, "op") // e.l still holds the first AUTHORIZED revision
	if err != nil || rec.State != Confirmed {
		t.Fatalf("dispatch from a stale hint: state %s, %v; want CONFIRMED", rec.State, err)
	}
}

// A hint in another state than the call decides from is not used: the
// record is read. Here this ledger last saw the record UNKNOWN; another
// ledger's Reconcile put it back to AUTHORIZED for a retry; Dispatch reads
// it and dispatches.
func TestHintInAnotherStateIsReadAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other, err := New(e.c, WithAdapters(e.p))
	if err != nil {
		t.Fatal(err)
	}
	e.authorized(e.g, "op", promote("db-b"))
	e.p.set(func(p *provider) { p.lostRequest = true })
	if rec, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil || rec.State != Unknown { // e.l's hint: UNKNOWN
		t.Fatalf("dispatch: state %s, %v; want UNKNOWN", rec.State, err)
	}
	e.p.set(func(p *provider) { p.lostRequest = false })
	g2 := e.takeover("worker-b")
	wantOne(t, "reconcile", Authorized)(other.Reconcile(e.ctx, g2))
	if rec, err := e.l.Dispatch(e.ctx, g2, "op"); err != nil || rec.State != Confirmed {
		t.Fatalf("dispatch after another ledger's reconcile: state %s, %v; want CONFIRMED", rec.State, err)
	}
}

// rpcCounter counts the unary RPCs a client sends, by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (rc *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	rc.mu.Lock()
	rc.n[method]++
	rc.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the counts since the last take.
func (rc *rpcCounter) take() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := rc.n
	rc.n = map[string]int{}
	return n
}

// TestDispatchIsTwoRoundTrips pins the floor of the ledger's measured
// target (docs/performance.md, "The effect ledger"): a dispatch of a record this ledger authorized is two etcd round
// trips, the claim Txn and the outcome Txn, and nothing else (the claim's
// fenced Txn is the grant check, its Else the read a stale hint needs);
// Propose and Authorize one each, so the lifecycle is four. A ledger that
// did not make the record (no hint) reads it once more. A read or a Txn
// added to the path makes this red.
func TestDispatchIsTwoRoundTrips(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	rc := &rpcCounter{n: map[string]int{}}
	cli, err := cl.NewClient(grpc.WithChainUnaryInterceptor(rc.intercept))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c, err := coordinator.New(lgtest.Ctx(t), cli)
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider("db-promote")
	l, err := New(c, WithAdapters(p))
	if err != nil {
		t.Fatal(err)
	}
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker-a", 10*time.Second, coordinator.WithoutKeepAlive()), tenant, task)
	ctx := lgtest.Ctx(t)
	txns := func(n int) map[string]int { return map[string]int{"/etcdserverpb.KV/Txn": n} }
	check := func(what string, want map[string]int) {
		t.Helper()
		if got := rc.take(); !maps.Equal(got, want) {
			t.Fatalf("%s sent %v, want %v", what, got, want)
		}
	}
	lifecycle := func(l *Ledger, operation string) {
		t.Helper()
		pre, err := p.Precondition(ctx, promote("db-b"))
		if err != nil {
			t.Fatal(err)
		}
		rc.take()
		rec, err := l.Propose(ctx, g, operation, promote("db-b"), pre)
		if err != nil {
			t.Fatal(err)
		}
		check("propose", txns(1))
		if _, err := l.Authorize(ctx, g, operation, Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
			PreconditionDigest: pre.Digest, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		check("authorize", txns(1))
	}
	dispatch := func(l *Ledger, operation string) {
		t.Helper()
		if out, err := l.Dispatch(ctx, g, operation); err != nil || out.State != Confirmed {
			t.Fatalf("dispatch: %s %v", out.State, err)
		}
	}

	lifecycle(l, "op-1")
	dispatch(l, "op-1")
	check("a dispatch of a record this ledger authorized", txns(2))

	lifecycle(l, "op-2")
	cold, err := New(c, WithAdapters(p))
	if err != nil {
		t.Fatal(err)
	}
	dispatch(cold, "op-2")
	check("a dispatch by a ledger without the record's hint", txns(3))
}

// TestProviderAnswerIsRecordedAfterTheCallerGivesUp: once Apply returned,
// its answer is recorded even if the caller's context ended meanwhile.
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
