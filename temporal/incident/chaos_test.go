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

// chaosDuration is how long the faults last: LEASEGATE_TEMPORAL_CHAOS
// (a Go duration) for a soak, 20 s in make test-temporal.
func chaosDuration(t *testing.T) time.Duration {
	if s := os.Getenv("LEASEGATE_TEMPORAL_CHAOS"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("LEASEGATE_TEMPORAL_CHAOS=%q: %v", s, err)
		}
		return d
	}
	return 20 * time.Second
}

// Many workflows, their activity workers killed and paused at random, the
// gateway's answers dropped: judged from the providers and the ledger.
func TestChaosEveryOperationOnceNoStaleEffectEveryRecordResolved(t *testing.T) {
	d := chaosDuration(t)
	ctx, cancel := context.WithTimeout(context.Background(), d+4*time.Minute)
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
	seed := uint64(time.Now().UnixNano())
	var log strings.Builder
	rep, err := incident.Chaos(ctx, w, incident.Temporal{Client: ts.GetDefaultClient(), HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace()},
		incident.ChaosConfig{Workflows: 6, Workers: 3, Duration: d, Interval: 1500 * time.Millisecond, Drop: 0.05, Seed: seed},
		exe, []string{"-test.run=^$"}, &log)
	t.Logf("seed %d\n%s", seed, log.String())
	if err != nil {
		t.Fatal(err)
	}
	states := map[ledger.State]int{}
	for _, r := range rep.Records {
		states[r.State]++
	}
	completed := 0
	for _, err := range rep.Workflows {
		if err == nil {
			completed++
		}
	}
	t.Logf("faults: %d kills, %d pauses, %d answers dropped; %d provider calls; records by state %v; %d of %d workflows completed",
		rep.Kills, rep.Pauses, rep.Dropped, len(rep.Calls), states, completed, len(rep.Workflows))
	if rep.Kills+rep.Pauses == 0 {
		t.Fatal("no worker was killed or paused")
	}
	if bad := incident.Check(rep); len(bad) > 0 {
		t.Fatalf("violations:\n%s", strings.Join(bad, "\n"))
	}
}

// Check catches each violation it is meant to catch.
func TestCheckCatchesAMintedIntentAStaleEffectADoubleCallAndAnUnresolvedRecord(t *testing.T) {
	claim := func(op string, epoch int64) ledger.Transition {
		return ledger.Transition{Operation: op, From: ledger.Authorized, To: ledger.Dispatching, Epoch: epoch}
	}
	good := func() incident.ChaosReport {
		return incident.ChaosReport{
			Workflows: map[string]error{"wf": nil},
			Calls:     []devprovider.Call{{Kind: devprovider.KindPromote, Operation: "wf/promote", Epoch: 3}},
			Records:   []ledger.Record{{Operation: "wf/promote", State: ledger.Confirmed}},
			Journals:  map[string][]ledger.Transition{"wf/promote": {claim("wf/promote", 3)}},
		}
	}
	if bad := incident.Check(good()); len(bad) != 0 {
		t.Fatalf("a clean run: %v", bad)
	}
	for _, tc := range []struct {
		name   string
		break_ func(*incident.ChaosReport)
		want   string
	}{
		{"minted intent", func(r *incident.ChaosReport) {
			r.Calls = append(r.Calls, devprovider.Call{Operation: "attempt-b-promote", Epoch: 4})
		}, "not a workflow step's id"},
		{"stale epoch", func(r *incident.ChaosReport) {
			r.Calls = append(r.Calls, devprovider.Call{Operation: "wf/promote", Epoch: 2})
		}, "never claimed its dispatch"},
		{"two calls one claim", func(r *incident.ChaosReport) {
			r.Calls = append(r.Calls, r.Calls[0])
		}, "reached the provider 2 times under epoch 3"},
		{"unresolved", func(r *incident.ChaosReport) { r.Records[0].State = ledger.Unknown }, "neither resolved nor in MANUAL_REVIEW"},
		{"no record", func(r *incident.ChaosReport) { r.Workflows["wf-2"] = nil }, "has no promotion record"},
		{"did not end", func(r *incident.ChaosReport) { r.Workflows["wf"] = context.DeadlineExceeded }, "did not end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.break_(&r)
			bad := incident.Check(r)
			if len(bad) == 0 || !strings.Contains(strings.Join(bad, "\n"), tc.want) {
				t.Fatalf("violations %v; want one saying %q", bad, tc.want)
			}
		})
	}
}
