package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestKeyInjectivity(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	s := lgtest.Session(t, c, "owner", 10*time.Second)
	k := c.Keys()
	pairs := [][2]string{{"a/b", "c"}, {"a", "b/c"}, {"a%2Fb", "c"}, {"a", "b%2Fc"}, {"a%", "2Fb/c"}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		for _, key := range []string{k.Owner(p[0], p[1]), k.Fence(p[0], p[1]), k.State(p[0], p[1])} {
			if prev, dup := seen[key]; dup {
				t.Fatalf("%v and %v share key %s", prev, p, key)
			}
			seen[key] = p
			_, tenant, task, ok := k.ParseTask(key)
			if !ok || tenant != p[0] || task != p[1] {
				t.Fatalf("ParseTask(%s) = %q %q %v; want %v", key, tenant, task, ok, p)
			}
		}
		// Every pair is its own task: each claim is granted.
		lgtest.Claim(t, s, p[0], p[1])
	}
	if k.Op("a/b", "c", "d") == k.Op("a", "b/c", "d") || k.Op("a", "b", "c/d") == k.Op("a", "b/c", "d") {
		t.Fatal("operation keys collide")
	}
	list, err := c.List(lgtest.Ctx(t), "")
	if err != nil || len(list) != len(pairs) {
		t.Fatalf("List: %d tasks, %v; want %d", len(list), err, len(pairs))
	}
	only, err := c.List(lgtest.Ctx(t), "a")
	if err != nil || len(only) != 2 {
		t.Fatalf("List(a): %+v, %v; want the 2 tasks of tenant a", only, err)
	}
}

func TestClaimBusyReportsHolder(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	a := lgtest.Session(t, c, "worker-a", 10*time.Second)
	b := lgtest.Session(t, c, "worker-b", 10*time.Second)
	g := lgtest.Claim(t, a, "t", "k")
	_, err := b.Claim(lgtest.Ctx(t), "t", "k")
	lgtest.Want(t, err, coordinator.Busy)
	var e *coordinator.Error
	if !errors.As(err, &e) || e.Holder == nil {
		t.Fatalf("busy error without holder: %v", err)
	}
	if h := e.Holder; h.Owner != "worker-a" || h.Epoch != g.Epoch || h.Lease != g.Lease || h.TTLLeft < 1 || h.TTLLeft > 10 {
		t.Fatalf("holder %+v; want worker-a epoch %d lease %d ttl in 1..10", *h, g.Epoch, g.Lease)
	}
	if !errors.Is(err, coordinator.ErrBusy) {
		t.Fatalf("errors.Is(err, ErrBusy) is false for %v", err)
	}
	// The same session claiming again gets the same grant.
	again := lgtest.Claim(t, a, "t", "k")
	if again != g {
		t.Fatalf("re-claim by the holder: %+v, want %+v", again, g)
	}
}

// lostAnswer lets the next Txn reach etcd and apply, then loses its
// answer, as a cut connection would.
func lostAnswer() *lgtest.TxnAnswers {
	return &lgtest.TxnAnswers{Once: true, Err: status.Error(codes.Unavailable, "transport is closing (answer dropped by the test)")}
}

func TestClaimRetriedAfterLostResponse(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	d := lostAnswer()
	cli := lgtest.ClientWith(t, cl, d)
	ctx := lgtest.Ctx(t)
	c := lgtest.CoordinatorOf(t, cli)
	s := lgtest.Session(t, c, "worker", 10*time.Second)

	d.Arm()
	_, err := s.Claim(ctx, "t", "k")
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
	own, err := c.Owner(ctx, "t", "k")
	if err != nil || own.Owner != "worker" {
		t.Fatalf("the lost claim did not apply: %+v %v", own, err)
	}
	g := lgtest.Claim(t, s, "t", "k")
	if g.Epoch != own.Epoch || g.Lease != s.Lease() {
		t.Fatalf("retried claim: %+v; want epoch %d on lease %d", g, own.Epoch, s.Lease())
	}
	// A commit whose answer is lost is outcome_unknown too, and retrying the
	// same intent learns that it applied.
	in := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v")}
	d.Arm()
	_, err = fencedtxn.Commit(ctx, c, g, in)
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
	r, err := fencedtxn.Commit(ctx, c, g, in)
	if err != nil || r.Disposition != coordinator.HistoricalRetry || r.CommittedVersion != 1 {
		t.Fatalf("retry after lost answer: %+v %v", r, err)
	}
}

func TestClientWithoutDialOptionsNeverGuessesUnavailable(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	// A client built by hand, without coordinator.DialOptions().
	cli, err := clientv3.New(clientv3.Config{Endpoints: cl.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx := lgtest.Ctx(t)
	c, err := coordinator.New(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	cl.Member(0).Stop(t)
	lgtest.WaitDisconnected(t, cli)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = s.Claim(short, "t", "k")
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
	// A read is never outcome_unknown.
	short2, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	_, err = c.Owner(short2, "t", "k")
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
}

func TestAcquireWakesOnReleaseAndExpiry(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)

	// waiter is a session whose coordinator's log shows when Acquire found
	// the task busy and started watching (an entry with disposition busy),
	// so the test releases only then.
	waiter := func(t *testing.T) (*coordinator.Session, *lgtest.Logs) {
		lg, logs := lgtest.Observed()
		wc := lgtest.Coordinator(t, cl, coordinator.WithLogger(lg))
		return lgtest.Session(t, wc, "waiter", 10*time.Second), logs
	}
	acquire := func(s *coordinator.Session, task string) (<-chan coordinator.Grant, <-chan error) {
		got, errc := make(chan coordinator.Grant, 1), make(chan error, 1)
		go func() {
			g, err := s.Acquire(ctx, "t", task)
			got <- g
			errc <- err
		}()
		return got, errc
	}

	t.Run("release", func(t *testing.T) {
		holder := lgtest.Session(t, c, "holder", 10*time.Second)
		g := lgtest.Claim(t, holder, "t", "release")
		w, logs := waiter(t)
		got, errc := acquire(w, "release")
		logs.WaitFor(t, "Acquire to start waiting", lgtest.Field("disposition", string(coordinator.Busy)))
		if err := c.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if wg := <-got; wg.Owner != "waiter" || wg.Epoch <= g.Epoch {
			t.Fatalf("acquired %+v after release of %+v", wg, g)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		holder := lgtest.Session(t, c, "holder", 2*time.Second, coordinator.WithoutKeepAlive())
		g := lgtest.Claim(t, holder, "t", "expiry")
		w, logs := waiter(t)
		got, errc := acquire(w, "expiry")
		logs.WaitFor(t, "Acquire to start waiting", lgtest.Field("disposition", string(coordinator.Busy)))
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		wg := <-got
		if wg.Owner != "waiter" || wg.Epoch <= g.Epoch {
			t.Fatalf("acquired %+v after expiry of %+v", wg, g)
		}
		own, err := c.Owner(ctx, "t", "expiry")
		if err != nil || own.Epoch != wg.Epoch {
			t.Fatalf("owner after acquire: %+v %v", own, err)
		}
	})
	t.Run("gives up with ctx, busy", func(t *testing.T) {
		holder := lgtest.Session(t, c, "holder", 10*time.Second)
		lgtest.Claim(t, holder, "t", "held")
		waiter, _ := waiter(t)
		// The caller gives up while Acquire waits: the answer is the last
		// thing etcd said (busy), with the caller's reason as its cause.
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := waiter.Acquire(short, "t", "held")
		lgtest.Want(t, err, coordinator.Busy)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire that gave up: %v; want the deadline as its cause", err)
		}
	})
}

func TestStaleReleaseLeavesNewOwner(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	old := lgtest.Claim(t, lgtest.Session(t, c, "worker", time.Second, coordinator.WithoutKeepAlive()), "t", "k")
	lgtest.WaitOwnerGone(t, c, "t", "k")
	// The same owner label, a new session: the bug of etcd issue 22082 is a
	// release by owner name alone deleting this newer grant.
	cur := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "k")
	lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.StaleOwner, func() error { return c.Release(ctx, old) })
	own, err := c.Owner(ctx, "t", "k")
	if err != nil || own.Epoch != cur.Epoch || own.Owner != "worker" {
		t.Fatalf("owner after stale release: %+v %v", own, err)
	}
	lgtest.Want(t, c.Renew(ctx, old), coordinator.StaleOwner)
	// The current grant releases; its epoch stays the fence.
	if err := c.Release(ctx, cur); err != nil {
		t.Fatal(err)
	}
	own, err = c.Owner(ctx, "t", "k")
	if err != nil || own.Owned() || own.Fence != cur.Epoch {
		t.Fatalf("after release: %+v %v; want unowned, fence %d", own, err, cur.Epoch)
	}
	_, err = fencedtxn.Commit(ctx, c, cur, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op"})
	lgtest.Want(t, err, coordinator.ExpiredOwner)
	lgtest.Want(t, c.Release(ctx, cur), coordinator.ExpiredOwner)
}

func TestRealmRotateRefusesEveryGrant(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	other := lgtest.Coordinator(t, cl) // another process on the same keyspace
	ctx := lgtest.Ctx(t)
	if other.Realm() != c.Realm() {
		t.Fatalf("second coordinator created a new realm: %s vs %s", other.Realm(), c.Realm())
	}
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g1 := lgtest.Claim(t, s, "t", "one")
	g2 := lgtest.Claim(t, s, "t", "two")
	old := c.Realm()
	fresh, err := other.RotateRealm(ctx)
	if err != nil || fresh == old {
		t.Fatalf("rotate: %q %v", fresh, err)
	}
	for _, g := range []coordinator.Grant{g1, g2} {
		_, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: g.Tenant, Task: g.Task, Operation: "op"})
		lgtest.Want(t, err, coordinator.GenerationMismatch)
		lgtest.Want(t, c.Renew(ctx, g), coordinator.GenerationMismatch)
		lgtest.Want(t, c.Release(ctx, g), coordinator.GenerationMismatch)
	}
	// Owner keys written under the old realm hold nothing: the same
	// session re-claiming gets a new grant (not its old epoch back), and
	// another session can take a task an old-realm key sits on.
	g := lgtest.Claim(t, s, "t", "one")
	if g.Realm != fresh || c.Realm() != fresh || g.Epoch <= g1.Epoch {
		t.Fatalf("claim after rotation: %+v (coordinator realm %s); want realm %s, epoch above %d", g, c.Realm(), fresh, g1.Epoch)
	}
	taker := lgtest.Claim(t, lgtest.Session(t, other, "taker", 10*time.Second), "t", "two")
	if taker.Realm != fresh || taker.Epoch <= g2.Epoch {
		t.Fatalf("claim of a task held under the old realm: %+v", taker)
	}
	for _, cur := range []coordinator.Grant{g, taker} {
		if _, err := fencedtxn.Commit(ctx, c, cur, fencedtxn.Intent{Tenant: "t", Task: cur.Task, Operation: "op"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, stale := range []coordinator.Grant{g1, g2} {
		_, err := fencedtxn.Commit(ctx, c, stale, fencedtxn.Intent{Tenant: "t", Task: stale.Task, Operation: "op2", ExpectedVersion: 1})
		lgtest.Want(t, err, coordinator.GenerationMismatch)
	}
	// The re-claimed session's keepalive still runs: a renewal of the new
	// grant succeeds, one of the old is still refused.
	if err := c.Renew(ctx, g); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "k")

	lgtest.WritesNothing(t, c.Client(), "", "bad input was refused", func() { badInput(t, c, s, g) })
}

// badInput makes the calls of TestBadInputWritesNothing, each refused as
// invalid_input.
func badInput(t *testing.T, c *coordinator.Coordinator, s *coordinator.Session, g coordinator.Grant) {
	ctx := lgtest.Ctx(t)
	bad := map[string]string{
		"empty":       "",
		"81 chars":    strings.Repeat("x", 81),
		"space":       "a b",
		"control":     "a\tb",
		"newline":     "a\n",
		"DEL":         "a\x7f",
		"non-ASCII":   "tâche",
		"NUL":         "a\x00b",
		"high byte":   "a\xffb",
		"only spaces": "   ",
	}
	for name, label := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := c.NewSession(ctx, label, 10*time.Second)
			lgtest.Want(t, err, coordinator.InvalidInput)
			_, err = s.Claim(ctx, label, "k")
			lgtest.Want(t, err, coordinator.InvalidInput)
			_, err = s.Claim(ctx, "t", label)
			lgtest.Want(t, err, coordinator.InvalidInput)
			_, err = c.Owner(ctx, "t", label)
			lgtest.Want(t, err, coordinator.InvalidInput)
			if label != "" { // "" lists every tenant
				_, err = c.List(ctx, label)
				lgtest.Want(t, err, coordinator.InvalidInput)
				_, err = c.Watch(ctx, label)
				lgtest.Want(t, err, coordinator.InvalidInput)
			}
			badGrant := g
			badGrant.Owner = label
			lgtest.Want(t, c.Renew(ctx, badGrant), coordinator.InvalidInput)
			lgtest.Want(t, c.Release(ctx, badGrant), coordinator.InvalidInput)
			_, err = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: label})
			lgtest.Want(t, err, coordinator.InvalidInput)
		})
	}
	t.Run("ttl", func(t *testing.T) {
		for _, ttl := range []time.Duration{-time.Second, 0, 1500 * time.Millisecond, time.Millisecond} {
			_, err := c.NewSession(ctx, "worker", ttl)
			lgtest.Want(t, err, coordinator.InvalidInput)
		}
		_, err := c.NewSession(ctx, "worker", 2*time.Second, coordinator.WithMargin(3*time.Second))
		lgtest.Want(t, err, coordinator.InvalidInput)
		_, err = c.NewSession(ctx, "worker", 2*time.Second, coordinator.WithMargin(-time.Second))
		lgtest.Want(t, err, coordinator.InvalidInput)
	})
	t.Run("grant fields", func(t *testing.T) {
		for name, mut := range map[string]func(*coordinator.Grant){
			"no realm":       func(g *coordinator.Grant) { g.Realm = "" },
			"zero epoch":     func(g *coordinator.Grant) { g.Epoch = 0 },
			"negative epoch": func(g *coordinator.Grant) { g.Epoch = -1 },
			"negative lease": func(g *coordinator.Grant) { g.Lease = -5 },
		} {
			bg := g
			mut(&bg)
			lgtest.Want(t, c.Renew(ctx, bg), coordinator.InvalidInput)
			_, err := fencedtxn.Commit(ctx, c, bg, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op"})
			if coordinator.DispositionOf(err) != coordinator.InvalidInput {
				t.Fatalf("%s: %v", name, err)
			}
		}
	})
	t.Run("intent", func(t *testing.T) {
		for name, in := range map[string]fencedtxn.Intent{
			"negative version": {Tenant: "t", Task: "k", Operation: "op", ExpectedVersion: -1},
			"oversized value":  {Tenant: "t", Task: "k", Operation: "op", Value: []byte(strings.Repeat("v", fencedtxn.DefaultMaxValueBytes+1))},
		} {
			_, err := fencedtxn.Commit(ctx, c, g, in)
			if coordinator.DispositionOf(err) != coordinator.InvalidInput {
				t.Fatalf("%s: %v", name, err)
			}
		}
		_, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("0123456789")}, fencedtxn.WithMaxValueBytes(8))
		lgtest.Want(t, err, coordinator.InvalidInput)
		_, err = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op"}, fencedtxn.WithMaxValueBytes(0))
		lgtest.Want(t, err, coordinator.InvalidInput)
		_, err = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op"},
			fencedtxn.WithOps(clientv3.OpPut(c.Keys().State("t", "k"), "smuggled")))
		lgtest.Want(t, err, coordinator.InvalidInput)
		_, err = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op"},
			fencedtxn.WithOps(clientv3.OpDelete("/", clientv3.WithPrefix())))
		lgtest.Want(t, err, coordinator.InvalidInput)
	})
	t.Run("options", func(t *testing.T) {
		for _, p := range []string{"", "leasegate", "/trailing/", "/", "/with space"} {
			_, err := coordinator.New(ctx, c.Client(), coordinator.WithPrefix(p))
			lgtest.Want(t, err, coordinator.InvalidInput)
		}
		_, err := coordinator.New(ctx, nil)
		lgtest.Want(t, err, coordinator.InvalidInput)
	})
}

func TestTTLBelowClusterMinimumIsRefused(t *testing.T) {
	t.Parallel()
	// 150 ms heartbeats, 1.5 s elections: etcd's minimum TTL is 3 s.
	cl := embedtest.NewCluster(t, embedtest.WithTiming(150*time.Millisecond, 1500*time.Millisecond))
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	_, err := c.NewSession(ctx, "worker", time.Second)
	lgtest.Want(t, err, coordinator.InvalidInput)
	if !strings.Contains(err.Error(), "3s") {
		t.Fatalf("error does not name the TTL in force: %v", err)
	}
	leases, err := c.Client().Leases(ctx)
	if err != nil || len(leases.Leases) != 0 {
		t.Fatalf("the raised lease was not revoked: %+v %v", leases, err)
	}
	s := lgtest.Session(t, c, "worker", 3*time.Second)
	if s.TTL() != 3*time.Second {
		t.Fatalf("TTL %v", s.TTL())
	}
}

// TestClaimDoesNotTakeAnotherLabelsKeyOnItsLease: an owner key on the
// session's lease that carries another owner label (written behind
// leasegate's back) is not this session's earlier claim: the claim is busy,
// not granted.
func TestClaimDoesNotTakeAnotherLabelsKeyOnItsLease(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	if _, err := c.Client().Put(ctx, c.Keys().Owner("t", "foreign"), "someone-else", clientv3.WithLease(clientv3.LeaseID(s.Lease()))); err != nil {
		t.Fatal(err)
	}
	g, err := s.Claim(ctx, "t", "foreign")
	lgtest.Want(t, err, coordinator.Busy)
	if g != (coordinator.Grant{}) {
		t.Fatalf("busy claim returned grant %+v", g)
	}
}

// TestAcquireSeesDeletionInItsWindows deletes the owner key inside each
// window of Acquire's wait, where its watch (from etcd's current revision,
// so that events come at once) cannot see the deletion: after the busy
// answer and before the watch exists, and after the watch exists and before
// the key is read again (with a write in between, so that the watch does not
// cover the busy answer's revision). The waiter must still be granted: a
// waiter that trusted its watch alone would wait until ctx's end.
func TestAcquireSeesDeletionInItsWindows(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	for _, step := range []string{"busy", "watching"} {
		t.Run(step, func(t *testing.T) {
			ctx := lgtest.Ctx(t)
			task := "window-" + step
			holder := lgtest.Session(t, c, "holder", 10*time.Second)
			old := lgtest.Claim(t, holder, "t", task)
			waiter := lgtest.Session(t, c, "waiter", 10*time.Second)
			var once sync.Once
			remove := coordinator.SetAcquireHook(c.Keys().Owner("t", task), func(at string) {
				if at == "busy" && step == "watching" {
					// Move etcd's revision past the busy answer's.
					if _, err := c.Client().Put(ctx, c.Keys().Prefix()+"/unrelated", "x"); err != nil {
						t.Error(err)
					}
				}
				if at == step {
					once.Do(func() {
						if err := c.RevokeLease(ctx, holder.Lease()); err != nil {
							t.Error(err)
						}
					})
				}
			})
			defer remove()
			g, err := waiter.Acquire(ctx, "t", task)
			if err != nil {
				t.Fatalf("Acquire with the owner key deleted %s: %v", step, err)
			}
			if g.Owner != "waiter" || g.Epoch <= old.Epoch {
				t.Fatalf("acquired %+v after %+v", g, old)
			}
		})
	}
}

// TestAcquireClaimsAgainWhenTheKeyChangedInItsWindow: the owner key is
// deleted and claimed again before Acquire's watch exists, so it exists when
// Acquire reads it again, but it is another key than the one found busy.
// Claimed by this same session, Acquire returns that grant at once; claimed
// by another, Acquire finds it busy again (its holder named) and waits for
// it, and is granted only once it is released. A waiter that looked only
// at the key's existence would wait on it for good in the first case and
// not learn the new holder in the second.
func TestAcquireClaimsAgainWhenTheKeyChangedInItsWindow(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)

	t.Run("by this session", func(t *testing.T) {
		ctx := lgtest.Ctx(t)
		holder := lgtest.Session(t, c, "holder", 10*time.Second)
		lgtest.Claim(t, holder, "t", "mine")
		waiter := lgtest.Session(t, c, "waiter", 10*time.Second)
		var once sync.Once
		var mine coordinator.Grant
		remove := coordinator.SetAcquireHook(c.Keys().Owner("t", "mine"), func(at string) {
			once.Do(func() {
				if err := c.RevokeLease(ctx, holder.Lease()); err != nil {
					t.Error(err)
				}
				var err error
				if mine, err = waiter.Claim(ctx, "t", "mine"); err != nil {
					t.Error(err)
				}
			})
		})
		defer remove()
		g, err := waiter.Acquire(ctx, "t", "mine")
		if err != nil || g != mine {
			t.Fatalf("Acquire = %+v, %v; want the grant claimed in its window, %+v", g, err, mine)
		}
	})

	t.Run("by another", func(t *testing.T) {
		ctx := lgtest.Ctx(t)
		holder := lgtest.Session(t, c, "holder", 10*time.Second)
		lgtest.Claim(t, holder, "t", "theirs")
		third := lgtest.Session(t, c, "third", 10*time.Second)
		waiter := lgtest.Session(t, c, "waiter", 10*time.Second)
		var theirs coordinator.Grant
		busy := 0
		again := make(chan struct{})
		remove := coordinator.SetAcquireHook(c.Keys().Owner("t", "theirs"), func(at string) {
			if at != "busy" {
				return
			}
			busy++ // Acquire's own goroutine: no lock needed
			switch busy {
			case 1:
				if err := c.RevokeLease(ctx, holder.Lease()); err != nil {
					t.Error(err)
				}
				var err error
				if theirs, err = third.Claim(ctx, "t", "theirs"); err != nil {
					t.Error(err)
				}
			case 2:
				close(again)
			}
		})
		defer remove()
		type result struct {
			g   coordinator.Grant
			err error
		}
		out := make(chan result, 1)
		go func() {
			g, err := waiter.Acquire(ctx, "t", "theirs")
			out <- result{g, err}
		}()
		lgtest.Wait(t, again, "Acquire to claim again and find the new holder")
		select {
		case r := <-out:
			t.Fatalf("Acquire returned %+v, %v while %+v holds the task", r.g, r.err, theirs)
		default:
		}
		if err := c.Release(ctx, theirs); err != nil {
			t.Fatal(err)
		}
		r := <-out
		if r.err != nil || r.g.Owner != "waiter" || r.g.Epoch <= theirs.Epoch {
			t.Fatalf("Acquire = %+v, %v after the release of %+v", r.g, r.err, theirs)
		}
	})
}

// TestClaimOverStaleOwnerKeyHoldsTheTask: after a rotation an owner key of
// the old realm holds nothing and a claim replaces it; the key is then
// overwritten, not created, so it keeps its old create revision. The claim
// that replaced it holds the task all the same (the compare is on the
// key's last write, not its creation), and Session.Grants reports the
// replacing claim's epoch (its last write), not the stale key's.
func TestClaimOverStaleOwnerKeyHoldsTheTask(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.Coordinator(t, cl)
	old := lgtest.Session(t, c, "old", 10*time.Second)
	stale := lgtest.Claim(t, old, "t", "x")

	if _, err := c.RotateRealm(ctx); err != nil {
		t.Fatal(err)
	}
	s := lgtest.Session(t, c, "new", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "x") // replaces the old realm's key
	if g.Epoch <= stale.Epoch {
		t.Fatalf("claim over the stale key: epoch %d, stale %d", g.Epoch, stale.Epoch)
	}

	// The replacing claim holds the task: a third claim is busy.
	third := lgtest.Session(t, c, "third", 10*time.Second)
	_, err := third.Claim(ctx, "t", "x")
	lgtest.Want(t, err, coordinator.Busy)
	if own, err := c.Owner(ctx, "t", "x"); err != nil || own.Epoch != g.Epoch {
		t.Fatalf("owner after the third claim: %+v %v; want epoch %d", own, err, g.Epoch)
	}

	// Grants reads the replacing claim's epoch back.
	grants, err := s.Grants(ctx)
	if err != nil || len(grants) != 1 || grants[0] != g {
		t.Fatalf("Grants: %+v %v; want [%+v]", grants, err, g)
	}
}

// TestRealmKeyChangedBehindTheCoordinator pins the claim's and the guard's
// handling of a realm key changed out of band.
// Each subtest has its own prefix.
func TestRealmKeyChangedBehindTheCoordinator(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	ctx := lgtest.Ctx(t)

	t.Run("keyspace wiped: a claim and a held grant are generation mismatches, nothing written", func(t *testing.T) {
		c := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/wiped"))
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		g := lgtest.Claim(t, s, "t", "held")
		if _, err := c.Client().Delete(ctx, c.Keys().Realm()); err != nil {
			t.Fatal(err)
		}
		lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.GenerationMismatch, func() error {
			_, err := s.Claim(ctx, "t", "new")
			return err
		})
		lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.GenerationMismatch, func() error { return c.Release(ctx, g) })
	})

	t.Run("realm rewritten with its own value: a claim adopts its revision", func(t *testing.T) {
		c := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/rewritten"))
		s := lgtest.Session(t, c, "worker", 10*time.Second)
		if _, err := c.Client().Put(ctx, c.Keys().Realm(), c.Realm()); err != nil {
			t.Fatal(err)
		}
		g := lgtest.Claim(t, s, "t", "k")
		if g.Realm != c.Realm() {
			t.Fatalf("grant realm %s; want %s", g.Realm, c.Realm())
		}
		if err := c.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
	})
}

// TestClaimRetriedAfterOtherWrites: a claim retried after its answer was
// lost returns the epoch the lost claim was granted, even when other writes
// moved etcd's revision in between (without them, the retry's own revision
// equals that epoch, which hid a retry that returned the wrong one).
func TestClaimRetriedAfterOtherWrites(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	d := lostAnswer()
	c := lgtest.CoordinatorOf(t, lgtest.ClientWith(t, cl, d))
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	d.Arm()
	_, err := s.Claim(ctx, "t", "k")
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
	own, err := c.Owner(ctx, "t", "k")
	if err != nil || own.Owner != "worker" {
		t.Fatalf("the lost claim did not apply: %+v %v", own, err)
	}
	lgtest.Claim(t, lgtest.Session(t, c, "other", 10*time.Second), "t", "other-task")
	g := lgtest.Claim(t, s, "t", "k")
	if g.Epoch != own.Epoch {
		t.Fatalf("retried claim: epoch %d; want the lost claim's %d", g.Epoch, own.Epoch)
	}
	if _, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op"}); err != nil {
		t.Fatalf("commit under the retried grant: %v", err)
	}
}
