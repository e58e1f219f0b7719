package gateway_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/adapters/httpidem"
	"google.golang.org/protobuf/encoding/protojson"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// A worker with no provider access reads the precondition through the
// gateway, proposes against it, and the dispatch's revalidation agrees:
// the observation is the adapter's, the one Dispatch compares with.
func TestObservePreconditionIsWhatDispatchRevalidates(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	wa := w.client(r, "worker-a")
	g := claim(t, w.session(wa, 10*time.Second), tenant, "task-1")
	eff := ledger.Effect{Kind: devprovider.KindPromote, Target: "db-2", Params: json.RawMessage(`{"target":"db-2"}`), Policy: "v1"}

	var seen ledger.Observation
	lgtest.WritesNothing(t, w.etcd, coordinator.DefaultPrefix, "an observation", func() {
		var err error
		if seen, err = wa.ObservePrecondition(ctx, g, eff); err != nil {
			t.Fatalf("ObservePrecondition: %v", err)
		}
	})
	if seen.Digest != devprovider.Digest("db-1") || seen.At.IsZero() || len(seen.Detail) == 0 {
		t.Fatalf("observed %+v, want the provider's world (writer db-1) with its time and detail", seen)
	}
	if calls := w.provider.Calls(); len(calls) != 0 {
		t.Fatalf("the provider received %v from an observation, want nothing", calls)
	}
	// The same call as docs/gateway.md's curl line sends it (JSON).
	grant, err := protojson.Marshal(wire.GrantToProto(g))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"grant":` + string(grant) + `,"effect":{"kind":"db.promote","target":"db-2","paramsJson":"{\"target\":\"db-2\"}","policy":"v1"}}`
	resp, err := w.httpClient("worker-a").Post(r.ts.URL+"/leasegate.v1.WorkerService/ObservePrecondition", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Precondition struct {
			Digest     string `json:"digest"`
			ObservedAt string `json:"observedAt"`
			DetailJSON string `json:"detailJson"`
		} `json:"precondition"`
	}
	err = json.NewDecoder(resp.Body).Decode(&got)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || got.Precondition.Digest != seen.Digest || got.Precondition.ObservedAt == "" || got.Precondition.DetailJSON != `{"writer":"db-1"}` {
		t.Fatalf("JSON call: %d %+v (%v); want the digest %s with its time and detail", resp.StatusCode, got, err, seen.Digest)
	}
	rec, err := wa.Propose(ctx, g, "promote-1", eff, seen)
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	if _, err := w.client(r, "approver").Authorize(ctx, tenant, "task-1", "promote-1",
		ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest}); err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	if rec, err = wa.Dispatch(ctx, g, "promote-1"); err != nil || rec.State != ledger.Confirmed {
		t.Fatalf("Dispatch: %s, %v; want CONFIRMED", rec.State, err)
	}
	if w.provider.Writer() != "db-2" {
		t.Fatalf("writer %q after the dispatch, want db-2", w.provider.Writer())
	}
}

// Each refusal of ObservePrecondition writes nothing and asks no provider.
func TestObservePreconditionRefusals(t *testing.T) {
	w := newWorld(t)
	// An adapter whose provider does not answer: a real HTTP adapter aimed
	// at a loopback port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() + "/v1/records"
	_ = l.Close()
	unreachable, err := httpidem.New(down, httpidem.WithKind("cdn.origin"), httpidem.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r := w.replica(gateway.WithAdapters(unreachable))
	ctx := lgtest.Ctx(t)
	prefix := coordinator.DefaultPrefix
	wa := w.client(r, "worker-a")
	s := w.session(wa, 10*time.Second)
	g := claim(t, s, tenant, "task-1")
	eff := ledger.Effect{Kind: devprovider.KindDNS, Target: "checkout.example", Params: json.RawMessage(`{"value":"db-2"}`), Policy: "v1"}
	observe := func(caller string, g coordinator.Grant, e ledger.Effect) func() error {
		return func() error {
			_, err := w.client(r, caller).ObservePrecondition(ctx, g, e)
			return err
		}
	}

	t.Run("no grant", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
			_, err := w.rawWorker(r, "worker-a").ObservePrecondition(ctx, &leasegatev1.ObservePreconditionRequest{Effect: wire.EffectToProto(eff)})
			return asRefusal(err)
		})
	})
	t.Run("another worker's grant", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, observe("worker-b", g, eff))
	})
	t.Run("a worker of another tenant", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, observe("worker-other", g, eff))
	})
	t.Run("an approver (not a worker)", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, observe("approver", g, eff))
	})
	t.Run("an effect kind no adapter serves", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, observe("worker-a", g, ledger.Effect{Kind: "queue.push", Target: "q", Policy: "v1"}))
	})
	t.Run("an effect without a target", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, observe("worker-a", g, ledger.Effect{Kind: devprovider.KindDNS, Policy: "v1"}))
	})
	t.Run("a provider that does not answer", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.AuthorityUnavailable, observe("worker-a", g, ledger.Effect{Kind: "cdn.origin", Target: "checkout", Policy: "v1"}))
	})
	t.Run("a grant no longer current", func(t *testing.T) {
		g2 := claim(t, s, tenant, "task-2")
		if err := wa.Release(ctx, g2); err != nil {
			t.Fatal(err)
		}
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.ExpiredOwner, observe("worker-a", g2, eff))
	})
	if calls := w.provider.Calls(); len(calls) != 0 {
		t.Fatalf("the provider received %v, want nothing", calls)
	}
}

// With etcd unreachable the grant cannot be checked: a hold, never a
// refusal, and no provider is read.
func TestObservePreconditionWithEtcdUnreachableIsAHold(t *testing.T) {
	w := newWorld(t)
	r := w.replica(gateway.WithCallTimeout(2 * time.Second))
	wa := w.client(r, "worker-a")
	g := claim(t, w.session(wa, 10*time.Second), tenant, "task-1")
	if err := w.cl.Member(0).Halt(); err != nil {
		t.Fatal(err)
	}
	lgtest.WaitDisconnected(t, r.etcd)
	_, err := wa.ObservePrecondition(lgtest.Ctx(t), g,
		ledger.Effect{Kind: devprovider.KindPromote, Target: "db-2", Params: json.RawMessage(`{"target":"db-2"}`), Policy: "v1"})
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
}
