package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestWatchAcrossLeaderStopsAndQuorumLoss: a watch that lives through a
// leader killed, a leader halted and a quorum loss long enough that a
// listing fails reports every change of etcd's history once, at its own
// revision, in order: no event replayed from before one already reported,
// none lost, epochs never going back for a task.
func TestWatchAcrossLeaderStopsAndQuorumLoss(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	cl.WaitLeader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := lgtest.Coordinator(t, cl) // the writer: every member
	pre := lgtest.Claim(t, lgtest.Session(t, c, "pre", time.Minute), "t", "pre")

	// The watcher talks to member 0 alone; from the quorum loss on, its
	// listings fail (their answers are lost), while its watch still works
	// once a leader is back: a watch that resumed from a revision before
	// the last one it delivered would report that history again.
	cuts, dropped := make(chan string, 64), make(chan string, 64)
	lg := zap.New(&msgCore{chans: map[string]chan string{"ownership watch cut": cuts, "ownership watch: dropped": dropped}})
	lost := &lgtest.TxnAnswers{Err: status.Error(codes.Unavailable, "answer lost (test)")}
	wcli := memberClientWith(t, cl, 0, lost)
	w := lgtest.CoordinatorOf(t, wcli, coordinator.WithLogger(lg), coordinator.WithRequestTimeout(time.Second))
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	events, err := w.Watch(wctx, "")
	if err != nil {
		t.Fatal(err)
	}
	first := nextEvent(t, events)
	if first.Type != coordinator.EventOwned || first.Ownership.Task != "pre" || first.Ownership.Epoch != pre.Epoch {
		t.Fatalf("first event %s %+v; want pre owned at %d", first.Type, first.Ownership, pre.Epoch)
	}
	listed := first.Ownership.Revision
	got := []coordinator.OwnershipEvent{first}
	relay := make(chan coordinator.OwnershipEvent, 10000) // the watcher never waits on the test
	go func() {
		defer close(relay)
		for ev := range events {
			relay <- ev
		}
	}()
	// reported waits until the watch reported an event of type typ for
	// task at epoch.
	reported := func(typ coordinator.EventType, task string, epoch int64) {
		t.Helper()
		for {
			select {
			case ev, ok := <-relay:
				if !ok {
					t.Fatal("watch closed")
				}
				got = append(got, ev)
				if ev.Type == typ && ev.Ownership.Task == task && ev.Ownership.Epoch == epoch {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %s event of %s at epoch %d", typ, task, epoch)
			}
		}
	}

	cycles := func(phase string, n int) (last coordinator.Grant) {
		t.Helper()
		s, err := c.NewSession(ctx, "worker-"+phase, time.Minute)
		for err != nil { // the cluster may be electing
			s, err = c.NewSession(ctx, "worker-"+phase, time.Minute)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		for i := range n {
			for _, task := range []string{"a", "b", "c"} {
				g, err := s.Claim(ctx, "t", task)
				for err != nil {
					if ctx.Err() != nil {
						t.Fatalf("%s: claim %s: %v", phase, task, err)
					}
					g, err = s.Claim(ctx, "t", task) // the same grant if it applied
				}
				for err := c.Release(ctx, g); err != nil && coordinator.DispositionOf(err) != coordinator.ExpiredOwner; err = c.Release(ctx, g) {
					if ctx.Err() != nil {
						t.Fatalf("%s: release %s (cycle %d): %v", phase, task, i, err)
					}
				}
				last = g
			}
		}
		return last
	}
	cycles("before", 2)

	leader := cl.WaitLeader(t)
	if err := cl.Member(leader).Kill(); err != nil {
		t.Fatal(err)
	}
	cycles("leader-killed", 1)
	cl.Member(leader).Restart(t)
	cl.WaitLeader(t)

	leader = cl.WaitLeader(t)
	if err := cl.Member(leader).Halt(); err != nil {
		t.Fatal(err)
	}
	cycles("leader-halted", 1)
	cl.Member(leader).Restart(t)
	cl.WaitLeader(t)
	// Everything so far reported: what follows must not come again.
	g := cycles("between", 1)
	reported(coordinator.EventVacated, g.Task, g.Epoch)

	// Quorum loss: member 0, the watcher's, alone. Wait until etcd cut the
	// watch for the lost leader.
	for len(cuts) > 0 {
		<-cuts
	}
	lost.Arm()
	cl.Member(1).Stop(t)
	cl.Member(2).Stop(t)
	lgtest.Wait(t, cuts, "the watch cut by the quorum loss")
	cl.Member(1).Restart(t)
	cl.Member(2).Restart(t)
	cl.WaitLeader(t)
	cycles("after", 2)

	sentinel := lgtest.Claim(t, lgtest.Session(t, c, "sentinel", time.Minute), "t", "sentinel")
	reported(coordinator.EventClaimed, "sentinel", sentinel.Epoch)
	stop()
	lost.Disarm()

	// etcd's own history of the owner keys after the listing.
	var history []string
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	for resp := range c.Client().Watch(hctx, c.Keys().TaskPrefix(coordinator.KindOwner, ""), clientv3.WithPrefix(), clientv3.WithRev(listed+1), clientv3.WithPrevKV()) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		done := false
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > sentinel.Epoch {
				done = true
				break
			}
			history = append(history, historyLine(c, ev))
			done = ev.Kv.ModRevision == sentinel.Epoch
		}
		if done {
			break
		}
	}

	// The watch resumed where it was: it never had an old event to drop.
	if len(dropped) > 0 {
		t.Errorf("the watch dropped %d events older than ones it had reported: it resumed from too early", len(dropped))
	}
	var changes []string
	last := map[string]coordinator.OwnershipEvent{}
	prevRev := int64(0)
	for _, ev := range got {
		o := ev.Ownership
		if o.Revision < prevRev {
			t.Errorf("event %s %s/%s at revision %d after one at %d", ev.Type, o.Tenant, o.Task, o.Revision, prevRev)
		}
		prevRev = o.Revision
		if p, ok := last[o.Task]; ok && (o.Revision <= p.Ownership.Revision || o.Epoch < p.Ownership.Epoch) {
			t.Errorf("%s/%s: %s at revision %d epoch %d after %s at revision %d epoch %d",
				o.Tenant, o.Task, ev.Type, o.Revision, o.Epoch, p.Type, p.Ownership.Revision, p.Ownership.Epoch)
		}
		last[o.Task] = ev
		if ev.Type != coordinator.EventOwned {
			changes = append(changes, fmt.Sprintf("%s %s/%s rev %d epoch %d", ev.Type, o.Tenant, o.Task, o.Revision, o.Epoch))
		} else if ev != first {
			t.Errorf("owned event without a compaction: %+v", o)
		}
	}
	if strings.Join(changes, "\n") != strings.Join(history, "\n") {
		t.Fatalf("the watch reported %d changes, etcd's history has %d:\nreported:\n%s\nhistory:\n%s",
			len(changes), len(history), strings.Join(changes, "\n"), strings.Join(history, "\n"))
	}
	if len(history) < 2*3*7 {
		t.Fatalf("only %d changes in the history", len(history))
	}
}

// memberClientWith is a client of member i alone whose Txn answers a
// replaces while armed, closed at the end of the test.
func memberClientWith(t *testing.T, cl *embedtest.Cluster, i int, a *lgtest.TxnAnswers) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cl.Member(i).ClientURL()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: append(coordinator.DialOptions(), grpc.WithChainUnaryInterceptor(a.Intercept))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// historyLine is an etcd event of an owner key as the watch should report it.
func historyLine(c *coordinator.Coordinator, ev *clientv3.Event) string {
	_, tenant, task, _ := c.Keys().ParseTask(string(ev.Kv.Key))
	if ev.Type == mvccpb.DELETE {
		return fmt.Sprintf("%s %s/%s rev %d epoch %d", coordinator.EventVacated, tenant, task, ev.Kv.ModRevision, ev.PrevKv.ModRevision)
	}
	return fmt.Sprintf("%s %s/%s rev %d epoch %d", coordinator.EventClaimed, tenant, task, ev.Kv.ModRevision, ev.Kv.ModRevision)
}

// msgCore sends (never blocking) each entry whose message starts with a
// prefix of chans on that prefix's channel.
type msgCore struct {
	chans map[string]chan string
}

func (c *msgCore) Enabled(zapcore.Level) bool        { return true }
func (c *msgCore) With([]zapcore.Field) zapcore.Core { return c }
func (c *msgCore) Sync() error                       { return nil }
func (c *msgCore) Write(e zapcore.Entry, _ []zapcore.Field) error {
	for prefix, ch := range c.chans {
		if strings.HasPrefix(e.Message, prefix) {
			select {
			case ch <- e.Message:
			default:
			}
		}
	}
	return nil
}
func (c *msgCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

// TestWatchDoesNotReplayTheListedRevision: the watch after the initial
// listing starts after the listed revision: a claim already reported as
// owned is not reported again as claimed; the next event is the release.
func TestWatchDoesNotReplayTheListedRevision(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx, cancel := context.WithCancel(lgtest.Ctx(t))
	defer cancel()
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "watched") // the newest revision: the listing's
	events, err := c.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	next := func() coordinator.OwnershipEvent {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(lgtest.Timeout):
			t.Fatal("no ownership event")
		}
		return coordinator.OwnershipEvent{}
	}
	if ev := next(); ev.Type != coordinator.EventOwned || ev.Ownership.Epoch != g.Epoch {
		t.Fatalf("first event %+v; want owned at epoch %d", ev, g.Epoch)
	}
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Type != coordinator.EventVacated {
		t.Fatalf("event after the release %+v; want vacated (the listed claim replayed?)", ev)
	}
}

// TestWatchReportsAStaleKeyOnce: an owner key cut off by a rotation is
// reported vacated at the rotation; when its lease later goes and etcd
// deletes it, nothing more is reported: the next event is the new claim.
func TestWatchReportsAStaleKeyOnce(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx, cancel := context.WithCancel(lgtest.Ctx(t))
	defer cancel()
	old := lgtest.Session(t, c, "old", 10*time.Second)
	g := lgtest.Claim(t, old, "t", "k")
	events, err := c.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, events, coordinator.EventOwned, "k", g.Epoch)
	if _, err := c.RotateRealm(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, events); ev.Type != coordinator.EventVacated || ev.Ownership.Epoch != g.Epoch {
		t.Fatalf("after the rotation: %s %+v; want k vacated", ev.Type, ev.Ownership)
	}
	if err := c.RevokeLease(ctx, old.Lease()); err != nil { // etcd deletes the stale key
		t.Fatal(err)
	}
	g2 := lgtest.Claim(t, lgtest.Session(t, c, "new", 10*time.Second), "t", "k")
	expect(t, events, coordinator.EventClaimed, "k", g2.Epoch)
}

// TestWatchCutReportsAReclaimAsVacatedThenOwned: a task released and
// claimed again while the watch was cut (its member down, the history
// compacted meanwhile) holds the same key with a new epoch; the re-list
// reports the old owner vacated, then the new one owned.
func TestWatchCutReportsAReclaimAsVacatedThenOwned(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	cl.WaitLeader(t)
	ctx, cancel := context.WithCancel(lgtest.Ctx(t))
	defer cancel()
	c := lgtest.Coordinator(t, cl)
	w := lgtest.CoordinatorOf(t, lgtest.MemberClient(t, cl, 0)) // the watcher talks to member 0 only
	g1 := lgtest.Claim(t, lgtest.Session(t, c, "first", 10*time.Second), "t", "k")
	events, err := w.Watch(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, events, coordinator.EventOwned, "k", g1.Epoch)
	cl.Member(0).Stop(t)
	if err := c.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	g2 := lgtest.Claim(t, lgtest.Session(t, c, "second", 10*time.Second), "t", "k")
	if _, err := c.Client().Compact(ctx, g2.Epoch); err != nil { // the watch cannot resume: it re-lists
		t.Fatal(err)
	}
	cl.Member(0).Restart(t)
	expect(t, events, coordinator.EventVacated, "k", g1.Epoch)
	expect(t, events, coordinator.EventOwned, "k", g2.Epoch)
}
