package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestRestore restores one etcd snapshot through etcd's own code three
// ways. A plain restore brings back a grant that had been fenced out and
// hands out epochs again that were already issued; a revision bump alone
// stops the reuse but not the old grant; bump plus realm rotate refuses
// every grant issued before the restore. realm show's check (CheckOrigin)
// warns after each restore until the rotation.
func TestRestore(t *testing.T) {
	t.Parallel()
	a := embedtest.NewCluster(t)
	ca := lgtest.Coordinator(t, a)
	ctx := lgtest.Ctx(t)
	history(t, ca, 2*store.RestoreSlack) // a keyspace with some history before the snapshot
	commit := func(c *coordinator.Coordinator, g coordinator.Grant, op string, v int64) error {
		_, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: op, Value: []byte(op), ExpectedVersion: v})
		return err
	}

	s1 := lgtest.Session(t, ca, "w1", 60*time.Second)
	g1 := lgtest.Claim(t, s1, "t", "k")
	if err := commit(ca, g1, "op-1", 0); err != nil {
		t.Fatal(err)
	}
	if chk, err := ca.CheckOrigin(ctx); err != nil || len(chk.Warnings) != 0 || chk.Origin == nil {
		t.Fatalf("check before any restore: %+v %v; want an origin and no warning", chk, err)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := a.SaveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	// After the snapshot: w1 is fenced out by w2, which commits.
	if err := ca.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	s2 := lgtest.Session(t, ca, "w2", 60*time.Second)
	g2 := lgtest.Claim(t, s2, "t", "k")
	if err := commit(ca, g2, "op-2", 1); err != nil {
		t.Fatal(err)
	}
	lgtest.Want(t, commit(ca, g1, "op-3", 1), coordinator.StaleOwner)
	last, err := ca.Client().Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	issued := last.Header.Revision // every epoch handed out so far is at or below it

	restoredCoordinator := func(t *testing.T, ro ...embedtest.Option) *coordinator.Coordinator {
		t.Helper()
		c := lgtest.Coordinator(t, embedtest.NewRestoredCluster(t, snap, ro...))
		if c.Realm() != ca.Realm() {
			t.Fatalf("restored realm %s, want the snapshot's %s", c.Realm(), ca.Realm())
		}
		return c
	}
	wantRestoreWarning := func(t *testing.T, c *coordinator.Coordinator, cluster bool) {
		t.Helper()
		chk, err := c.CheckOrigin(lgtest.Ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		var distance, clusterID bool
		for _, w := range chk.Warnings {
			distance = distance || strings.Contains(w, "past its raft index")
			clusterID = clusterID || strings.Contains(w, "minted on etcd cluster")
		}
		if !distance || clusterID != cluster {
			t.Fatalf("warnings after a restore %q (now %+v, origin %+v); want the raft-index warning, and the cluster-ID one: %v",
				chk.Warnings, chk.Now, chk.Origin, cluster)
		}
	}

	t.Run("plain restore: a fenced-out grant passes again, epochs are reused", func(t *testing.T) {
		c := restoredCoordinator(t)
		wantRestoreWarning(t, c, true)
		if err := commit(c, g1, "op-3", 1); err != nil {
			t.Fatalf("the hazard: w1's grant, fenced out after the snapshot, should pass on the restored keyspace: %v", err)
		}
		lgtest.Want(t, commit(c, g2, "op-4", 1), coordinator.StaleOwner)
		g := lgtest.Claim(t, lgtest.Session(t, c, "w3", 10*time.Second), "t", "other")
		if g.Epoch > issued {
			t.Fatalf("epoch %d after a plain restore; want one at or below %d, already issued", g.Epoch, issued)
		}
	})
	t.Run("bump without mark-compacted is ignored by etcdutl", func(t *testing.T) {
		c := restoredCoordinator(t, embedtest.WithRevisionBump(1_000_000))
		g := lgtest.Claim(t, lgtest.Session(t, c, "w3", 10*time.Second), "t", "other")
		if g.Epoch > issued {
			t.Fatalf("epoch %d: the bump applied after all", g.Epoch)
		}
	})
	t.Run("bump and rotate: every earlier grant refused", func(t *testing.T) {
		c := restoredCoordinator(t, embedtest.WithRevisionBump(1_000_000), embedtest.WithMarkCompacted())
		wantRestoreWarning(t, c, true)
		// The bump alone does not refuse grants from before the snapshot.
		if err := c.Renew(ctx, g1); err != nil {
			t.Fatalf("before rotation the snapshot's grant is current: %v", err)
		}
		if _, err := c.RotateRealm(ctx); err != nil {
			t.Fatal(err)
		}
		for _, g := range []coordinator.Grant{g1, g2} {
			lgtest.Want(t, commit(c, g, "op-5", 1), coordinator.GenerationMismatch)
		}
		g := lgtest.Claim(t, lgtest.Session(t, c, "w3", 10*time.Second), "t", "k")
		if g.Epoch <= issued {
			t.Fatalf("epoch %d after a bumped restore; want above %d", g.Epoch, issued)
		}
		if chk, err := c.CheckOrigin(ctx); err != nil || len(chk.Warnings) != 0 {
			t.Fatalf("check after rotation: %+v %v; want no warning", chk, err)
		}
	})
}

// TestRestoreInPlace restores a single member in place (same cluster ID,
// same client address) under a worker that keeps running: its session's
// lease comes back from the snapshot, its next claim gets an epoch the
// original cluster already issued — the same grant it had released — and
// that released grant passes again. realm show's check still warns.
func TestRestoreInPlace(t *testing.T) {
	t.Parallel()
	a := embedtest.NewCluster(t)
	ca := lgtest.Coordinator(t, a)
	ctx := lgtest.Ctx(t)
	history(t, ca, 2*store.RestoreSlack)
	s := lgtest.Session(t, ca, "w1", 60*time.Second) // its lease is in the snapshot
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := a.SaveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	// After the snapshot: a grant, a commit under it, its release.
	g := lgtest.Claim(t, s, "t", "post")
	if _, err := fencedtxn.Commit(ctx, ca, g, fencedtxn.Intent{Tenant: "t", Task: "post", Operation: "op-1", Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := ca.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := a.Member(0).Kill(); err != nil {
		t.Fatal(err)
	}
	b := embedtest.NewRestoredCluster(t, snap, embedtest.WithRestoreAs(a.Member(0)))
	cb := lgtest.Coordinator(t, b)
	chk, err := cb.CheckOrigin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(chk.Warnings) != 1 || !strings.Contains(chk.Warnings[0], "past its raft index") {
		t.Fatalf("warnings after an in-place restore %q; want the raft-index one only (same cluster ID)", chk.Warnings)
	}
	// The worker's client reconnects to the restored member; its lease is
	// back, and its claim lands on the revision its released grant had.
	again := lgtest.Claim(t, s, "t", "post")
	if again != g {
		t.Fatalf("claim after the restore: %+v; the hazard is the released grant %+v issued again", again, g)
	}
	if _, err := fencedtxn.Commit(ctx, cb, g, fencedtxn.Intent{Tenant: "t", Task: "post", Operation: "op-2", Value: []byte("2")}); err != nil {
		t.Fatalf("the released grant should pass again after a plain restore: %v", err)
	}
}

// history writes n revisions under /history, a few at a time.
func history(t *testing.T, c *coordinator.Coordinator, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := c.Client().Put(context.Background(), fmt.Sprintf("/history/%d", i), "x"); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// distance is an origin reading's revision − raft index.
func distance(o coordinator.Origin) int64 { return o.Revision - int64(o.RaftIndex) }

// TestOriginReadingTakesTheMemberThatCountsAgainstAWarning: of the members
// that answer, checking an origin reads the one with the smallest revision
// − raft index and recording one the one with the largest, so that a member
// behind the others (whose distance is larger: it has not applied the
// entries that write no key) neither makes a realm look restored nor lowers
// a recorded origin.
func TestOriginReadingTakesTheMemberThatCountsAgainstAWarning(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	lead := cl.WaitLeader(t)
	behind := (lead + 1) % cl.Size()
	cl.Partition(behind)
	// Raft entries that write no key (lease grants): each lowers revision −
	// raft index by one on the members that apply it, not on the one cut off.
	lc := lgtest.MemberClient(t, cl, lead)
	for range 10 {
		if _, err := lc.Grant(ctx, 60); err != nil {
			t.Fatal(err)
		}
	}
	reading := func(i int) coordinator.Origin {
		t.Helper()
		st, err := lc.Status(ctx, cl.Member(i).ClientURL())
		if err != nil {
			t.Fatalf("status of member %d: %v", i, err)
		}
		return coordinator.Origin{Revision: st.Header.Revision, RaftIndex: st.RaftAppliedIndex}
	}
	least, most := distance(reading(lead)), distance(reading(behind))
	if least >= most {
		t.Fatalf("the leader's distance %d, the cut-off member's %d: want the leader's smaller", least, most)
	}

	checking, err := c.ClusterStatus(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	recording, err := c.ClusterStatus(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if distance(checking) != least || distance(recording) != most {
		t.Fatalf("distance read for checking %d, for recording %d; want the smallest (%d, the leader's) and the largest (%d, the member cut off)",
			distance(checking), distance(recording), least, most)
	}
}

// TestOriginIsRecordedOnlyForTheRealmWriteItDescribes: New records the
// origin of the realm it created only while the realm key is still that
// write (ModRevision(realm) == the create's revision). A realm key written
// since — even with the same value, as a copy of the keyspace from another
// cluster writes it — gets no origin from that late recording, and
// CheckOrigin says none is recorded.
func TestOriginIsRecordedOnlyForTheRealmWriteItDescribes(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	cli, keys := c.Client(), c.Keys()
	got, err := cli.Get(ctx, keys.Realm())
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("realm key: %v %v", got, err)
	}
	realm, created := string(got.Kvs[0].Value), got.Kvs[0].ModRevision
	originRealm := func() string {
		t.Helper()
		resp, err := cli.Get(ctx, keys.Origin())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return ""
		}
		var o coordinator.Origin
		if err := json.Unmarshal(resp.Kvs[0].Value, &o); err != nil {
			t.Fatal(err)
		}
		return o.Realm
	}
	dropOrigin := func() {
		t.Helper()
		if _, err := cli.Delete(ctx, keys.Origin()); err != nil {
			t.Fatal(err)
		}
	}

	// The realm key untouched: the recording writes the origin.
	dropOrigin()
	c.RecordOrigin(ctx, realm, created)
	if r := originRealm(); r != realm {
		t.Fatalf("origin of realm %q recorded over the untouched realm key; want %q", r, realm)
	}

	// The realm key rewritten with the same value: nothing is recorded.
	dropOrigin()
	if _, err := cli.Put(ctx, keys.Realm(), realm); err != nil {
		t.Fatal(err)
	}
	c.RecordOrigin(ctx, realm, created)
	if r := originRealm(); r != "" {
		t.Fatalf("origin of realm %q recorded over a realm key written after the create (revision %d)", r, created)
	}
	chk, err := c.CheckOrigin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.Origin != nil || len(chk.Warnings) != 1 || !strings.Contains(chk.Warnings[0], "no origin is recorded") {
		t.Fatalf("check: origin %+v, warnings %q; want none recorded, said so", chk.Origin, chk.Warnings)
	}
}

// TestRotationWhoseStatusReadsFailDropsTheOldOrigin: a rotation rotates
// even when no member answers its status read, and then deletes the old
// realm's origin with it: realm show says no origin is recorded (rotate
// again to record one), never the old realm's origin as this realm's.
func TestRotationWhoseStatusReadsFailDropsTheOldOrigin(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	checker := lgtest.Coordinator(t, cl) // creates the realm and records its origin
	ctx := lgtest.Ctx(t)
	old := checker.Realm()
	if chk, err := checker.CheckOrigin(ctx); err != nil || chk.Origin == nil || chk.Origin.Realm != old {
		t.Fatalf("check before the rotation: %+v %v; want the realm's origin", chk, err)
	}

	// A client whose one endpoint is a proxy: its connection, open, reaches
	// the member; every connection opened after the retarget (the status
	// read's own) reaches a closed port.
	u, err := url.Parse(cl.Member(0).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	p, err := embedtest.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.URL()}, DialTimeout: 5 * time.Second,
		DialOptions: coordinator.DialOptions(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c := lgtest.CoordinatorOf(t, cli) // its realm read opened the connection
	p.Retarget(closedPort(t))

	fresh, err := c.RotateRealm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chk, err := checker.CheckOrigin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.Realm != fresh || chk.Origin != nil || len(chk.Warnings) != 1 || !strings.Contains(chk.Warnings[0], "no origin is recorded") {
		t.Fatalf("check after the rotation to %s: realm %s, origin %+v, warnings %q; want no origin recorded, said so", fresh, chk.Realm, chk.Origin, chk.Warnings)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestEndpointsOfTwoClustersAreRefused: a client whose endpoints answer for
// two etcd clusters cannot tell a restore from a mix-up: the origin check
// is authority_unavailable, not a verdict.
func TestEndpointsOfTwoClustersAreRefused(t *testing.T) {
	t.Parallel()
	a, b := embedtest.NewCluster(t), embedtest.NewCluster(t)
	lgtest.Coordinator(t, a) // a keyspace on each: the realm read may go to either
	lgtest.Coordinator(t, b)
	ctx := lgtest.Ctx(t)
	mixed, err := clientv3.New(clientv3.Config{Endpoints: append(a.Endpoints(), b.Endpoints()...),
		DialTimeout: 5 * time.Second, DialOptions: coordinator.DialOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mixed.Close() })
	cm := lgtest.CoordinatorOf(t, mixed)
	_, err = cm.CheckOrigin(ctx)
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
}
