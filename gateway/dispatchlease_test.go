package gateway_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// A replica that dies with a dispatch claimed leaves the record
// DISPATCHING under its owner's still-current grant. While the replica's
// dispatch lease lives the dispatch may still be in flight, and the
// owner's retry is refused, nothing written. Once the lease has expired,
// the owner's retry of Dispatch through another replica — the documented
// answer to outcome_unknown — or its Reconcile settles it under the same
// operation id: killed between the claim and the provider call, the
// provider saw nothing and the retry dispatches it, applied once; killed
// after the call, the provider's own record settles it CONFIRMED with no
// second call.
func TestADispatchOfAKilledReplicaIsSettledByItsOwner(t *testing.T) {
	for _, tc := range []struct {
		name      string
		afterCall bool // the replica dies after the provider applied (else before the call)
		reconcile bool // the owner settles it with Reconcile (else by retrying Dispatch)
	}{
		{"killed between the claim and the call, the retry dispatches", false, false},
		{"killed after the call, the retry confirms", true, false},
		{"killed between the claim and the call, reconcile makes it authorized again", false, true},
		{"killed after the call, reconcile confirms", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			a := w.replica(gateway.WithDispatchLeaseTTL(2 * time.Second))
			b := w.replica(gateway.WithDispatchLeaseTTL(2 * time.Second))
			c := w.replica(gateway.WithDispatchLeaseTTL(2 * time.Second))
			ctx := lgtest.Ctx(t)
			wb := w.client(b, "worker-a")
			g := claim(t, w.session(wb, time.Minute), tenant, "task-1")
			rec, err := wb.Propose(ctx, g, "op-1", ledger.Effect{Kind: devprovider.KindDNS, Target: "checkout.example",
				Params: json.RawMessage(`{"value":"db-2"}`), Policy: "v1"}, ledger.Observation{Digest: devprovider.Digest("db-1"), At: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.client(b, "approver").Authorize(ctx, tenant, "task-1", "op-1",
				ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest}); err != nil {
				t.Fatal(err)
			}
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			hold := func(context.Context, string) {
				first := false
				once.Do(func() { first = true })
				if first {
					close(entered)
					<-release // replica a never gets past here while the test runs
				}
			}
			if tc.afterCall {
				w.provider.AfterApply = hold
			} else {
				w.provider.BeforeApply = hold
			}
			t.Cleanup(func() { close(release) })
			go func() { _, _ = w.client(a, "worker-a").Dispatch(context.Background(), g, "op-1") }()
			lgtest.Wait(t, entered, "the provider call through replica a")

			// Replica a lives: its dispatch may be in flight, so the owner's
			// retry and Reconcile through c leave it alone. (b still holds
			// the record as AUTHORIZED, as it last wrote it: its retry below
			// starts from that stale hint.)
			wc := w.client(c, "worker-a")
			lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.IllegalTransition, func() error {
				_, err := wc.Dispatch(ctx, g, "op-1")
				return err
			})
			lgtest.WritesNothing(t, w.etcd, coordinator.DefaultPrefix, "reconcile while the dispatch is in flight", func() {
				if _, err := wc.Reconcile(ctx, g); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
			})

			// Kill replica a: its callers and its etcd client are cut off,
			// so nothing renews its dispatch lease any more.
			claimed := waitRecord(t, w, b.c, "task-1", "op-1", ledger.Dispatching)
			a.ts.CloseClientConnections()
			if err := a.etcd.Close(); err != nil {
				t.Logf("closing a's etcd client: %v", err)
			}
			waitLeaseExpired(t, w.etcd, claimed.DispatchLease)

			var got ledger.Record
			if tc.reconcile {
				recs, err := wb.Reconcile(ctx, g)
				if err != nil || len(recs) != 1 {
					t.Fatalf("Reconcile: %v, %+v", err, recs)
				}
				got = recs[0]
			} else if got, err = wb.Dispatch(ctx, g, "op-1"); err != nil {
				t.Fatalf("the owner's retry of Dispatch: %v", err)
			}
			want := ledger.Confirmed
			if tc.reconcile && !tc.afterCall {
				want = ledger.Authorized // not applied, and a retry is safe: dispatch it again
			}
			if got.State != want {
				t.Fatalf("settled %s (%+v), want %s", got.State, got, want)
			}
			_, journal, err := wb.Record(ctx, tenant, "task-1", "op-1")
			if err != nil {
				t.Fatal(err)
			}
			if j := journal[3]; j.From != ledger.Dispatching || j.To != ledger.Unknown || j.Epoch != g.Epoch {
				t.Fatalf("journal entry %+v: want DISPATCHING → UNKNOWN by the owner's own epoch", j)
			}
			calls := w.provider.Calls()
			wantCalls := 1 // a's, held
			if !tc.afterCall && !tc.reconcile {
				wantCalls = 2 // and the retry's, under the same operation id and epoch
			}
			if len(calls) != wantCalls {
				t.Fatalf("provider calls %+v, want %d", calls, wantCalls)
			}
			for _, c := range calls {
				if c.Operation != "op-1" || c.Epoch != g.Epoch {
					t.Fatalf("provider call %+v: want op-1 at epoch %d", c, g.Epoch)
				}
			}
			if v := w.provider.Record("checkout.example"); (v == "db-2") != (want == ledger.Confirmed) {
				t.Fatalf("the provider's record is %q with the record %s", v, want)
			}
		})
	}
}

// waitLeaseExpired waits until etcd shows lease expired.
func waitLeaseExpired(t *testing.T, cli *clientv3.Client, lease int64) {
	t.Helper()
	if lease == 0 {
		t.Fatal("the dispatch claim carries no lease")
	}
	ctx := lgtest.Ctx(t)
	for {
		resp, err := cli.TimeToLive(ctx, clientv3.LeaseID(lease))
		if err != nil {
			t.Fatal(err)
		}
		if resp.TTL < 0 { // -1: expired
			return
		}
		select {
		case <-time.After(time.Duration(resp.TTL)*time.Second/2 + 100*time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("lease %x never expired", lease)
		}
	}
}
