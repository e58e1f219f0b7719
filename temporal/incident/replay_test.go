package incident_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/server/temporaltest"

	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/temporal/incident"
)

// replay runs the seed in shape on a fresh world and a real in-process
// Temporal server, worker A being this test binary run again.
func replay(t *testing.T, shape string) incident.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	w, err := incident.StartWorld(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	r, err := incident.Replay(ctx, w, incident.Temporal{Client: ts.GetDefaultClient(), HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace()},
		shape, exe, []string{"-test.run=^$"}, &log)
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func calls(r incident.Report, kind string) []devprovider.Call {
	var out []devprovider.Call
	for _, c := range r.Calls {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// The seed as it ran: the coarse activity, a fresh key per attempt. Worker
// A is stopped after the provider acknowledged its promotion; Temporal
// retries on B, which promotes again under a new key and changes traffic;
// A wakes after the workflow has finished and makes its own traffic
// change, which the providers apply.
func TestTheNaiveShapeRepeatsTheSeed(t *testing.T) {
	r := replay(t, incident.ShapeNaive)
	if !r.WorkflowOK {
		t.Fatalf("workflow: %s", r.WorkflowErr)
	}
	if r.PromoteAttempts < 2 {
		t.Fatalf("Temporal counted attempt %d of recoverRegion; want a retry (≥ 2)", r.PromoteAttempts)
	}
	if !r.CompletedBeforeAWoke {
		t.Fatal("the workflow did not finish while A was stopped")
	}
	aKey := strings.TrimSuffix(r.Paused.Op, "-promote")
	promotions := calls(r, devprovider.KindPromote)
	if len(promotions) != 2 || promotions[0].Operation == promotions[1].Operation {
		t.Fatalf("promotions reaching the provider: %+v; want two, under two request keys (a second logical promotion)", promotions)
	}
	traffic := calls(r, devprovider.KindDNS)
	if len(traffic) != 2 {
		t.Fatalf("traffic changes reaching the provider: %+v; want B's and A's late one", traffic)
	}
	if last := traffic[len(traffic)-1]; last.Operation != aKey+"-traffic" {
		t.Fatalf("last traffic change %s; want A's late %s-traffic", last.Operation, aKey)
	}
	if r.ADone.Detail != "ok" {
		t.Fatalf("A's coarse activity after waking: %s; want its late traffic change to have gone through", r.ADone.Detail)
	}
}

// The seed with this module's shape: the same pause and retry. B adopts
// A's promotion from the ledger (no second promotion reaches the
// provider), A's late call under its superseded grant is refused at the
// gateway with stale_owner, and traffic moves once, to the writer.
func TestTheFencedShapeAdoptsThePromotionAndRefusesTheStaleAttempt(t *testing.T) {
	r := replay(t, incident.ShapeFenced)
	if !r.WorkflowOK {
		t.Fatalf("workflow: %s", r.WorkflowErr)
	}
	if r.PromoteAttempts < 2 {
		t.Fatalf("Temporal counted attempt %d of the promotion; want a retry (≥ 2)", r.PromoteAttempts)
	}
	if !r.CompletedBeforeAWoke {
		t.Fatal("the workflow did not finish while A was stopped")
	}
	promoteOp := r.WorkflowID + "/promote"
	promotions := calls(r, devprovider.KindPromote)
	if len(promotions) != 1 || promotions[0].Operation != promoteOp || promotions[0].Epoch != r.Paused.Epoch {
		t.Fatalf("promotions reaching the provider: %+v; want one, %s under A's epoch %d", promotions, promoteOp, r.Paused.Epoch)
	}
	traffic := calls(r, devprovider.KindDNS)
	if len(traffic) != 1 || traffic[0].Operation != r.WorkflowID+"/traffic" || traffic[0].Epoch <= r.Paused.Epoch {
		t.Fatalf("traffic changes reaching the provider: %+v; want one, %s/traffic, under an epoch newer than A's %d", traffic, r.WorkflowID, r.Paused.Epoch)
	}
	if r.Traffic != r.Writer || r.Writer != incident.SeedPlan.To {
		t.Fatalf("traffic %q, writer %q; want both %q", r.Traffic, r.Writer, incident.SeedPlan.To)
	}
	if r.Late.Detail != "stale_owner" || r.Late.Epoch != r.Paused.Epoch {
		t.Fatalf("A's late call: %+v; want stale_owner under A's epoch %d", r.Late, r.Paused.Epoch)
	}
	for _, rec := range r.Records {
		if rec.State != ledger.Confirmed {
			t.Errorf("record %s is %s; want CONFIRMED", rec.Operation, rec.State)
		}
		if rec.Operation == promoteOp && (rec.Epoch != r.Paused.Epoch || rec.Attempts != 1) {
			t.Errorf("promotion record: epoch %d, %d dispatches; want A's epoch %d and one dispatch (B adopted it)", rec.Epoch, rec.Attempts, r.Paused.Epoch)
		}
	}
	if len(r.Records) != 2 {
		t.Fatalf("records: %d; want two (promote, traffic)", len(r.Records))
	}
}
