package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// kindRecord is a DNS adapter whose own precondition is the record's
// value, as the real dnsupdate's is (the RRset): it knows nothing of the
// topology, so only a requirement ties its changes to the writer.
const kindRecord = "dns.record"

type recordAdapter struct {
	ledger.Adapter // devprovider's DNS adapter: Apply sets the record
	p              *devprovider.Provider
}

func (a recordAdapter) Kind() string { return kindRecord }

func (a recordAdapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	v := a.p.Record(e.Target)
	detail, _ := json.Marshal(map[string]string{"value": v})
	return ledger.Observation{Digest: "value=" + v, At: time.Now(), Detail: detail}, nil
}

// failingAdapter cannot show its world.
type failingAdapter struct{ ledger.Adapter }

func (failingAdapter) Kind() string { return "topology.down" }

func (failingAdapter) Precondition(context.Context, ledger.Effect) (ledger.Observation, error) {
	return ledger.Observation{}, context.DeadlineExceeded
}

// trafficTo is the DNS change pointing checkout at value.
func trafficTo(value string) ledger.Effect {
	return ledger.Effect{Kind: kindRecord, Target: "checkout.example", Params: json.RawMessage(`{"value":"` + value + `"}`), Policy: "v1"}
}

// topology is the effect whose world is the topology's writer.
var topology = ledger.Effect{Kind: devprovider.KindPromote, Target: "cluster", Policy: "v1"}

// proposeAndApprove proposes e against the world the gateway shows now,
// requiring requires, and has the approver approve it.
func proposeAndApprove(t *testing.T, w *world, r *replica, wa *client.Client, g coordinator.Grant, op string, e ledger.Effect, requires []ledger.Requirement) ledger.Record {
	t.Helper()
	ctx := lgtest.Ctx(t)
	pre, err := wa.ObservePrecondition(ctx, g, e)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := wa.ProposeRequiring(ctx, g, op, e, pre, requires)
	if err != nil {
		t.Fatalf("propose %s: %v", op, err)
	}
	if _, err := w.client(r, "approver").Authorize(ctx, tenant, g.Task, op,
		ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest}); err != nil {
		t.Fatalf("authorize %s: %v", op, err)
	}
	return rec
}

// dnsCalls counts the calls that reached the DNS provider.
func dnsCalls(p *devprovider.Provider) int {
	n := 0
	for _, c := range p.Calls() {
		if c.Kind == devprovider.KindDNS {
			n++
		}
	}
	return n
}

// Traffic follows the writer at the gateway: a worker that read the
// topology (writer db-1) and then lost time proposes and gets approved
// "checkout → db-1, requiring the writer to be db-1"; meanwhile the writer
// became db-2. At dispatch the gateway observes the topology itself, after
// the claim: the change is SUPERSEDED and nothing reaches the DNS
// provider. The same change proposed fresh (requiring writer db-2, toward
// db-2) is dispatched. Without the requirement the stale change would go
// through: the record's own precondition (the DNS value) did not move.
func TestATrafficChangeRequiringTheWriterIsRefusedWhenTheWriterMoved(t *testing.T) {
	w := newWorld(t)
	r := w.replica(gateway.WithAdapters(recordAdapter{Adapter: w.provider.Adapters()[1], p: w.provider}))
	ctx := lgtest.Ctx(t)
	wa := w.client(r, "worker-a")
	g := claim(t, w.session(wa, time.Minute), tenant, "failover")

	// The worker's view of the topology, before it paused.
	stale, err := wa.ObservePrecondition(ctx, g, topology)
	if err != nil || stale.Digest != devprovider.Digest("db-1") {
		t.Fatalf("topology: %+v, %v", stale, err)
	}
	rec := proposeAndApprove(t, w, r, wa, g, "traffic-to-db-1", trafficTo("db-1"),
		[]ledger.Requirement{{Effect: topology, Precondition: stale}})
	if len(rec.Requires) != 1 || rec.Requires[0].Precondition.Digest != stale.Digest {
		t.Fatalf("the record requires %+v", rec.Requires)
	}
	// An approver reads the requirement in the record it approves.
	read, _, err := w.clientWith(r, "approver", client.WithReadsAs("approver")).Record(ctx, tenant, "failover", "traffic-to-db-1")
	if err != nil || len(read.Requires) != 1 || read.Requires[0].Effect.Kind != devprovider.KindPromote {
		t.Fatalf("the approver reads %+v, %v", read.Requires, err)
	}

	// Meanwhile the writer moves to db-2 (a promotion through the gateway).
	proposeAndApprove(t, w, r, wa, g, "promote-db-2", ledger.Effect{Kind: devprovider.KindPromote, Target: "db-2", Policy: "v1"}, nil)
	if out, err := wa.Dispatch(ctx, g, "promote-db-2"); err != nil || out.State != ledger.Confirmed {
		t.Fatalf("promote: %s, %v", out.State, err)
	}

	out, err := wa.Dispatch(ctx, g, "traffic-to-db-1")
	if err != nil || out.State != ledger.Superseded {
		t.Fatalf("the stale traffic change: %s, %v; want SUPERSEDED", out.State, err)
	}
	if n := dnsCalls(w.provider); n != 0 || w.provider.Record("checkout.example") != "" {
		t.Fatalf("%d calls reached the DNS provider; checkout is %q", n, w.provider.Record("checkout.example"))
	}
	_, js, err := wa.Record(ctx, tenant, "failover", "traffic-to-db-1")
	if err != nil {
		t.Fatal(err)
	}
	if last := js[len(js)-1]; !strings.Contains(last.Reason, "requirement 0 changed") || !strings.Contains(last.Reason, "writer=db-2") {
		t.Fatalf("the journal says %q; want the requirement and the writer seen", last.Reason)
	}

	// Fresh: toward the writer, requiring it.
	fresh, err := wa.ObservePrecondition(ctx, g, topology)
	if err != nil {
		t.Fatal(err)
	}
	proposeAndApprove(t, w, r, wa, g, "traffic-to-db-2", trafficTo("db-2"), []ledger.Requirement{{Effect: topology, Precondition: fresh}})
	if out, err := wa.Dispatch(ctx, g, "traffic-to-db-2"); err != nil || out.State != ledger.Confirmed {
		t.Fatalf("the fresh traffic change: %s, %v; want CONFIRMED", out.State, err)
	}
	if v := w.provider.Record("checkout.example"); v != "db-2" {
		t.Fatalf("checkout points at %q, want db-2", v)
	}

	// The gap the requirement closes: the stale change without it passes
	// its own revalidation (the DNS value did not move since its proposal).
	proposeAndApprove(t, w, r, wa, g, "traffic-back-unrequired", trafficTo("db-1"), nil)
	if out, err := wa.Dispatch(ctx, g, "traffic-back-unrequired"); err != nil || out.State != ledger.Confirmed {
		t.Fatalf("without a requirement: %s, %v", out.State, err)
	}
}

// A requirement is checked at Propose (a kind no adapter serves, no
// digest: invalid_input, nothing written) and fixed there (the same
// effect with another requirement is operation_conflict); a requirement
// whose world cannot be observed at dispatch is a hold — the claim is
// withdrawn, AUTHORIZED again, nothing sent.
func TestRequirementsAreCheckedAndAWorldNotObservedIsAHold(t *testing.T) {
	w := newWorld(t)
	dns := w.provider.Adapters()[1]
	r := w.replica(gateway.WithAdapters(recordAdapter{Adapter: dns, p: w.provider}, failingAdapter{dns}))
	ctx := lgtest.Ctx(t)
	wa := w.client(r, "worker-a")
	g := claim(t, w.session(wa, time.Minute), tenant, "failover")
	writer, err := wa.ObservePrecondition(ctx, g, topology)
	if err != nil {
		t.Fatal(err)
	}
	e := trafficTo("db-1")
	pre, err := wa.ObservePrecondition(ctx, g, e)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		req  ledger.Requirement
	}{
		{"a kind no adapter serves", ledger.Requirement{Effect: ledger.Effect{Kind: "no.such", Target: "x"}, Precondition: writer}},
		{"no digest", ledger.Requirement{Effect: topology, Precondition: ledger.Observation{At: time.Now()}}},
	} {
		lgtest.RefusedWritingNothing(t, w.etcd, "/", coordinator.InvalidInput, func() error {
			_, err := wa.ProposeRequiring(ctx, g, "bad-"+strings.ReplaceAll(c.name, " ", "-"), e, pre, []ledger.Requirement{c.req})
			return err
		})
	}
	if _, err := wa.ProposeRequiring(ctx, g, "op", e, pre, []ledger.Requirement{{Effect: topology, Precondition: writer}}); err != nil {
		t.Fatal(err)
	}
	other := writer
	other.Digest = devprovider.Digest("db-9")
	if _, err := wa.ProposeRequiring(ctx, g, "op", e, pre, []ledger.Requirement{{Effect: topology, Precondition: other}}); coordinator.DispositionOf(err) != coordinator.OperationConflict {
		t.Fatalf("the same effect with another requirement: %v, want operation_conflict", err)
	}

	down := ledger.Requirement{Effect: ledger.Effect{Kind: "topology.down", Target: "cluster"}, Precondition: writer}
	proposeAndApprove(t, w, r, wa, g, "held", e, []ledger.Requirement{down})
	if _, err := wa.Dispatch(ctx, g, "held"); coordinator.DispositionOf(err) != coordinator.AuthorityUnavailable {
		t.Fatalf("a requirement that cannot be observed: %v; want authority_unavailable", err)
	}
	if rec, _, err := wa.Record(ctx, tenant, "failover", "held"); err != nil || rec.State != ledger.Authorized {
		t.Fatalf("the held record is %s (%v); want AUTHORIZED again", rec.State, err)
	}
	if n := dnsCalls(w.provider); n != 0 {
		t.Fatalf("%d calls reached the DNS provider", n)
	}
}
