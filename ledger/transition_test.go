package ledger

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// The steps the table test ranges over are every Step the package
// declares, read from its source: a new Step cannot go untested silently.
// Every one of them makes at least one transition of the table.
func TestStepsAreEveryDeclaredStep(t *testing.T) {
	t.Parallel()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var declared []Step
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Step" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("a Step constant whose value is not a string literal: %T", v)
					}
					declared = append(declared, Step(lit.Value[1:len(lit.Value)-1]))
				}
			}
		}
	}
	got := Steps()
	slices.Sort(declared)
	slices.Sort(got)
	if !slices.Equal(declared, got) {
		t.Fatalf("Steps() is %v; the package declares %v", got, declared)
	}
	for _, st := range got {
		if !slices.ContainsFunc(table, func(e Edge) bool { return e.By == st }) {
			t.Errorf("step %s makes no transition of the table", st)
		}
	}
}

// Every (from, to, step) the table does not hold is refused with
// illegal_transition and writes nothing; every one it holds applies and
// journals exactly one entry.
func TestTransitionTableOverAllStatePairs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	from := append([]State{""}, States()...)
	seed := func(op string, st State) Record { // a record in state st, written as the ledger writes records
		t.Helper()
		rec := Record{Tenant: tenant, Task: task, Operation: op, State: st, Effect: promote("db-b"),
			Precondition: Observation{Digest: "world-1", At: time.Now()}, Seq: 3}
		if st == "" {
			return rec
		}
		v, _ := json.Marshal(rec)
		resp, err := e.c.Client().Put(e.ctx, store.Of(e.c).Keys().Effect(tenant, task, op), string(v))
		if err != nil {
			t.Fatal(err)
		}
		rec.Revision = resp.Header.Revision
		return rec
	}
	recs := map[State]Record{}
	for i, st := range from {
		recs[st] = seed(fmt.Sprintf("illegal-%d", i), st)
	}
	legal := 0
	lgtest.WritesNothing(t, e.c.Client(), e.c.Keys().Prefix(), "illegal transitions", func() {
		for _, f := range from {
			for _, to := range States() {
				for _, by := range steps {
					if Allowed(f, to, by) {
						legal++
						continue
					}
					_, err := e.l.transition(e.ctx, e.g, recs[f], change{to: to, by: by, reason: "test"})
					if coordinator.DispositionOf(err) != coordinator.IllegalTransition {
						t.Fatalf("%s -> %s by %s: %v, want illegal_transition", f, to, by, err)
					}
				}
			}
		}
	})
	for _, edge := range table {
		if (edge.By == StepResolve) != (edge.From == ManualReview) {
			t.Fatalf("%+v: an operator resolves MANUAL_REVIEW, and only an operator does", edge)
		}
	}
	var terminal []State
	for _, st := range States() {
		if st.Terminal() {
			terminal = append(terminal, st)
		}
	}
	if fmt.Sprint(terminal) != fmt.Sprint([]State{Confirmed, Failed, Superseded, Rejected}) {
		t.Fatalf("terminal states %v", terminal)
	}
	for _, st := range []State{"", "DONE", "confirmed"} { // none of the ledger's: never settled
		if st.Terminal() {
			t.Fatalf("state %q is terminal", st)
		}
	}
	if legal != len(table) {
		t.Fatalf("%d legal (from, to, step) triples, table has %d edges (a duplicate?)", legal, len(table))
	}
	for i, edge := range table {
		rec := seed(fmt.Sprintf("legal-%d", i), edge.From)
		got, err := e.l.transition(e.ctx, e.g, rec, change{to: edge.To, by: edge.By, reason: "test"})
		if err != nil || got.State != edge.To || got.Seq != rec.Seq+1 {
			t.Fatalf("%+v: %+v %v", edge, got, err)
		}
		back, js, err := e.l.Record(e.ctx, tenant, task, rec.Operation)
		if err != nil || back.State != edge.To || back.Revision != got.Revision || len(js) != 1 ||
			js[0].From != edge.From || js[0].To != edge.To || js[0].Revision != got.Revision {
			t.Fatalf("%+v: read back %+v %+v %v", edge, back, js, err)
		}
	}
}

// The public calls go through the table: each refuses a record in a state
// its transition does not leave from, and writes nothing.
func TestCallsRefuseRecordsInOtherStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	if _, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil {
		t.Fatal(err)
	}
	e.authorized(e.g, "unknown", promote("db-b"))
	e.p.set(func(p *provider) { p.dropResponse = true })
	wantState(t, "dispatch", Unknown)(e.l.Dispatch(e.ctx, e.g, "unknown"))
	ev := Evidence{ProviderIDs: []string{"x"}}
	for name, call := range map[string]func() error{
		"authorize confirmed": func() error {
			_, err := e.l.Authorize(e.ctx, e.g, "op", Approval{Approver: "d", ParamsDigest: "p", PreconditionDigest: "w"})
			return err
		},
		"reject confirmed":   func() error { _, err := e.l.Reject(e.ctx, e.g, "op", "too late"); return err },
		"dispatch confirmed": func() error { _, err := e.l.Dispatch(e.ctx, e.g, "op"); return err },
		"resolve confirmed": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Failed, ev, "imani", "no")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, call)
		})
	}
}

// "No such record" has one answer everywhere: every call that names an
// operation not recorded is invalid input (as ops show is), and writes
// nothing; only Propose creates a record.
func TestCallsOnAnOperationNotRecordedAreInvalidInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ev := Evidence{ProviderIDs: []string{"x"}}
	for name, call := range map[string]func() error{
		"authorize": func() error {
			_, err := e.l.Authorize(e.ctx, e.g, "nope", Approval{Approver: "d", ParamsDigest: "p", PreconditionDigest: "w"})
			return err
		},
		"reject":     func() error { _, err := e.l.Reject(e.ctx, e.g, "nope", "never mind"); return err },
		"dispatch":   func() error { _, err := e.l.Dispatch(e.ctx, e.g, "nope"); return err },
		"resolve":    func() error { _, err := e.l.Resolve(e.ctx, e.g, "nope", Failed, ev, "imani", "no"); return err },
		"revalidate": func() error { _, _, err := e.l.Revalidate(e.ctx, e.g, "nope"); return err },
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.InvalidInput, call)
		})
	}
	if pre, apply, obs := e.p.calls(); pre+apply+obs != 0 {
		t.Fatalf("the adapter saw %d precondition, %d apply, %d observe calls", pre, apply, obs)
	}
}

func TestRejectBeforeDispatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	rec, err := e.l.Reject(e.ctx, e.g, "op", "incident commander withdrew approval")
	if err != nil || rec.State != Rejected {
		t.Fatalf("reject: %+v %v", rec, err)
	}
	_, err = e.l.Dispatch(e.ctx, e.g, "op")
	lgtest.Want(t, err, coordinator.IllegalTransition)
	if _, apply, _ := e.p.calls(); apply != 0 {
		t.Fatal("a rejected operation reached Apply")
	}
	again, err := e.l.Reject(e.ctx, e.g, "op", "incident commander withdrew approval")
	if err != nil || again.Revision != rec.Revision {
		t.Fatalf("retried reject: %+v %v", again, err)
	}
	_, err = e.l.Reject(e.ctx, e.g, "op", "another reason")
	lgtest.Want(t, err, coordinator.IllegalTransition)
	_, js := e.journal("op")
	wantStates(t, js, Proposed, Authorized, Rejected)
}

func TestInvalidInputWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := Observation{Digest: "w", At: time.Now()}
	bad := []struct {
		name string
		call func() error
	}{
		{"operation with a space", func() error { _, err := e.l.Propose(e.ctx, e.g, "op 1", promote("db-b"), pre); return err }},
		{"params not JSON", func() error {
			eff := promote("db-b")
			eff.Params = json.RawMessage(`{"a":`)
			_, err := e.l.Propose(e.ctx, e.g, "op", eff, pre)
			return err
		}},
		{"no adapter for the kind", func() error {
			eff := promote("db-b")
			eff.Kind = "dns"
			_, err := e.l.Propose(e.ctx, e.g, "op", eff, pre)
			return err
		}},
		{"precondition without time", func() error {
			_, err := e.l.Propose(e.ctx, e.g, "op", promote("db-b"), Observation{Digest: "w"})
			return err
		}},
		{"no policy", func() error {
			eff := promote("db-b")
			eff.Policy = ""
			_, err := e.l.Propose(e.ctx, e.g, "op", eff, pre)
			return err
		}},
		{"grant without epoch", func() error {
			g := e.g
			g.Epoch = 0
			_, err := e.l.Dispatch(e.ctx, g, "op")
			return err
		}},
		{"reject without reason", func() error { _, err := e.l.Reject(e.ctx, e.g, "op", ""); return err }},
		{"resolve without why", func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Superseded, Evidence{}, "imani", "")
			return err
		}},
		{"resolve to no state", func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", "DONE", Evidence{}, "imani", "why")
			return err
		}},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.InvalidInput, b.call)
		})
	}
	for _, opt := range []Option{WithAdapters(nil), WithPolling(0, time.Second, 1), WithPolling(time.Second, time.Millisecond, 1),
		WithPolling(time.Millisecond, time.Second, 0), WithClock(nil), WithSleep(nil), WithLogger(nil), WithRecordTimeout(0), WithCallTimeout(0)} {
		if _, err := New(e.c, opt); coordinator.DispositionOf(err) != coordinator.InvalidInput {
			t.Fatalf("New with a bad option: %v", err)
		}
	}
	if _, err := New(e.c, WithAdapters(newProvider("k"), newProvider("k"))); coordinator.DispositionOf(err) != coordinator.InvalidInput {
		t.Fatalf("two adapters of one kind: %v", err)
	}
}

func TestDigestIsCanonicalAndInjective(t *testing.T) {
	t.Parallel()
	base := Effect{Kind: "k", Target: "t", Params: json.RawMessage(`{"a":1,"b":[1,2]}`), Policy: "p"}
	same := Effect{Kind: "k", Target: "t", Params: json.RawMessage(" {\"b\":[1, 2],\n \"a\":1} "), Policy: "p"}
	d0, _ := Digest(base)
	if d1, _ := Digest(same); d1 != d0 {
		t.Fatal("the same parameters written differently have different digests")
	}
	seen := map[string]string{d0: "base"}
	for name, e := range map[string]Effect{
		"kind":        {Kind: "kt", Target: "", Params: base.Params, Policy: "p"},
		"target":      {Kind: "k", Target: "t2", Params: base.Params, Policy: "p"},
		"params":      {Kind: "k", Target: "t", Params: json.RawMessage(`{"a":1.0,"b":[1,2]}`), Policy: "p"},
		"policy":      {Kind: "k", Target: "t", Params: base.Params, Policy: "p2"},
		"no params":   {Kind: "k", Target: "t", Policy: "p"},
		"null params": {Kind: "k", Target: "tnull", Policy: "p"},
	} {
		d, err := Digest(e)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[d]; dup {
			t.Fatalf("%s and %s share a digest", name, prev)
		}
		seen[d] = name
	}
}

// A task's journal is in the order its transitions happened, across
// operations; each operation's part of it is that operation's journal.
func TestTaskJournalInTransitionOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := Observation{Digest: "world-1", At: time.Now()}
	var want []string
	step := func(op string, f func() (Record, error)) {
		t.Helper()
		rec, err := f()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		want = append(want, fmt.Sprintf("%s:%s@%d", op, rec.State, rec.Revision))
	}
	propose := func(op string) func() (Record, error) {
		return func() (Record, error) { return e.l.Propose(e.ctx, e.g, op, promote("db-b"), pre) }
	}
	authorize := func(op string) func() (Record, error) {
		return func() (Record, error) {
			d, _ := Digest(promote("db-b"))
			return e.l.Authorize(e.ctx, e.g, op, Approval{Approver: "darius", ParamsDigest: d, PreconditionDigest: "world-1"})
		}
	}
	step("b", propose("b"))
	step("a", propose("a"))
	step("a", authorize("a"))
	step("b", authorize("b"))
	step("b", func() (Record, error) { return e.l.Reject(e.ctx, e.g, "b", "not needed") })
	step("a", func() (Record, error) { return e.l.Reject(e.ctx, e.g, "a", "not needed") })
	js, err := e.l.Journal(e.ctx, tenant, task)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range js {
		got = append(got, fmt.Sprintf("%s:%s@%d", j.Operation, j.To, j.Revision))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("task journal\n %v\nwant\n %v", got, want)
	}
	for _, op := range []string{"a", "b"} {
		_, opJournal := e.journal(op)
		wantStates(t, opJournal, Proposed, Authorized, Rejected)
	}
}

// A transition refused because the record moved says why from the record as
// its Txn's Else read it: moved to a state the step may not leave is
// illegal_transition; moved but still one it may leave is version_conflict
// (decide again). Either way nothing is written and the record returned is
// the one read.
func TestMovedRecordRefusalIsClassifiedFromTheRecordAsItIs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stale := e.authorized(e.g, "settled", promote("db-b"))
	wantState(t, "dispatch", Confirmed)(e.l.Dispatch(e.ctx, e.g, "settled"))
	var got Record
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
		var err error
		got, err = e.l.transition(e.ctx, e.g, stale, change{to: Dispatching, by: StepDispatch, reason: "test"})
		return err
	})
	if got.State != Confirmed {
		t.Fatalf("the refusal returned state %s, want the record as it is (CONFIRMED)", got.State)
	}
	pre, _ := e.p.Precondition(e.ctx, promote("db-c"))
	first, err := e.l.Propose(e.ctx, e.g, "again", promote("db-c"), pre)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "authorize", Authorized)(e.l.Authorize(e.ctx, e.g, "again", Approval{Approver: "darius",
		ParamsDigest: first.ParamsDigest, PreconditionDigest: first.Precondition.Digest}))
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.VersionConflict, func() error {
		// first is PROPOSED at an older revision; the record is AUTHORIZED now, which reject may leave.
		_, err := e.l.transition(e.ctx, e.g, first, change{to: Rejected, by: StepReject, reason: "test"})
		return err
	})
}

// A retried decision (Reject, Resolve) is recognised as the same one only
// under the same grant: the same owner label with a newer grant is another
// decision.
func TestRetriedDecisionIsTheSameGrantsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("a decision repeated under a newer grant of the same owner label is not a retry", func(t *testing.T) {
		// A retried Reject returns the record only if its last transition
		// is this very decision: same grant. The same owner label with a new
		// session is another grant (another epoch), and the record is
		// already REJECTED: illegal_transition, nothing written.
		e.authorized(e.g, "reject-once", promote("db-b"))
		rec, err := e.l.Reject(e.ctx, e.g, "reject-once", "withdrawn")
		if err != nil || rec.State != Rejected {
			t.Fatalf("reject: %+v %v", rec, err)
		}
		g2 := e.takeover("worker-a") // same label, new session and epoch
		_, err = e.l.Reject(e.ctx, g2, "reject-once", "withdrawn")
		lgtest.Want(t, err, coordinator.IllegalTransition)
		_, js := e.journal("reject-once")
		wantStates(t, js, Proposed, Authorized, Rejected)
	})
}

// TestTransitionFromAMovedRecordNamesWhereItIs: a transition decided on a
// record as it was (AUTHORIZED) whose record has meanwhile moved to a state
// the step may not leave (CONFIRMED, by a dispatch) is illegal_transition —
// the decision no longer applies — not a version conflict to retry; and it
// writes nothing.
func TestTransitionFromAMovedRecordNamesWhereItIs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stale := e.authorized(e.g, "op", promote("db-b"))
	if rec, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil || rec.State != Confirmed {
		t.Fatalf("dispatch: %+v %v", rec, err)
	}
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
		_, err := e.l.transition(e.ctx, e.g, stale, change{to: Rejected, by: StepReject, reason: "decided on the AUTHORIZED record"})
		return err
	})
}
