package failover_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/adaptertest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

const record = "checkout.example.test."

// addr is where traffic reaches each database node.
var addr = map[string]string{"db-a": "10.0.0.1", "db-b": "10.0.0.2"}

type incident struct {
	t      *testing.T
	pair   *realprov.PGPair
	proxy  *realprov.CutProxy // in front of the standby
	dns    *realprov.DNSServer
	pg     *pgpromote.Adapter
	up     *dnsupdate.Adapter
	pgCnt  *adaptertest.Counting
	dnsCnt *adaptertest.Counting
	env    *adaptertest.Env
}

func newIncident(t *testing.T) *incident {
	t.Helper()
	pair := realprov.NewPGPair(t)
	srv := realprov.NewDNSServer(t, "checkout 60 IN A "+addr["db-a"])
	proxy, err := realprov.NewCutProxy(fmt.Sprintf("127.0.0.1:%d", pair.Standby.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	standby := strings.Replace(pair.Standby.ConnString(), fmt.Sprintf("port=%d", pair.Standby.Port), fmt.Sprintf("port=%d", proxy.Port()), 1)
	pg, err := pgpromote.New([]pgpromote.Node{{Name: "db-a", ConnString: pair.Primary.ConnString()}, {Name: "db-b", ConnString: standby}},
		pair.PasswordFile, pgpromote.WithPromoteWait(2*time.Second), pgpromote.WithDialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	up, err := dnsupdate.New(srv.Addr, srv.Zone, srv.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	in := &incident{t: t, pair: pair, proxy: proxy, dns: srv, pg: pg, up: up,
		pgCnt: &adaptertest.Counting{Adapter: pg}, dnsCnt: &adaptertest.Counting{Adapter: up}}
	in.env = adaptertest.New(t, []ledger.Adapter{in.pgCnt, in.dnsCnt}, ledger.WithCallTimeout(2*time.Second))
	// 02:12: the primary becomes unreachable.
	if err := pair.Primary.Crash(); err != nil {
		t.Fatal(err)
	}
	return in
}

// settle reconciles under g until the operation leaves UNKNOWN.
func (in *incident) settle(g coordinator.Grant, op string) ledger.Record {
	in.t.Helper()
	rec, _ := in.env.Journal(op)
	for i := 0; (rec.State == ledger.Unknown || rec.State == ledger.Dispatching) && i < 60; i++ {
		rec = in.env.Reconcile(g, op)
	}
	return rec
}

// promote is the promotion's operation, approved by the commander.
func (in *incident) approvePromotion(g coordinator.Grant) {
	in.t.Helper()
	e, err := in.pg.Effect("db-b", "5s", "failover-v3")
	if err != nil {
		in.t.Fatal(err)
	}
	in.env.Authorized(g, in.pgCnt, "promote-db-b", e)
}

// pointTraffic revalidates the world — the topology's writer now, from its
// authority, never a checkpoint — and moves traffic to it.
func (in *incident) pointTraffic(g coordinator.Grant, op string, beforeDispatch func()) ledger.Record {
	in.t.Helper()
	writers := in.pg.Topology(in.env.Ctx).Writers()
	if len(writers) != 1 {
		in.t.Fatalf("writers %v: traffic waits for one writer", writers)
	}
	e, err := in.up.Effect(record, "A", addr[writers[0]], 60, "failover-v3")
	if err != nil {
		in.t.Fatal(err)
	}
	in.env.Authorized(g, in.dnsCnt, op, e)
	if beforeDispatch != nil {
		beforeDispatch()
	}
	return in.settle(g, in.env.Dispatch(g, op).Operation)
}

func (in *incident) traffic() string {
	in.t.Helper()
	r, err := in.dns.Query(in.env.Ctx, record, dns.TypeA)
	if err != nil {
		in.t.Fatal(err)
	}
	var vs []string
	for _, rr := range r.Answer {
		vs = append(vs, rr.(*dns.A).A.String())
	}
	return strings.Join(vs, ",")
}

var promoteLine = regexp.MustCompile(`app=leasegate (\S+) epoch (\d+) .*pg_promote`)

// check is the trajectory's checks: one promote statement reached the
// standby, under the id and epoch of a dispatch the journal claimed;
// every CONFIRMED cites evidence; traffic ends where want says.
func (in *incident) check(wantTraffic string) {
	in.t.Helper()
	lines := in.pair.Standby.Statements("pg_promote")
	var sent []string
	for _, l := range lines {
		if m := promoteLine.FindStringSubmatch(l); m != nil {
			sent = append(sent, m[1]+" epoch "+m[2])
		}
	}
	_, js := in.env.Journal("promote-db-b")
	var claimed []string
	for _, j := range js {
		if j.To == ledger.Dispatching {
			claimed = append(claimed, fmt.Sprintf("promote-db-b epoch %d", j.Epoch))
		}
	}
	if len(sent) != 1 || !slices.Contains(claimed, sent[0]) {
		in.t.Fatalf("promote statements at the standby %v (log %q), claimed dispatches %v: want one, under a claimed dispatch", sent, lines, claimed)
	}
	for _, op := range []string{"promote-db-b", "traffic-db-b"} {
		_, js := in.env.Journal(op)
		for _, j := range js {
			if j.To == ledger.Confirmed && (j.Evidence == nil || j.Evidence.Empty()) {
				in.t.Fatalf("%s CONFIRMED without evidence", op)
			}
		}
	}
	if got := in.traffic(); got != wantTraffic {
		in.t.Fatalf("traffic ends at %s, want %s", got, wantTraffic)
	}
}

func (in *incident) wantState(op string, want ledger.State) {
	in.t.Helper()
	if rec, _ := in.env.Journal(op); rec.State != want {
		in.t.Fatalf("%s is %s, want %s", op, rec.State, want)
	}
}

func TestFailoverOnRealProviders(t *testing.T) {
	t.Run("no fault", func(t *testing.T) {
		in := newIncident(t)
		in.approvePromotion(in.env.G)
		in.settle(in.env.G, in.env.Dispatch(in.env.G, "promote-db-b").Operation)
		in.wantState("promote-db-b", ledger.Confirmed)
		in.pointTraffic(in.env.G, "traffic-db-b", nil)
		in.wantState("traffic-db-b", ledger.Confirmed)
		in.check(addr["db-b"])
	})
	t.Run("promote connection cut after send", func(t *testing.T) {
		in := newIncident(t)
		in.approvePromotion(in.env.G)
		in.proxy.CutAfter("pg_promote")
		if rec := in.env.Dispatch(in.env.G, "promote-db-b"); rec.State != ledger.Unknown {
			t.Fatalf("state %s, want UNKNOWN", rec.State)
		}
		in.settle(in.env.G, "promote-db-b") // reconciled from the topology, not sent again
		in.wantState("promote-db-b", ledger.Confirmed)
		in.pointTraffic(in.env.G, "traffic-db-b", nil)
		in.check(addr["db-b"])
	})
	t.Run("standby stopped at dispatch", func(t *testing.T) {
		in := newIncident(t)
		in.approvePromotion(in.env.G)
		if err := in.pair.Standby.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := in.env.L.Dispatch(in.env.Ctx, in.env.G, "promote-db-b"); coordinator.DispositionOf(err) != coordinator.AuthorityUnavailable {
			t.Fatalf("dispatch with the standby down: %v, want a hold", err)
		}
		in.wantState("promote-db-b", ledger.Authorized)
		if err := in.pair.Standby.Start(in.env.Ctx); err != nil {
			t.Fatal(err)
		}
		in.settle(in.env.G, in.env.Dispatch(in.env.G, "promote-db-b").Operation)
		in.wantState("promote-db-b", ledger.Confirmed)
		in.pointTraffic(in.env.G, "traffic-db-b", nil)
		in.check(addr["db-b"])
	})
	t.Run("task passes to another worker while the promote is in flight", func(t *testing.T) {
		in := newIncident(t)
		in.approvePromotion(in.env.G)
		var g2 coordinator.Grant
		in.pgCnt.After = func() { g2 = in.env.TakeOver() }
		if _, err := in.env.L.Dispatch(in.env.Ctx, in.env.G, "promote-db-b"); coordinator.DispositionOf(err).Class() != coordinator.ClassRefused {
			t.Fatalf("worker-a's dispatch after losing the task: %v, want refused", err)
		}
		in.pgCnt.After = nil
		in.settle(g2, "promote-db-b") // from the answer worker-a kept
		in.wantState("promote-db-b", ledger.Confirmed)
		if in.pgCnt.Observations() != 0 {
			t.Fatalf("worker-b asked the topology %d times; the kept answer settles it", in.pgCnt.Observations())
		}
		// worker-a's stale grant cannot start the traffic change.
		e, _ := in.up.Effect(record, "A", addr["db-b"], 60, "failover-v3")
		seen, _ := in.up.Precondition(in.env.Ctx, e)
		if _, err := in.env.L.Propose(in.env.Ctx, in.env.G, "traffic-db-b", e, seen); coordinator.DispositionOf(err).Class() != coordinator.ClassRefused {
			t.Fatalf("worker-a proposing traffic: %v, want refused", err)
		}
		in.pointTraffic(g2, "traffic-db-b", nil)
		in.check(addr["db-b"])
	})
	t.Run("standby frozen (SIGSTOP) with the promote sent", func(t *testing.T) {
		// The promote is written to a frozen server and its call times out:
		// ambiguous. Thawed, the server may run it or not (the client's
		// cancel races it); whichever, the ledger must end where the
		// topology says — CONFIRMED if db-b is the writer, MANUAL_REVIEW if
		// not — and never promote twice.
		in := newIncident(t)
		in.approvePromotion(in.env.G)
		in.proxy.OnRequest("pg_promote", func() {
			if err := in.pair.Standby.Freeze(); err != nil {
				t.Error(err)
			}
		})
		in.pgCnt.After = func() {
			if err := in.pair.Standby.Thaw(); err != nil {
				t.Error(err)
			}
		}
		if rec := in.env.Dispatch(in.env.G, "promote-db-b"); rec.State != ledger.Unknown {
			t.Fatalf("state %s, want UNKNOWN", rec.State)
		}
		in.pgCnt.Before, in.pgCnt.After = nil, nil
		rec := in.settle(in.env.G, "promote-db-b")
		deadline := time.Now().Add(30 * time.Second)
		for rec.State == ledger.Unknown && time.Now().Before(deadline) {
			rec = in.settle(in.env.G, "promote-db-b")
		}
		writer := in.pg.Topology(in.env.Ctx).Writers()
		t.Logf("after the thaw: ledger %s, writers %v", rec.State, writer)
		switch {
		case slices.Equal(writer, []string{"db-b"}) && rec.State == ledger.Confirmed:
			in.pointTraffic(in.env.G, "traffic-db-b", nil)
			in.check(addr["db-b"])
		case len(writer) == 0 && rec.State == ledger.ManualReview:
			in.check(addr["db-a"]) // the statement reached the server; traffic waits for a person
		default:
			t.Fatalf("ledger %s, writers %v: the ledger does not agree with the topology", rec.State, writer)
		}
	})
	t.Run("operator nsupdate mid-incident", func(t *testing.T) {
		in := newIncident(t)
		in.approvePromotion(in.env.G)
		in.settle(in.env.G, in.env.Dispatch(in.env.G, "promote-db-b").Operation)
		// The operator points checkout somewhere by hand after the traffic
		// change was approved: the approved world is gone, nothing is
		// overwritten, and the worker holds for the commander.
		rec := in.pointTraffic(in.env.G, "traffic-db-b", func() {
			if err := in.dns.Nsupdate(in.env.Ctx, "update delete "+record+" A\nupdate add "+record+" 60 A 10.0.0.9"); err != nil {
				t.Fatal(err)
			}
		})
		if rec.State != ledger.Superseded || in.dnsCnt.Applies() != 0 {
			t.Fatalf("traffic %s, applies %d; want SUPERSEDED, nothing sent", rec.State, in.dnsCnt.Applies())
		}
		in.check("10.0.0.9")
	})
}
