package fencedtxn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/core"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestDigestIsInjective(t *testing.T) {
	t.Parallel()
	base := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v"), ExpectedVersion: 1}
	variants := []fencedtxn.Intent{
		base,
		{Tenant: "tk", Task: "", Operation: "op", Value: []byte("v"), ExpectedVersion: 1},
		{Tenant: "t", Task: "kop", Operation: "", Value: []byte("v"), ExpectedVersion: 1},
		{Tenant: "t", Task: "k", Operation: "opv", Value: []byte(""), ExpectedVersion: 1},
		{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v"), ExpectedVersion: 2},
		{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v\x00"), ExpectedVersion: 1},
		{Tenant: "t", Task: "k", Operation: "o", Value: []byte("pv"), ExpectedVersion: 1},
	}
	seen := map[string]int{}
	for i, in := range variants {
		d := fencedtxn.Digest(in)
		if j, dup := seen[d]; dup {
			t.Fatalf("intents %d and %d share digest %s", i, j, d)
		}
		seen[d] = i
	}
	if fencedtxn.Digest(base) != fencedtxn.Digest(variants[0]) {
		t.Fatal("digest is not deterministic")
	}
}

func TestCommitBinaryValueAndCallerOps(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "k")
	value := string([]byte{0, 0xff, '\n', 'x'})
	r, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte(value)},
		fencedtxn.WithOps(clientv3.OpPut("/app/t/k", "mine"), clientv3.OpDelete("/app/t/old")))
	if err != nil || r.Disposition != coordinator.Committed {
		t.Fatalf("commit: %+v %v", r, err)
	}
	got, err := c.Client().Get(ctx, "/app/t/k")
	if err != nil || len(got.Kvs) != 1 || got.Kvs[0].ModRevision != r.Revision {
		t.Fatalf("caller op not applied in the commit's Txn: %+v %v (commit at %d)", got, err, r.Revision)
	}
	st, err := c.Client().Get(ctx, c.Keys().State("t", "k"))
	if err != nil || len(st.Kvs) != 1 {
		t.Fatal(err)
	}
	var rec core.StateRecord
	err = json.Unmarshal(st.Kvs[0].Value, &rec)
	lgtest.Holds(t, fmt.Sprintf("state record %+v %v", rec, err), lgtest.Is("it decodes", err == nil),
		lgtest.Is("the committed value", string(rec.Value) == value), lgtest.Is("version 1", rec.Version == 1),
		lgtest.Is("the grant's epoch", rec.Epoch == g.Epoch))
	// A refused commit applies none of the caller's ops.
	_, err = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op2", Value: []byte("x")},
		fencedtxn.WithOps(clientv3.OpPut("/app/t/refused", "no")))
	lgtest.Want(t, err, coordinator.VersionConflict)
	if got, _ := c.Client().Get(ctx, "/app/t/refused"); len(got.Kvs) != 0 {
		t.Fatal("a refused commit applied the caller's op")
	}
}

func TestGuardFencesCallersTxn(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "k")
	put := func(g coordinator.Grant, extra ...clientv3.Cmp) error {
		resp, err := c.Client().Txn(ctx).
			If(append(c.Guard(g), extra...)...).
			Then(clientv3.OpPut("/app/value", g.Owner)).
			Else(core.GuardReads(c, g)...).
			Commit()
		if err != nil || resp.Succeeded {
			return err
		}
		return core.CheckGuard(c, "guard", g, resp.Responses)
	}
	if err := put(g); err != nil {
		t.Fatal(err)
	}
	// The grant is current; the caller's own compare failed: nil.
	if err := put(g, clientv3.Compare(clientv3.Value("/app/value"), "=", "other")); err != nil {
		t.Fatalf("own compare failing classified as %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lgtest.Want(t, put(g), coordinator.ExpiredOwner)
	next := lgtest.Claim(t, lgtest.Session(t, c, "next", 10*time.Second), "t", "k")
	lgtest.Want(t, put(g), coordinator.StaleOwner)
	if err := put(next); err != nil {
		t.Fatal(err)
	}
}

func TestWithSessionStopsPastLocalDeadline(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	s := lgtest.Session(t, c, "worker", time.Second, coordinator.WithoutKeepAlive())
	g := lgtest.Claim(t, s, "t", "k")
	lgtest.Wait(t, s.Done(), "the session to end")
	// No etcd is needed to refuse: an expired context proves no I/O.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.ExpiredOwner, func() error {
		_, err := fencedtxn.Commit(done, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op"}, fencedtxn.WithSession(s))
		return err
	})
}

// TestDeadlineAfterSendIsOutcomeUnknown sends a commit to a member that has
// lost its quorum: the request reaches etcd, the deadline passes with no
// answer, and the outcome is unknown — never a hold, never a refusal.
// Retrying the same intent after quorum returns tells what happened.
func TestDeadlineAfterSendIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	cl.WaitLeader(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.CoordinatorOf(t, lgtest.MemberClient(t, cl, 0))
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 30*time.Second), "t", "k")
	in := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v")}

	cl.Member(1).Stop(t)
	cl.Member(2).Stop(t)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := fencedtxn.Commit(short, c, g, in)
	lgtest.Want(t, err, coordinator.OutcomeUnknown)

	cl.Member(1).Restart(t)
	cl.Member(2).Restart(t)
	cl.WaitLeader(t)
	r, err := fencedtxn.Commit(ctx, c, g, in)
	if err != nil || (r.Disposition != coordinator.Committed && r.Disposition != coordinator.HistoricalRetry) || r.CommittedVersion != 1 {
		t.Fatalf("retry of the unknown commit: %+v %v", r, err)
	}
	again, err := fencedtxn.Commit(ctx, c, g, in)
	if err != nil || again.Disposition != coordinator.HistoricalRetry || again.Revision != r.Revision {
		t.Fatalf("second retry: %+v %v; want the receipt of %+v", again, err, r)
	}
}
