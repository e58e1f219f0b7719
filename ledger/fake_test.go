package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// provider is a fault-injecting fake of an external provider (only etcd is
// real in these tests). It deduplicates by operation id, as a cooperating
// provider does, and counts every call the gateway made.
type provider struct {
	kind     string
	contract Contract

	mu             sync.Mutex
	world          string         // the precondition digest the world shows now
	applied        map[string]int // operation -> effects that took place
	applyCalls     []string       // "operation@epoch" of every Apply
	preCalls       int
	applyDeadlines []time.Time   // the deadline of every Apply context (zero: none)
	applyApproved  []Observation // the approved precondition every Apply was given
	observed       []Record      // the record every Observe was given
	observeCalls   int

	dropResponse  bool                   // apply, then lose the answer
	pendingChange bool                   // apply, answer a change id and an ambiguous error (not settled yet)
	lostRequest   bool                   // the request is lost on the way: nothing applied, no answer
	refuse        *RefusedError          // refuse definitely, applying nothing
	noEvidence    bool                   // answer success with no evidence
	placeholder   json.RawMessage        // answer success with only this detail
	hugeEvidence  bool                   // answer success with evidence past MaxDetailBytes
	onApply       func(operation string) // runs inside Apply, before it applies
	afterApply    func(operation string) // runs inside Apply, after it applied
	observeScript []Outcome              // outcomes Observe returns in turn (then the truth)
	observeErr    error                  // Observe fails
	observeBare   bool                   // Observe says applied but shows no evidence
	preErr        error                  // Precondition cannot show the world
	onObserve     func()                 // runs at the start of every Observe
}

func newProvider(kind string) *provider {
	return &provider{kind: kind, contract: Contract{Lookup: true, RetrySafe: true, Retention: time.Hour}, world: "world-1",
		applied: map[string]int{}}
}

func (p *provider) Kind() string       { return p.kind }
func (p *provider) Contract() Contract { return p.contract }

func (p *provider) Precondition(ctx context.Context, e Effect) (Observation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preCalls++
	if p.preErr != nil {
		return Observation{}, p.preErr
	}
	return Observation{Digest: p.world, At: time.Now(), Detail: json.RawMessage(fmt.Sprintf(`{"writer":%q}`, p.world))}, nil
}

func (p *provider) Apply(ctx context.Context, call Call) (Evidence, error) {
	operation := call.Operation
	p.mu.Lock()
	p.applyCalls = append(p.applyCalls, fmt.Sprintf("%s@%d", operation, call.Epoch))
	p.applyApproved = append(p.applyApproved, call.Approved)
	deadline, _ := ctx.Deadline()
	p.applyDeadlines = append(p.applyDeadlines, deadline)
	onApply, afterApply := p.onApply, p.afterApply
	p.mu.Unlock()
	if onApply != nil {
		onApply(operation)
	}
	p.mu.Lock()
	if p.refuse != nil {
		r := *p.refuse
		p.mu.Unlock()
		return Evidence{}, &r
	}
	if p.lostRequest {
		p.mu.Unlock()
		return Evidence{}, Ambiguous(context.DeadlineExceeded)
	}
	p.applied[operation]++ // the provider acts...
	n := p.applied[operation]
	drop, noEv, huge, pending, placeholder := p.dropResponse, p.noEvidence, p.hugeEvidence, p.pendingChange, p.placeholder
	p.mu.Unlock()
	if afterApply != nil {
		afterApply(operation)
	}
	switch {
	case drop: // ...and its answer is lost on the way back
		return Evidence{}, Ambiguous(context.DeadlineExceeded)
	case pending:
		return Evidence{ProviderIDs: []string{"change-" + operation}}, Ambiguous(errors.New("change still PENDING"))
	case noEv:
		return Evidence{}, nil
	case placeholder != nil:
		return Evidence{Detail: placeholder}, nil
	case huge:
		return Evidence{Detail: json.RawMessage(`"` + strings.Repeat("x", MaxDetailBytes) + `"`)}, nil
	}
	return Evidence{ProviderIDs: []string{fmt.Sprintf("req-%s-%d", operation, n)}}, nil
}

func (p *provider) Observe(ctx context.Context, rec Record) (Outcome, Evidence, error) {
	operation := rec.Operation
	p.mu.Lock()
	hook := p.onObserve
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observeCalls++
	p.observed = append(p.observed, rec)
	if p.observeErr != nil {
		return Inconclusive, Evidence{}, p.observeErr
	}
	if len(p.observeScript) > 0 {
		o := p.observeScript[0]
		p.observeScript = p.observeScript[1:]
		if o != Applied {
			return o, Evidence{}, nil
		}
	}
	if p.applied[operation] > 0 && p.observeBare {
		return Applied, Evidence{}, nil
	}
	if p.applied[operation] > 0 {
		return Applied, Evidence{ProviderIDs: []string{"observed-" + operation}}, nil
	}
	return NotApplied, Evidence{Detail: json.RawMessage(`{"found":false}`)}, nil
}

func (p *provider) appliedCount(operation string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied[operation]
}

func (p *provider) calls() (pre, apply, observe int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.preCalls, len(p.applyCalls), p.observeCalls
}

func (p *provider) set(f func(p *provider)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// env is one test's world: a real embedded etcd, a coordinator, a ledger
// with a fake provider, and the first owner's grant.
type env struct {
	t   *testing.T
	cl  *embedtest.Cluster
	c   *coordinator.Coordinator
	l   *Ledger
	p   *provider
	s   *coordinator.Session
	g   coordinator.Grant
	ctx context.Context
}

const tenant, task = "acme", "failover"

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	p := newProvider("db-promote")
	l, err := New(c, append([]Option{WithAdapters(p), WithSleep(func(ctx context.Context, _ time.Duration) error { return ctx.Err() })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s := lgtest.Session(t, c, "worker-a", 10*time.Second)
	return &env{t: t, cl: cl, c: c, l: l, p: p, s: s, g: lgtest.Claim(t, s, tenant, task), ctx: lgtest.Ctx(t)}
}

func promote(target string) Effect {
	return Effect{Kind: "db-promote", Target: target, Params: json.RawMessage(`{"max_loss_s": 5, "cluster": "` + target + `"}`), Policy: "policy-7"}
}

// authorized proposes and authorizes operation against the provider's world now.
func (e *env) authorized(g coordinator.Grant, operation string, eff Effect) Record {
	e.t.Helper()
	return e.authorizedBy(e.l, g, operation, eff)
}

// authorizedBy is authorized through ledger l (whose hints then hold the
// record).
func (e *env) authorizedBy(l *Ledger, g coordinator.Grant, operation string, eff Effect) Record {
	e.t.Helper()
	pre, err := e.p.Precondition(e.ctx, eff)
	if err != nil {
		e.t.Fatal(err)
	}
	e.p.set(func(p *provider) { p.preCalls-- })
	rec, err := l.Propose(e.ctx, g, operation, eff, pre)
	if err != nil {
		e.t.Fatalf("propose: %v", err)
	}
	rec, err = l.Authorize(e.ctx, g, operation, Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
		PreconditionDigest: rec.Precondition.Digest, At: time.Now()})
	if err != nil {
		e.t.Fatalf("authorize: %v", err)
	}
	if rec.State != Authorized {
		e.t.Fatalf("authorized record is %s", rec.State)
	}
	return rec
}

// takeover ends the current owner's lease and claims the task as a new owner.
func (e *env) takeover(owner string) coordinator.Grant {
	e.t.Helper()
	if err := e.c.RevokeLease(e.ctx, e.g.Lease); err != nil {
		e.t.Fatalf("revoke: %v", err)
	}
	s := lgtest.Session(e.t, e.c, owner, 10*time.Second)
	g := lgtest.Claim(e.t, s, tenant, task)
	if g.Epoch <= e.g.Epoch {
		e.t.Fatalf("new epoch %d not above %d", g.Epoch, e.g.Epoch)
	}
	return g
}

// journal reads the operation's record and journal, and checks the journal
// is a chain in transition order: seq 1, 2, ...; each entry's From the
// previous To; revisions strictly increasing; the last To the record's state.
func (e *env) journal(operation string) (Record, []Transition) {
	e.t.Helper()
	rec, js, err := e.l.Record(e.ctx, tenant, task, operation)
	if err != nil {
		e.t.Fatal(err)
	}
	var prev Transition
	for i, tr := range js {
		switch {
		case tr.Seq != int64(i+1):
			e.t.Fatalf("journal entry %d has seq %d, want %d: %+v", i, tr.Seq, i+1, tr)
		case tr.From != prev.To:
			e.t.Fatalf("journal entry %d is from %s, the previous one went to %s: %+v", i, tr.From, prev.To, tr)
		case i > 0 && tr.Revision <= prev.Revision:
			e.t.Fatalf("journal entry %d at revision %d, not after the previous one's %d", i, tr.Revision, prev.Revision)
		}
		prev = tr
	}
	switch {
	case len(js) == 0:
		e.t.Fatalf("no journal for record %+v", rec)
	case prev.To != rec.State:
		e.t.Fatalf("the journal ends at %s, the record is %s", prev.To, rec.State)
	case rec.Seq != int64(len(js)):
		e.t.Fatalf("the record's seq is %d, the journal has %d entries", rec.Seq, len(js))
	case prev.Revision != rec.Revision:
		e.t.Fatalf("the journal's last entry is at revision %d, the record at %d", prev.Revision, rec.Revision)
	}
	return rec, js
}

// wantOne checks a Reconcile's answer: no error, one record, in state want
// — and says which of the three failed.
func wantOne(t *testing.T, what string, want State) func(recs []Record, err error) {
	t.Helper()
	return func(recs []Record, err error) {
		t.Helper()
		switch {
		case err != nil:
			t.Fatalf("%s: error %v, want none", what, err)
		case len(recs) != 1:
			t.Fatalf("%s: %d records, want 1: %+v", what, len(recs), recs)
		case recs[0].State != want:
			t.Fatalf("%s: state %s, want %s (record %+v)", what, recs[0].State, want, recs[0])
		}
	}
}

// wantState checks a call's answer: no error, and the record in state want
// — and says which failed.
func wantState(t *testing.T, what string, want State) func(rec Record, err error) {
	t.Helper()
	return func(rec Record, err error) {
		t.Helper()
		switch {
		case err != nil:
			t.Fatalf("%s: error %v, want none", what, err)
		case rec.State != want:
			t.Fatalf("%s: state %s, want %s (record %+v)", what, rec.State, want, rec)
		}
	}
}

func states(js []Transition) []State {
	out := make([]State, len(js))
	for i, tr := range js {
		out[i] = tr.To
	}
	return out
}

func wantStates(t *testing.T, js []Transition, want ...State) {
	t.Helper()
	got := states(js)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("journal states %v, want %v", got, want)
	}
}

var errObserve = errors.New("provider: describe timed out")
