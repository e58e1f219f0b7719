package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// policySource is a policy service whose current version a test changes.
type policySource struct {
	mu      sync.Mutex
	version string
	err     error
}

func (s *policySource) current(context.Context, Effect) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version, s.err
}

func (s *policySource) set(version string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version, s.err = version, err
}

// An approval older than its validity, or given under a policy that is no
// longer current, does not authorize a dispatch: nothing reaches the
// adapter, and the record goes back to PROPOSED for a new approval, which
// then dispatches.
func TestLapsedApprovalIsNotDispatched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		lapse func(advance func(time.Duration), policy *policySource)
	}{
		{"expired", func(advance func(time.Duration), _ *policySource) { advance(15 * time.Minute) }},
		{"policy changed", func(_ func(time.Duration), policy *policySource) { policy.set("policy-8", nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			now := time.Date(2026, 11, 30, 2, 13, 24, 0, time.UTC)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
			policy := &policySource{version: "policy-7"}
			e := newEnv(t, WithClock(clock), WithPolicy(policy.current))
			rec := e.authorized(e.g, "op", promote("db-b"))
			if rec.Approval.Policy != "policy-7" || !rec.AuthorizedAt.Equal(now) {
				t.Fatalf("authorized: approval policy %q at %v; want policy-7 at %v", rec.Approval.Policy, rec.AuthorizedAt, now)
			}
			tc.lapse(advance, policy)
			rec, err := e.l.Dispatch(e.ctx, e.g, "op")
			if err != nil || rec.State != Proposed {
				t.Fatalf("dispatch: state %s, error %v; want PROPOSED, nil", rec.State, err)
			}
			if rec.Approval != nil || rec.ApprovalDigest != "" {
				t.Fatalf("a PROPOSED record keeps approval %+v (%q)", rec.Approval, rec.ApprovalDigest)
			}
			if pre, apply, obs := e.p.calls(); pre+apply+obs != 0 {
				t.Fatalf("the adapter saw %d precondition, %d apply, %d observe calls", pre, apply, obs)
			}
			_, js := e.journal("op")
			wantStates(t, js, Proposed, Authorized, Proposed)
			if js[2].By != StepExpire {
				t.Fatalf("the approval lapsed by step %s, want %s", js[2].By, StepExpire)
			}
			// A new approval (under the current policy) dispatches.
			cur, _ := policy.current(e.ctx, rec.Effect)
			rec, err = e.l.Authorize(e.ctx, e.g, "op", Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
				PreconditionDigest: rec.Precondition.Digest, Policy: cur})
			if err != nil || rec.State != Authorized {
				t.Fatalf("re-authorize: state %s, error %v", rec.State, err)
			}
			rec, err = e.l.Dispatch(e.ctx, e.g, "op")
			if err != nil || rec.State != Confirmed {
				t.Fatalf("dispatch after the new approval: state %s, error %v", rec.State, err)
			}
		})
	}
}

// Just inside its validity an approval still dispatches.
func TestApprovalWithinItsValidityDispatches(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 2, 13, 24, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, WithClock(clock), WithApprovalValidity(time.Minute))
	e.authorized(e.g, "op", promote("db-b"))
	mu.Lock()
	now = now.Add(time.Minute - time.Nanosecond)
	mu.Unlock()
	if rec, err := e.l.Dispatch(e.ctx, e.g, "op"); err != nil || rec.State != Confirmed {
		t.Fatalf("dispatch: state %s, error %v; want CONFIRMED", rec.State, err)
	}
}

// An approval given under another policy than the current one is refused
// at Authorize; a policy service that cannot answer is a hold at Dispatch.
// Neither writes anything.
func TestPolicyIsCheckedAtAuthorizeAndDispatch(t *testing.T) {
	t.Parallel()
	policy := &policySource{version: "policy-7"}
	e := newEnv(t, WithPolicy(policy.current))
	pre, _ := e.p.Precondition(e.ctx, promote("db-b"))
	e.p.set(func(p *provider) { p.preCalls = 0 })
	rec, err := e.l.Propose(e.ctx, e.g, "op", promote("db-b"), pre)
	if err != nil {
		t.Fatal(err)
	}
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.OperationConflict, func() error {
		_, err := e.l.Authorize(e.ctx, e.g, "op", Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
			PreconditionDigest: rec.Precondition.Digest, Policy: "policy-6"})
		return err
	})
	if _, err := e.l.Authorize(e.ctx, e.g, "op", Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
		PreconditionDigest: rec.Precondition.Digest}); err != nil {
		t.Fatal(err)
	}
	policy.set("", errors.New("policy service: connection refused"))
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.AuthorityUnavailable, func() error {
		_, err := e.l.Dispatch(e.ctx, e.g, "op")
		return err
	})
	if pre, apply, _ := e.p.calls(); pre+apply != 0 {
		t.Fatalf("the adapter saw %d precondition, %d apply calls", pre, apply)
	}
}

// TestOnlyTheSameApprovalRepeatsOnAnAuthorizedRecord: repeating the very
// approval of an AUTHORIZED record returns it; another approval of it —
// another approver, or the same one with another note — is not that
// approval and is refused, nothing written.
func TestOnlyTheSameApprovalRepeatsOnAnAuthorizedRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, err := e.l.Propose(e.ctx, e.g, "op", promote("db-b"), Observation{Digest: "world-1", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	a := Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, At: at, Note: "ticket 1"}
	if _, err := e.l.Authorize(e.ctx, e.g, "op", a); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Authorize(e.ctx, e.g, "op", a); err != nil {
		t.Fatalf("the same approval again: %v", err)
	}
	otherNote, otherApprover := a, a
	otherNote.Note = "ticket 2"
	otherApprover.Approver = "erin"
	for name, b := range map[string]Approval{"another note": otherNote, "another approver": otherApprover} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
				_, err := e.l.Authorize(e.ctx, e.g, "op", b)
				return err
			})
		})
	}
}

// Authorize is idempotent on the approval — its approver, digests, policy
// and note — not on its time: a retry stamped later (the gateway stamps
// each call) returns the AUTHORIZED record and writes nothing. An approval
// differing in any of the five is another approval, refused, nothing
// written (the note: TestOnlyTheSameApprovalRepeatsOnAnAuthorizedRecord).
func TestARetriedApprovalIsTheSameApproval(t *testing.T) {
	t.Parallel()
	policy := &policySource{version: "policy-7"}
	e := newEnv(t, WithPolicy(policy.current))
	rec := e.authorized(e.g, "op", promote("db-b"))
	same := *rec.Approval
	same.At = same.At.Add(time.Minute)
	lgtest.WritesNothing(t, e.c.Client(), e.c.Keys().Prefix(), "a retried approval", func() {
		got, err := e.l.Authorize(e.ctx, e.g, "op", same)
		if err != nil || got.State != Authorized || got.Seq != rec.Seq {
			t.Fatalf("retried Authorize: %v, %+v", err, got)
		}
	})
	for name, change := range map[string]func(a *Approval){
		"another approver":            func(a *Approval) { a.Approver = "imani" },
		"another parameters digest":   func(a *Approval) { a.ParamsDigest = "other" },
		"another precondition digest": func(a *Approval) { a.PreconditionDigest = "world-9" },
	} {
		t.Run(name, func(t *testing.T) {
			other := *rec.Approval
			change(&other)
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
				_, err := e.l.Authorize(e.ctx, e.g, "op", other)
				return err
			})
		})
	}
	// The policy changed since the approval: the same approver and digests
	// under the current policy are another approval (Dispatch expires the
	// first; this one waits for that).
	policy.set("policy-8", nil)
	renewed := *rec.Approval
	renewed.Policy = ""
	lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.IllegalTransition, func() error {
		_, err := e.l.Authorize(e.ctx, e.g, "op", renewed)
		return err
	})
}
