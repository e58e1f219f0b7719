package pgpromote_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/adaptertest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

// world is a real primary and standby, the adapter reaching the standby
// through a proxy that can cut the promote's connection, and the ledger.
type world struct {
	pair  *realprov.PGPair
	proxy *realprov.CutProxy
	ad    *pgpromote.Adapter
	cnt   *adaptertest.Counting
	env   *adaptertest.Env
}

func newWorld(t *testing.T, opts ...pgpromote.Option) *world {
	t.Helper()
	pair := realprov.NewPGPair(t)
	proxy, err := realprov.NewCutProxy(fmt.Sprintf("127.0.0.1:%d", pair.Standby.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	standby := strings.Replace(pair.Standby.ConnString(), fmt.Sprintf("port=%d", pair.Standby.Port), fmt.Sprintf("port=%d", proxy.Port()), 1)
	ad, err := pgpromote.New([]pgpromote.Node{
		{Name: pair.Primary.Name, ConnString: pair.Primary.ConnString()},
		{Name: pair.Standby.Name, ConnString: standby},
	}, pair.PasswordFile, append([]pgpromote.Option{pgpromote.WithPromoteWait(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	cnt := &adaptertest.Counting{Adapter: ad}
	return &world{pair: pair, proxy: proxy, ad: ad, cnt: cnt, env: adaptertest.New(t, []ledger.Adapter{cnt})}
}

func (w *world) effect(t *testing.T, target string) ledger.Effect {
	t.Helper()
	e, err := w.ad.Effect(target, "5s", "failover-v3")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// role is a node's role as the server says now.
func (w *world) role(t *testing.T, n *realprov.PGNode) string {
	t.Helper()
	in, err := n.InRecovery(w.env.Ctx)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	if in {
		return "standby"
	}
	return "writer"
}

func timeline(t *testing.T, ev *ledger.Evidence) string {
	t.Helper()
	if ev == nil || ev.Empty() {
		t.Fatal("no evidence")
	}
	return strings.Join(ev.ProviderIDs, ",") + " " + string(ev.Detail)
}

func TestPromotionApplied(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "promote-db-b", w.effect(t, "db-b"))
	rec := w.env.Dispatch(w.env.G, "promote-db-b")
	if rec.State != ledger.Confirmed {
		t.Fatalf("state %s, want CONFIRMED: %+v", rec.State, rec)
	}
	if !strings.Contains(timeline(t, rec.Evidence), `"in_recovery":false`) || w.role(t, w.pair.Standby) != "writer" {
		t.Fatalf("db-b not shown promoted: %s", timeline(t, rec.Evidence))
	}
	w.env.WantStates("promote-db-b", ledger.Proposed, ledger.Authorized, ledger.Dispatching, ledger.Confirmed)
}

// The promote reaches the server and its connection is cut before the
// answer: UNKNOWN, then the next owner reconciles from the topology —
// db-b out of recovery on a new timeline — without promoting again.
func TestPromoteCutAfterSendReconciledFromTopology(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "promote-db-b", w.effect(t, "db-b"))
	w.proxy.CutAfter("pg_promote")
	rec := w.env.Dispatch(w.env.G, "promote-db-b")
	if rec.State != ledger.Unknown || w.proxy.Cuts() != 1 {
		_, js := w.env.Journal("promote-db-b")
		t.Fatalf("state %s after a cut (cuts %d), want UNKNOWN: %+v", rec.State, w.proxy.Cuts(), js[len(js)-1])
	}
	g2 := w.env.TakeOver()
	rec = w.env.Reconcile(g2, "promote-db-b")
	for i := 0; rec.State == ledger.Unknown && i < 50; i++ { // pending while the promotion finishes
		rec = w.env.Reconcile(g2, "promote-db-b")
	}
	if rec.State != ledger.Confirmed {
		t.Fatalf("state %s, want CONFIRMED from the topology", rec.State)
	}
	if w.cnt.Applies() != 1 || !strings.Contains(timeline(t, rec.Evidence), "db-b@timeline-2") {
		t.Fatalf("applies %d, evidence %s", w.cnt.Applies(), timeline(t, rec.Evidence))
	}
}

// The promote is written but never delivered: the same ambiguous answer,
// but the standby stays in recovery. Past the promote wait the topology
// says not applied, and without a safe retry the ledger stops for review.
// An adapter that assumed "applied" would confirm a promotion that never
// happened.
func TestPromoteLostBeforeDeliveryIsNotConfirmed(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "promote-db-b", w.effect(t, "db-b"))
	w.proxy.DropAt("pg_promote")
	rec := w.env.Dispatch(w.env.G, "promote-db-b")
	if rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	g2 := w.env.TakeOver()
	deadline := time.Now().Add(30 * time.Second)
	for rec.State == ledger.Unknown && time.Now().Before(deadline) {
		rec = w.env.Reconcile(g2, "promote-db-b")
	}
	if rec.State != ledger.ManualReview {
		t.Fatalf("state %s, want MANUAL_REVIEW (not applied, no safe retry)", rec.State)
	}
	if w.role(t, w.pair.Standby) != "standby" {
		t.Fatal("db-b was promoted")
	}
}

// A definite refusal: the approved world already has db-b as writer, so
// the server refuses pg_promote (not in recovery) and nothing is applied;
// FAILED, with the topology as evidence.
func TestPromoteOfAWriterIsRefusedWithEvidence(t *testing.T) {
	w := newWorld(t)
	if err := w.pair.Standby.Promote(w.env.Ctx); err != nil {
		t.Fatal(err)
	}
	w.env.Authorized(w.env.G, w.cnt, "promote-db-b", w.effect(t, "db-b"))
	rec := w.env.Dispatch(w.env.G, "promote-db-b")
	if rec.State != ledger.Failed || !strings.Contains(timeline(t, rec.Evidence), "db-b") {
		t.Fatalf("state %s, evidence %v; want FAILED with the topology", rec.State, rec.Evidence)
	}
}

// The world changes between approval and dispatch (an operator promotes
// db-b by hand): SUPERSEDED, and the adapter's Apply is never called.
func TestChangedTopologySupersedesBeforeDispatch(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "promote-db-b", w.effect(t, "db-b"))
	if err := w.pair.Standby.Promote(w.env.Ctx); err != nil {
		t.Fatal(err)
	}
	rec := w.env.Dispatch(w.env.G, "promote-db-b")
	if rec.State != ledger.Superseded || w.cnt.Applies() != 0 {
		t.Fatalf("state %s, applies %d; want SUPERSEDED and no call", rec.State, w.cnt.Applies())
	}
}

// The world changes after the ledger revalidated it and before the call:
// the statement's own WHERE (still in recovery) refuses at the server.
func TestChangeBetweenRevalidationAndCallRefusedByTheServer(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "promote-db-b", w.effect(t, "db-b"))
	w.cnt.Before = func() {
		if err := w.pair.Standby.Promote(w.env.Ctx); err != nil {
			t.Error(err)
		}
	}
	rec := w.env.Dispatch(w.env.G, "promote-db-b")
	if rec.State != ledger.Failed {
		t.Fatalf("state %s, want FAILED (refused at the server)", rec.State)
	}
}

// Configuration is checked at construction: a bad address, credential
// path or password placement is invalid input then.
func TestConfigurationCheckedAtConstruction(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := func(name string) pgpromote.Node {
		return pgpromote.Node{Name: name, ConnString: "host=127.0.0.1 port=5432 user=leasegate dbname=postgres"}
	}
	for _, c := range []struct {
		name   string
		nodes  []pgpromote.Node
		pwfile string
		opts   []pgpromote.Option
		want   string
	}{
		{"one node", []pgpromote.Node{ok("db-a")}, pw, nil, "at least two"},
		{"same name twice", []pgpromote.Node{ok("db-a"), ok("db-a")}, pw, nil, "twice"},
		{"bad name", []pgpromote.Node{ok("db a"), ok("db-b")}, pw, nil, "node name"},
		{"bad port", []pgpromote.Node{ok("db-a"), {Name: "db-b", ConnString: "host=127.0.0.1 port=99999"}}, pw, nil, "does not parse"},
		{"no host", []pgpromote.Node{ok("db-a"), {Name: "db-b", ConnString: "port=5432"}}, pw, nil, "no host"},
		{"unresolvable host", []pgpromote.Node{ok("db-a"), {Name: "db-b", ConnString: "host=db-b.invalid port=5432"}}, pw, nil, "does not resolve"},
		{"password inline", []pgpromote.Node{ok("db-a"), {Name: "db-b", ConnString: "host=127.0.0.1 password=hunter2"}}, pw, nil, "password file"},
		{"missing password file", []pgpromote.Node{ok("db-a"), ok("db-b")}, filepath.Join(dir, "absent"), nil, "no such file"},
		{"empty password file", []pgpromote.Node{ok("db-a"), ok("db-b")}, empty, nil, "one non-empty line"},
		{"no password file", []pgpromote.Node{ok("db-a"), ok("db-b")}, "", nil, "no password file"},
		{"bad wait", []pgpromote.Node{ok("db-a"), ok("db-b")}, pw, []pgpromote.Option{pgpromote.WithPromoteWait(1500 * time.Millisecond)}, "whole seconds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := pgpromote.New(c.nodes, c.pwfile, c.opts...)
			lgtest.Want(t, err, coordinator.InvalidInput)
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q, want it to say %q and never the password", err, c.want)
			}
		})
	}
	if _, err := pgpromote.New([]pgpromote.Node{ok("db-a"), ok("db-b")}, pw); err != nil {
		t.Fatalf("good configuration: %v", err)
	}
}

// The standby is down at dispatch: the topology cannot be shown, so the
// dispatch holds (authority_unavailable) and nothing is sent; the record
// stays AUTHORIZED for a later dispatch.
func TestStandbyDownAtDispatchIsAHold(t *testing.T) {
	w := newWorld(t)
	w.env.Authorized(w.env.G, w.cnt, "promote-db-b", w.effect(t, "db-b"))
	if err := w.pair.Standby.Stop(); err != nil {
		t.Fatal(err)
	}
	rec, err := w.env.L.Dispatch(w.env.Ctx, w.env.G, "promote-db-b")
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
	if w.cnt.Applies() != 0 {
		t.Fatalf("applies %d", w.cnt.Applies())
	}
	if rec, _ = w.env.Journal("promote-db-b"); rec.State != ledger.Authorized {
		t.Fatalf("state %s, want AUTHORIZED", rec.State)
	}
}

// A promote lost before delivery, then the standby restarted (stopped, as
// in a failover gone wrong, and started again): a restart discards any
// pending promote signal, so the topology shows it not applied at once —
// not only after the promote wait — and the ledger stops for review.
func TestLostPromoteThenStandbyRestartedIsNotApplied(t *testing.T) {
	w := newWorld(t, pgpromote.WithPromoteWait(time.Hour))
	w.env.Authorized(w.env.G, w.cnt, "promote-db-b", w.effect(t, "db-b"))
	w.proxy.DropAt("pg_promote")
	if rec := w.env.Dispatch(w.env.G, "promote-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	if err := w.pair.Standby.Stop(); err != nil {
		t.Fatal(err)
	}
	g2 := w.env.TakeOver()
	// Down: the target does not answer, inconclusive; at the bound a person
	// decides. (Reconcile's polls all fail the same way.)
	if rec := w.env.Reconcile(g2, "promote-db-b"); rec.State != ledger.ManualReview {
		t.Fatalf("state %s with the standby down, want MANUAL_REVIEW", rec.State)
	}
	if err := w.pair.Standby.Start(w.env.Ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ := w.env.Journal("promote-db-b")
	o, ev, err := w.ad.Observe(w.env.Ctx, rec)
	if err != nil || o != ledger.NotApplied || !strings.Contains(string(ev.Detail), `"in_recovery":true`) {
		t.Fatalf("observe after the restart: %v %s %v; want not applied, in recovery", o, ev.Detail, err)
	}
}

// An approval older than the ledger's validity is not dispatched: the
// standby is not promoted, the record is back in PROPOSED.
func TestExpiredApprovalIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	w.env.ExpiredApproval(w.cnt, "promote-db-b", w.effect(t, "db-b"))
	if w.role(t, w.pair.Standby) != "standby" {
		t.Fatal("db-b was promoted")
	}
}

// A policy changed since the approval: not dispatched.
func TestChangedPolicyIsNotDispatched(t *testing.T) {
	w := newWorld(t)
	w.env.ChangedPolicy(w.cnt, "promote-db-b", w.effect(t, "db-b"))
	if w.role(t, w.pair.Standby) != "standby" {
		t.Fatal("db-b was promoted")
	}
}

// worker-a's promote succeeds while the task passes to worker-b: the
// answer is kept, and worker-b confirms from it without reading the
// topology again or promoting again.
func TestAnswerInHandAfterOwnershipChangedConfirms(t *testing.T) {
	w := newWorld(t)
	rec := w.env.AnswerInHand(w.cnt, "promote-db-b", w.effect(t, "db-b"), nil, ledger.Confirmed, ledger.Confirmed)
	if w.role(t, w.pair.Standby) != "writer" || rec.Evidence == nil || rec.Evidence.Empty() {
		t.Fatalf("db-b %s, evidence %+v", w.role(t, w.pair.Standby), rec.Evidence)
	}
}

// The server refuses worker-a's promote (an operator promoted db-b by hand
// in the gap) while the task passes to worker-b: the refusal is kept and
// settles the record without a second call. "Assume applied" would
// confirm a promotion the server refused.
func TestRefusalInHandAfterOwnershipChangedIsNotConfirmed(t *testing.T) {
	w := newWorld(t)
	promoteByHand := func() {
		if err := w.pair.Standby.Promote(w.env.Ctx); err != nil {
			t.Error(err)
		}
	}
	w.env.AnswerInHand(w.cnt, "promote-db-b", w.effect(t, "db-b"), promoteByHand, ledger.Failed, ledger.Failed)
}
