package fencedtxn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
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
	var rec store.StateRecord
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
			Else(store.Of(c).GuardReads(g)...).
			Commit()
		if err != nil || resp.Succeeded {
			return err
		}
		return store.Of(c).CheckGuard("guard", g, resp.Responses)
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

// TestCallerOpThatIsARangeIsInvalidInput: a delete from /a to /z would
// cover leasegate's own keys whatever its first key; a caller op that is a
// range is invalid_input and nothing is written.
func TestCallerOpThatIsARangeIsInvalidInput(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "ranged")
	if _, err := c.Client().Put(ctx, "/a", "caller's"); err != nil {
		t.Fatal(err)
	}
	in := fencedtxn.Intent{Tenant: "t", Task: "ranged", Operation: "op", Value: []byte("v")}
	for name, op := range map[string]clientv3.Op{
		"a delete from /a to /z":   clientv3.OpDelete("/a", clientv3.WithRange("/z")),
		"a delete of a prefix":     clientv3.OpDelete("/a", clientv3.WithPrefix()),
		"a delete from /a onwards": clientv3.OpDelete("/a", clientv3.WithFromKey()),
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, c.Client(), "/", coordinator.InvalidInput, func() error {
				_, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(op))
				return err
			})
		})
	}
}

// TestCallerOpUnderASiblingPrefixCommits: leasegate's keys are those under
// "<prefix>/"; a caller key that merely starts with the prefix's text
// (/leasegate-app/... beside /leasegate) is the caller's own and commits
// with the state.
func TestCallerOpUnderASiblingPrefixCommits(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "sibling")
	key := c.Keys().Prefix() + "-app/config"
	in := fencedtxn.Intent{Tenant: "t", Task: "sibling", Operation: "op", Value: []byte("v")}
	if _, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(clientv3.OpPut(key, "x"))); err != nil {
		t.Fatalf("commit with a caller op on %s: %v", key, err)
	}
	if resp, err := c.Client().Get(ctx, key); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "x" {
		t.Fatalf("caller key after the commit: %v %v", resp, err)
	}
}

// TestValueOfExactlyTheLimitCommits: WithMaxValueBytes(n) accepts a value
// of n bytes and refuses n+1, writing nothing.
func TestValueOfExactlyTheLimitCommits(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "limit")
	const n = 64
	over := fencedtxn.Intent{Tenant: "t", Task: "limit", Operation: "over", Value: make([]byte, n+1)}
	lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.InvalidInput, func() error {
		_, err := fencedtxn.Commit(ctx, c, g, over, fencedtxn.WithMaxValueBytes(n))
		return err
	})
	at := fencedtxn.Intent{Tenant: "t", Task: "limit", Operation: "at", Value: make([]byte, n)}
	if r, err := fencedtxn.Commit(ctx, c, g, at, fencedtxn.WithMaxValueBytes(n)); err != nil || r.Disposition != coordinator.Committed {
		t.Fatalf("a value of exactly %d bytes: %+v %v; want committed", n, r, err)
	}
}

// TestConcurrentCommitsKeepTheirOwnCompares: commits under one grant run
// at once — a new operation at the current version beside a retry of an
// operation already committed — each carry their own compares: the retry
// is always historical_retry, never applied a second time over the new
// one's state (were the compares cached for the grant shared, one
// commit's appends would overwrite the other's).
func TestConcurrentCommitsKeepTheirOwnCompares(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 30*time.Second), "t", "concurrent")
	old := fencedtxn.Intent{Tenant: "t", Task: "concurrent", Operation: "old", Value: []byte("old"), ExpectedVersion: 0}
	if _, err := fencedtxn.Commit(ctx, c, g, old); err != nil {
		t.Fatal(err)
	}
	const rounds, retries = 300, 3
	for v := int64(1); v <= rounds; v++ {
		var wg sync.WaitGroup
		var newErr error
		retry := make([]fencedtxn.Receipt, retries)
		retryErr := make([]error, retries)
		wg.Add(1 + retries)
		go func() {
			defer wg.Done()
			_, newErr = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "concurrent",
				Operation: fmt.Sprintf("new-%d", v), Value: []byte("new"), ExpectedVersion: v})
		}()
		for i := range retries {
			go func() {
				defer wg.Done()
				retry[i], retryErr[i] = fencedtxn.Commit(ctx, c, g, old)
			}()
		}
		wg.Wait()
		if newErr != nil {
			t.Fatalf("round %d: the new operation: %v", v, newErr)
		}
		for i := range retries {
			if retryErr[i] != nil || retry[i].Disposition != coordinator.HistoricalRetry {
				t.Fatalf("round %d: a retry of a committed operation: %+v %v; want historical_retry", v, retry[i], retryErr[i])
			}
		}
	}
	if st, err := fencedtxn.Get(ctx, c, "t", "concurrent"); err != nil || st.Version != rounds+1 || string(st.Value) != "new" {
		t.Fatalf("state after the rounds: %+v %v; want version rounds+1 of a new operation", st, err)
	}
}

// TestStoredDataThatCannotBeDecodedIsCorruptRecord: a state, operation or
// receipt record that does not decode (written outside leasegate) is
// corrupt_record — to Get as to Commit, the ledger's answer for the same
// case — and nothing is written: not a conflict, not the raw bytes.
func TestStoredDataThatCannotBeDecodedIsCorruptRecord(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 30*time.Second), "t", "k")
	k, prefix := c.Keys(), c.Keys().Prefix()
	put := func(key, value string) {
		t.Helper()
		if _, err := c.Client().Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}

	put(k.State("t", "k"), "not json")
	lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.CorruptRecord, func() error {
		_, err := fencedtxn.Get(ctx, c, "t", "k")
		return err
	})

	intent := func(op string) fencedtxn.Intent {
		return fencedtxn.Intent{Tenant: "t", Task: "k", Operation: op, Value: []byte("v"), ExpectedVersion: 1}
	}
	put(k.Op("t", "k", "op-1"), "not json")                                                                            // the operation record
	put(k.Op("t", "k", "op-2"), `{"payload_digest":"`+fencedtxn.Digest(intent("op-2"))+`","receipt":"not a receipt"}`) // its receipt
	for _, op := range []string{"op-1", "op-2"} {
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.CorruptRecord, func() error {
			_, err := fencedtxn.Commit(ctx, c, g, intent(op))
			return err
		})
	}
}

// A stored operation record carries its intent's digest, and a retry is
// recognised by it: the digest of a given intent never changes.
func TestIntentDigestIsUnchanged(t *testing.T) {
	in := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op-1", Value: []byte("v"), ExpectedVersion: 3}
	const want = "53f5e6b667ca66ca56ab7f00725f9deed7e52c0dfeeff7c0f54476a6b90022b3"
	if got := fencedtxn.Digest(in); got != want {
		t.Fatalf("Digest(%+v) = %s, want %s (stored records would no longer match)", in, got, want)
	}
}

// FuzzDigest: two intents share a digest exactly when they are the same
// intent (a field's bytes moved into its neighbour make another digest).
func FuzzDigest(f *testing.F) {
	f.Add("t", "k", "op", []byte("v"), int64(1), "tk", "", "op", []byte("v"), int64(1))
	f.Add("t", "k", "o", []byte("pv"), int64(0), "t", "k", "op", []byte("v"), int64(0))
	f.Add("t", "k", "op", []byte("v\x00"), int64(1), "t", "k", "op", []byte("v"), int64(1))
	f.Add("t", "k", "op", []byte{}, int64(-1), "t", "k", "op", []byte(nil), int64(-1))
	f.Fuzz(func(t *testing.T, t1, k1, o1 string, v1 []byte, e1 int64, t2, k2, o2 string, v2 []byte, e2 int64) {
		a := fencedtxn.Intent{Tenant: t1, Task: k1, Operation: o1, Value: v1, ExpectedVersion: e1}
		b := fencedtxn.Intent{Tenant: t2, Task: k2, Operation: o2, Value: v2, ExpectedVersion: e2}
		same := t1 == t2 && k1 == k2 && o1 == o2 && bytes.Equal(v1, v2) && e1 == e2
		if (fencedtxn.Digest(a) == fencedtxn.Digest(b)) != same {
			t.Fatalf("intents %+v and %+v: same %v, digests %s %s", a, b, same, fencedtxn.Digest(a), fencedtxn.Digest(b))
		}
	})
}

// TestIntentForAnotherTenantsTaskIsScopeMismatch: a grant is for one
// tenant's task; an intent naming a task of the same name under another
// tenant is scope_mismatch, and nothing is written.
func TestIntentForAnotherTenantsTaskIsScopeMismatch(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "acme", "billing")
	for name, in := range map[string]fencedtxn.Intent{
		"another tenant, same task": {Tenant: "globex", Task: "billing", Operation: "op", Value: []byte("v")},
		"same tenant, another task": {Tenant: "acme", Task: "payroll", Operation: "op", Value: []byte("v")},
	} {
		t.Run(name, func(t *testing.T) {
			refusedCommit(t, ctx, c, g, in, coordinator.ScopeMismatch)
		})
	}
}

// TestStaleNotExpiredAndInvalidCallerOps pins that a grant outlived by a
// newer epoch is stale_owner (not expired_owner) even when its owner
// identity matches, that caller ops inside leasegate's prefix or over a
// range are invalid input writing nothing, and that another tenant's task
// of the same name is scope_mismatch. The subtests share one cluster; each
// uses its own task.
func TestStaleNotExpiredAndInvalidCallerOps(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	prefix := c.Keys().Prefix()

	t.Run("the same session re-claims and releases: its first grant is stale, not expired", func(t *testing.T) {
		// Fence record and owner identity match the first grant; only the
		// fence's epoch tells that a newer grant was published since.
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		first := lgtest.Claim(t, s, "t", "reclaimed")
		if err := c.Release(ctx, first); err != nil {
			t.Fatal(err)
		}
		second := lgtest.Claim(t, s, "t", "reclaimed")
		if err := c.Release(ctx, second); err != nil {
			t.Fatal(err)
		}
		in := fencedtxn.Intent{Tenant: "t", Task: "reclaimed", Operation: "op"}
		refusedCommit(t, ctx, c, first, in, coordinator.StaleOwner)
		refusedCommit(t, ctx, c, second, in, coordinator.ExpiredOwner)
	})

	t.Run("an impostor of a released grant's epoch is stale, not expired", func(t *testing.T) {
		// The owner key is gone and the fence still at the epoch: only the
		// fence record's owner and lease tell that the grant is not the one
		// published at that epoch.
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		g := lgtest.Claim(t, s, "t", "impostor")
		if err := c.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
		in := fencedtxn.Intent{Tenant: "t", Task: "impostor", Operation: "op"}
		otherOwner, otherLease := g, g
		otherOwner.Owner = "impostor"
		otherLease.Lease = lgtest.Session(t, c, "worker", 10*time.Second).Lease()
		refusedCommit(t, ctx, c, otherOwner, in, coordinator.StaleOwner)
		refusedCommit(t, ctx, c, otherLease, in, coordinator.StaleOwner)
		refusedCommit(t, ctx, c, g, in, coordinator.ExpiredOwner)
	})

	t.Run("caller ops inside leasegate's prefix are invalid input, nothing written", func(t *testing.T) {
		// Keys the commit itself does not write, so etcd's duplicate-key
		// refusal cannot stand in for the prefix check.
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "smuggler")
		victim := lgtest.Claim(t, lgtest.Session(t, c, "victim", 10*time.Second), "t", "victim")
		in := fencedtxn.Intent{Tenant: "t", Task: "smuggler", Operation: "op"}
		for _, op := range []clientv3.Op{
			clientv3.OpPut(c.Keys().Fence("t", "victim"), "{}"),
			clientv3.OpDelete(c.Keys().Owner("t", "victim")),
			clientv3.OpPut(c.Keys().Realm(), "another-realm"),
		} {
			lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.InvalidInput, func() error {
				_, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(op))
				return err
			})
		}
		if own, err := c.Owner(ctx, "t", "victim"); err != nil || own.Epoch != victim.Epoch || !own.Owned() {
			t.Fatalf("victim after the refused commits: %+v %v", own, err)
		}
	})

	t.Run("a caller op that is a range is invalid input, nothing written", func(t *testing.T) {
		// Each range starts outside leasegate's prefix, so the key check
		// alone lets it through, and ends before the ops and state keys the
		// commit puts, so etcd's overlap refusal cannot stand in either:
		// applied, the first would delete every fence of the keyspace.
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "ranger")
		victim := lgtest.Claim(t, lgtest.Session(t, c, "victim", 10*time.Second), "t", "range-victim")
		in := fencedtxn.Intent{Tenant: "t", Task: "ranger", Operation: "op"}
		for _, op := range []clientv3.Op{
			clientv3.OpDelete("/a", clientv3.WithRange(prefix+"/ops")),
			clientv3.OpDelete("/", clientv3.WithFromKey()),
			clientv3.OpDelete("/a", clientv3.WithPrefix()),
		} {
			lgtest.RefusedWritingNothing(t, c.Client(), "/", coordinator.InvalidInput, func() error {
				_, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(op))
				return err
			})
		}
		if err := c.Current(ctx, victim); err != nil {
			t.Fatalf("victim after the refused commits: %v", err)
		}
	})

	t.Run("an intent for another tenant's task of the same name is scope_mismatch", func(t *testing.T) {
		g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "tenant-a", "shared-name")
		lgtest.Claim(t, lgtest.Session(t, c, "other", 10*time.Second), "tenant-b", "shared-name")
		in := fencedtxn.Intent{Tenant: "tenant-b", Task: "shared-name", Operation: "op"}
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.ScopeMismatch, func() error {
			_, err := fencedtxn.Commit(ctx, c, g, in)
			return err
		})
	})
}
