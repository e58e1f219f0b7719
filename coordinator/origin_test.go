package coordinator_test

import (
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

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
