package robustness_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/robustness"
)

// Named fault cases on three-member clusters. Each waits on events
// (leader changes, watches, Done); a timer appears only where a real TTL
// must run out.

func three(t *testing.T) *embedtest.Cluster {
	t.Helper()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	if _, err := cl.Leader(lgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	return cl
}

// runCtx bounds a whole recorded run (faults, workload, check), which
// lgtest.Timeout, meant for one wait, is too short for on a loaded machine.
func runCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func intent(task, op string, expected int64) fencedtxn.Intent {
	return fencedtxn.Intent{Tenant: "t", Task: task, Operation: op, Value: []byte(op), ExpectedVersion: expected}
}

func TestLeaderKilledDuringConcurrentClaimsAndCommits(t *testing.T) {
	t.Parallel()
	res, err := robustness.Run(runCtx(t), three(t), robustness.Scenario{
		Name: "kill-leader", Faults: []string{"kill-leader", "kill-leader"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
	if res.Verdict != porcupine.Ok || len(res.Violations) > 0 || res.Stats.Faults["kill-leader"] != 2 {
		t.Fatalf("verdict %s, violations %v, faults %v", res.Verdict, res.Violations, res.Stats.Faults)
	}
	if res.Stats.Acknowledged == 0 {
		t.Fatal("no commit acknowledged")
	}
}

func TestMemberRestartedMidLease(t *testing.T) {
	t.Parallel()
	cl := three(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.Coordinator(t, cl)
	s := lgtest.Session(t, c, "w", 3*time.Second)
	g := lgtest.Claim(t, s, "t", "k")
	if _, err := fencedtxn.Commit(ctx, c, g, intent("k", "op-1", 0), fencedtxn.WithSession(s)); err != nil {
		t.Fatal(err)
	}
	// Every member, the leader (which runs the lessor) included, is
	// restarted in turn while the lease is held.
	for i := 0; i < cl.Size(); i++ {
		if err := cl.Member(i).Halt(); err != nil {
			t.Fatal(err)
		}
		if err := cl.Member(i).Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Leader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("session lost across restarts: %v", err)
	}
	o, err := c.Owner(ctx, "t", "k")
	if err != nil || o.Epoch != g.Epoch || o.Owner != "w" {
		t.Fatalf("ownership after restarts: %+v %v", o, err)
	}
	r, err := fencedtxn.Commit(ctx, c, g, intent("k", "op-2", 1), fencedtxn.WithSession(s))
	if err != nil || r.CommittedVersion != 2 || r.Epoch != g.Epoch {
		t.Fatalf("commit after restarts: %+v %v", r, err)
	}
}

// TestQuorumLost: with two of three members down, commits are holds or
// unknown — never a refusal, never a success; after recovery, retrying the
// same intents loses nothing acknowledged and applies nothing twice.
func TestQuorumLost(t *testing.T) {
	t.Parallel()
	cl := three(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.Coordinator(t, cl)
	s := lgtest.Session(t, c, "w", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "k")
	if _, err := fencedtxn.Commit(ctx, c, g, intent("k", "acked", 0)); err != nil {
		t.Fatal(err)
	}
	lead, _ := cl.Leader(ctx)
	down := []int{lead, (lead + 1) % 3}
	for _, i := range down {
		if err := cl.Member(i).Kill(); err != nil {
			t.Fatal(err)
		}
	}
	pending := []fencedtxn.Intent{intent("k", "during-1", 1), intent("k", "during-2", 1)}
	for _, in := range pending {
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := fencedtxn.Commit(short, c, g, in)
		cancel()
		switch d := coordinator.DispositionOf(err); d {
		case coordinator.AuthorityUnavailable, coordinator.OutcomeUnknown:
			t.Logf("%s without quorum: %s", in.Operation, d)
		default:
			t.Fatalf("%s without quorum: %q (%v), want a hold or unknown", in.Operation, d, err)
		}
	}
	for _, i := range down {
		if err := cl.Member(i).Start(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	// Retry the same intents: the first applies once (committed, or
	// historical_retry if the held request had applied); the second,
	// written against the same version, is then a version conflict.
	r, err := fencedtxn.Commit(ctx, c, g, pending[0])
	if err != nil || r.CommittedVersion != 2 {
		t.Fatalf("retry of %s: %+v %v", pending[0].Operation, r, err)
	}
	_, err = fencedtxn.Commit(ctx, c, g, pending[1])
	lgtest.Want(t, err, coordinator.VersionConflict)
	st, err := fencedtxn.Get(ctx, c, "t", "k")
	if err != nil || st.Version != 2 || st.Operation != "during-1" {
		t.Fatalf("state after recovery: %+v %v", st, err)
	}
	ops, err := c.Client().Get(ctx, c.Keys().Op("t", "k", ""), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(ops.Kvs) != 2 {
		t.Fatalf("operation records after recovery: %d %v, want acked and during-1", len(ops.Kvs), err)
	}
}

// TestMinorityPartitionedLeader: a worker whose only member is the leader
// cut off from its peers cannot commit (a hold or unknown, never a
// success); the majority elects, the worker's lease runs out there, another
// worker takes over; after the heal the first worker's retry is refused and
// its held write never appears.
func TestMinorityPartitionedLeader(t *testing.T) {
	t.Parallel()
	cl := three(t)
	ctx := lgtest.Ctx(t)
	lead, _ := cl.Leader(ctx)
	rest := []int{(lead + 1) % 3, (lead + 2) % 3}
	ca := lgtest.CoordinatorOf(t, lgtest.MemberClient(t, cl, lead))
	cb := lgtest.CoordinatorOf(t, lgtest.MemberClient(t, cl, rest[0]))
	a := lgtest.Session(t, ca, "a", 2*time.Second)
	ga := lgtest.Claim(t, a, "t", "k")

	cl.Partition(lead)
	if _, err := cl.LeaderAmong(ctx, rest...); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := fencedtxn.Commit(short, ca, ga, intent("k", "a-1", 0))
	cancel()
	if d := coordinator.DispositionOf(err); d != coordinator.AuthorityUnavailable && d != coordinator.OutcomeUnknown {
		t.Fatalf("commit through the isolated leader: %q (%v), want a hold or unknown", d, err)
	}
	// On the majority's side a's keepalives never arrive: its lease expires.
	lgtest.WaitOwnerGone(t, cb, "t", "k")
	b := lgtest.Session(t, cb, "b", 2*time.Second)
	gb := lgtest.Claim(t, b, "t", "k")
	if _, err := fencedtxn.Commit(ctx, cb, gb, intent("k", "b-1", 0)); err != nil {
		t.Fatal(err)
	}
	cl.Heal()
	if _, err := cl.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = fencedtxn.Commit(ctx, ca, ga, intent("k", "a-1", 0))
	lgtest.Want(t, err, coordinator.StaleOwner)
	st, err := fencedtxn.Get(ctx, cb, "t", "k")
	if err != nil || st.Version != 1 || st.Operation != "b-1" {
		t.Fatalf("state: %+v %v", st, err)
	}
	if resp, err := cb.Client().Get(ctx, cb.Keys().Op("t", "k", "a-1")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("a's held write appeared: %v %v", resp.Kvs, err)
	}
}

// TestClientPartitionedPastTTL: one worker's network goes dark while its
// process lives. Its session's Done fires at its local deadline and its
// session refuses to act; the lease expires, another worker takes over; the
// first worker's write, sent after the heal with the old grant, is refused
// and writes nothing.
func TestClientPartitionedPastTTL(t *testing.T) {
	t.Parallel()
	cl := three(t)
	ctx := lgtest.Ctx(t)
	cp := cl.ClientProxy(t)
	ca := lgtest.CoordinatorOf(t, cp.Client(t))
	cb := lgtest.Coordinator(t, cl)
	a := lgtest.Session(t, ca, "a", 2*time.Second)
	ga := lgtest.Claim(t, a, "t", "k")

	cp.Blackhole()
	lgtest.Wait(t, a.Done(), "a's session to end")
	if !errors.Is(a.Err(), coordinator.ErrSessionDeadline) {
		t.Fatalf("session ended with %v, want the local deadline", a.Err())
	}
	_, err := fencedtxn.Commit(ctx, ca, ga, intent("k", "a-1", 0), fencedtxn.WithSession(a))
	lgtest.Want(t, err, coordinator.ExpiredOwner) // stopped locally, before any I/O

	lgtest.WaitOwnerGone(t, cb, "t", "k")
	b := lgtest.Session(t, cb, "b", 2*time.Second)
	gb := lgtest.Claim(t, b, "t", "k")
	if _, err := fencedtxn.Commit(ctx, cb, gb, intent("k", "b-1", 0)); err != nil {
		t.Fatal(err)
	}
	cp.Heal()
	lgtest.RefusedWritingNothing(t, cb.Client(), cb.Keys().Prefix()+"/", coordinator.StaleOwner, func() error {
		_, err := fencedtxn.Commit(ctx, ca, ga, intent("k", "a-1", 0))
		return err
	})
}

// TestLeaderChangeExtendsLeases: a new leader extends every lease (etcd's
// lessor promotion: the full TTL again, plus an election timeout), so a
// lease outlives its original deadline. Nobody may take the task over at
// that deadline: a claim well past it is still busy, and only the owner
// key's deletion frees the task. The holder's own session, whose local
// deadline is the original one, stops acting on time.
func TestLeaderChangeExtendsLeases(t *testing.T) {
	t.Parallel()
	cl := three(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.Coordinator(t, cl)
	const ttl = 6 * time.Second
	sent := time.Now()
	a := lgtest.Session(t, c, "a", ttl, coordinator.WithoutKeepAlive())
	ga := lgtest.Claim(t, a, "t", "k")
	b := lgtest.Session(t, c, "b", ttl)
	// Half the TTL runs out (a real timer: the lease's age is the point),
	// then the leader stops; the new one extends the lease to a full TTL
	// from its election on, about ttl/2 past the original deadline.
	time.Sleep(time.Until(sent.Add(ttl / 2)))
	lead, _ := cl.Leader(ctx)
	if err := cl.Member(lead).Halt(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	lgtest.Wait(t, a.Done(), "a's local deadline")
	_, err := fencedtxn.Commit(ctx, c, ga, intent("k", "a-1", 0), fencedtxn.WithSession(a))
	lgtest.Want(t, err, coordinator.ExpiredOwner) // a stops on the original deadline
	// Past the original deadline, by a quarter TTL: still busy.
	time.Sleep(time.Until(sent.Add(ttl + ttl/4)))
	_, err = b.Claim(ctx, "t", "k")
	lgtest.Want(t, err, coordinator.Busy)
	lgtest.WaitOwnerGone(t, c, "t", "k")
	t.Logf("lease outlived its original deadline by %v", time.Since(sent.Add(ttl)).Round(10*time.Millisecond))
	gb := lgtest.Claim(t, b, "t", "k")
	if gb.Epoch <= ga.Epoch {
		t.Fatalf("epoch %d after %d", gb.Epoch, ga.Epoch)
	}
	_, err = fencedtxn.Commit(ctx, c, ga, intent("k", "a-1", 0))
	lgtest.Want(t, err, coordinator.StaleOwner)
}
