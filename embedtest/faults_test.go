package embedtest_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// drainTimeout is how long etcd's own Close waits on open client streams
// (its request timeout: 5 s + 2 elections). A stop that takes that long
// waited on a drain that Halt and Kill must avoid.
const drainTimeout = 6 * time.Second

func TestLeaderHaltAndKillAreFastAndRecover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		stop func(*embedtest.Member) error
	}{
		{"halt", (*embedtest.Member).Halt},
		{"kill", (*embedtest.Member).Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := embedtest.NewCluster(t, embedtest.WithSize(3))
			ctx := lgtest.Ctx(t)
			lead, err := cl.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cli := cl.Client(t)
			if _, err := cli.Put(ctx, "k", "v1"); err != nil {
				t.Fatal(err)
			}
			// An open watch stream on the leader is what made a stop
			// wait for etcd's drain timeout.
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if wr := <-lgtest.MemberClient(t, cl, lead).Watch(wctx, "k", clientv3.WithCreatedNotify()); !wr.Created {
				t.Fatalf("watch not created: %v", wr.Err())
			}
			start := time.Now()
			if err := tc.stop(cl.Member(lead)); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			t.Logf("%s of the leader took %v", tc.name, took)
			if took >= drainTimeout {
				t.Fatalf("%s took %v: it waited on the drain", tc.name, took)
			}
			if err := tc.stop(cl.Member(lead)); err == nil {
				t.Fatal("stopping a stopped member is no error")
			}
			next, err := cl.Leader(ctx)
			if err != nil || next == lead {
				t.Fatalf("new leader %d (old %d): %v", next, lead, err)
			}
			if _, err := cli.Put(ctx, "k", "v2"); err != nil {
				t.Fatal(err)
			}
			if err := cl.Member(lead).Start(); err != nil {
				t.Fatal(err)
			}
			if err := cl.Member(lead).Start(); err == nil {
				t.Fatal("starting a running member is no error")
			}
			// The restarted member caught up: a linearizable read from it
			// alone sees the write made while it was down.
			one := lgtest.MemberClient(t, cl, lead)
			resp, err := one.Get(ctx, "k")
			if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
				t.Fatalf("read from restarted member: %+v %v", resp, err)
			}
		})
	}
}

func TestPartitionedLeaderLosesLeadershipAndCatchesUp(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	ctx := lgtest.Ctx(t)
	lead, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rest []int
	for i := 0; i < 3; i++ {
		if i != lead {
			rest = append(rest, i)
		}
	}
	cl.Partition(lead)
	next, err := cl.LeaderAmong(ctx, rest...)
	if err != nil || next == lead {
		t.Fatalf("majority leader %d (old %d): %v", next, lead, err)
	}
	// The majority serves writes; the isolated member serves no
	// linearizable read.
	maj := lgtest.MemberClient(t, cl, rest[0])
	if _, err := maj.Put(ctx, "k", "majority"); err != nil {
		t.Fatal(err)
	}
	iso := lgtest.MemberClient(t, cl, lead)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = iso.Get(short, "k")
	cancel()
	if err == nil {
		t.Fatal("the isolated member answered a linearizable read")
	}
	cl.Heal()
	if _, err := cl.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := iso.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "majority" {
		t.Fatalf("read from healed member: %+v %v", resp, err)
	}
}

func TestClientProxyFaults(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	ctx := lgtest.Ctx(t)
	cp := cl.ClientProxy(t)
	cli := cp.Client(t)
	direct := cl.Client(t)
	if _, err := cli.Put(ctx, "k", "0"); err != nil {
		t.Fatal(err)
	}

	t.Run("drop answers: the write applies, its answer never comes", func(t *testing.T) {
		cp.DropAnswers()
		defer cp.Heal()
		// Watch for the write, so that the test waits on the event.
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wch := direct.Watch(wctx, "k", clientv3.WithRev(currentRev(t, direct)+1))
		short, scancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Put(short, "k", "dropped-answer")
		scancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("put through a proxy dropping answers: %v", err)
		}
		ev := <-wch
		if len(ev.Events) != 1 || string(ev.Events[0].Kv.Value) != "dropped-answer" {
			t.Fatalf("watch: %+v %v", ev, ev.Err())
		}
	})

	t.Run("stall: the request is delivered late, on heal", func(t *testing.T) {
		cp.Stall()
		rev := currentRev(t, direct)
		done := make(chan error, 1)
		go func() { _, err := cli.Put(ctx, "k", "late"); done <- err }()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wch := direct.Watch(wctx, "k", clientv3.WithRev(rev+1))
		// Prove it is held: the direct client writes after it and its
		// write is the first event.
		if _, err := direct.Put(ctx, "k", "direct"); err != nil {
			t.Fatal(err)
		}
		if ev := <-wch; len(ev.Events) != 1 || string(ev.Events[0].Kv.Value) != "direct" {
			t.Fatalf("first event: %+v", ev)
		}
		cp.Heal()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if ev := <-wch; len(ev.Events) != 1 || string(ev.Events[0].Kv.Value) != "late" {
			t.Fatalf("second event: %+v", ev)
		}
	})

	t.Run("stall open: the connections open hang, a new one gets through", func(t *testing.T) {
		cp.StallOpen()
		defer cp.Heal()
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(short, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("read on a connection open at the stall: %v", err)
		}
		fresh := cp.Client(t) // its connection opens after the stall
		if _, err := fresh.Get(ctx, "k"); err != nil {
			t.Fatalf("read on a connection opened after the stall: %v", err)
		}
		cp.Heal()
		if _, err := cli.Get(ctx, "k"); err != nil {
			t.Fatalf("after heal: %v", err)
		}
	})

	t.Run("cut and blackhole: nothing gets through, the cluster serves others", func(t *testing.T) {
		for _, fault := range []func(){cp.Cut, cp.Blackhole} {
			fault()
			short, cancel := context.WithTimeout(ctx, time.Second)
			_, err := cli.Get(short, "k")
			cancel()
			if err == nil {
				t.Fatal("read through a faulted proxy succeeded")
			}
			if _, err := direct.Get(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			cp.Heal()
			if _, err := cli.Get(ctx, "k"); err != nil {
				t.Fatalf("after heal: %v", err)
			}
		}
	})
}

func currentRev(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(lgtest.Ctx(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func TestClientProxyOnSecuredCluster(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithTLS(), embedtest.WithAuth("root-pw"))
	ctx := lgtest.Ctx(t)
	cp := cl.ClientProxy(t)
	cli := cp.Client(t)
	if _, err := cli.Put(ctx, "k", "through the proxy, over TLS, as root"); err != nil {
		t.Fatal(err)
	}
	cp.Cut()
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := cli.Get(short, "k"); err == nil {
		t.Fatal("read through a cut proxy succeeded")
	}
}

// TestLinkFaults: with the leader cut from one follower, every write needs
// the other; delaying that link makes each write at least one delay slower
// (a lower bound, which load cannot break), and blackholing it stops
// writes until healed.
func TestLinkFaults(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	ctx := lgtest.Ctx(t)
	lead, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	near, far := (lead+1)%3, (lead+2)%3
	cli := lgtest.MemberClient(t, cl, lead)
	cl.CutLink(lead, far)
	const delay = 300 * time.Millisecond
	cl.DelayLink(lead, near, delay)
	start := time.Now()
	if _, err := cli.Put(ctx, "k", "slow"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("a write over a link delayed %v took %v", delay, took)
	}
	cl.Heal()
	cl.CutLink(lead, far)
	cl.DropLink(lead, near)
	short, cancel := context.WithTimeout(ctx, time.Second)
	_, err = cli.Put(short, "k", "dropped")
	cancel()
	if err == nil {
		t.Fatal("a write committed with the leader's links cut and blackholed")
	}
	cl.Heal()
	if _, err := cl.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Client(t).Put(ctx, "k", "healed"); err != nil {
		t.Fatal(err)
	}
}

func TestNewProxyRefusesNonLoopbackTargets(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"10.0.0.1:2379", "example.com:2379", "127.0.0.1", ""} {
		if p, err := embedtest.NewProxy(target); err == nil {
			p.Close()
			t.Fatalf("proxy to %q accepted", target)
		}
	}
	p, err := embedtest.NewProxy("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}

// TestRestartWhenItsPortWasTaken: a member whose old port was taken while
// it was down starts on another behind its proxies; clients and peers,
// which dial the proxies, do not notice.
func TestRestartWhenItsPortWasTaken(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	ctx := lgtest.Ctx(t)
	m := cl.Member(0)
	old := m.DirectClientURL()
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	squatter, err := net.Listen("tcp", strings.TrimPrefix(old, "http://"))
	if err != nil {
		t.Fatalf("take the old port: %v", err)
	}
	defer squatter.Close()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if m.DirectClientURL() == old {
		t.Fatal("restarted on the taken port")
	}
	resp, err := lgtest.MemberClient(t, cl, 0).Put(ctx, "k", "through the same proxy")
	if err != nil {
		t.Fatalf("put through the restarted member: %+v %v", resp, err)
	}
}
