package robustness

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasegate/leasegate/embedtest"
)

// Scenario is one run: a workload under a sequence of faults.
type Scenario struct {
	Name    string
	Faults  []string      // injected in order; with Random, drawn from these (all if empty)
	Random  time.Duration // if set: random faults for this long instead of the sequence
	Clients int           // in-process clients (default 8; none if GatewayClients is set and Clients is not)
	// GatewayClients go through GatewayReplicas gateway replicas (default
	// 2 when there are gateway clients); with Random and no Faults, the
	// gateway's faults are drawn too.
	GatewayClients  int
	GatewayReplicas int
	Tasks           int           // default 3
	TTL             time.Duration // default 2 s
	Calm            time.Duration // workload time before, between and after faults (default 500 ms)
	Hold            time.Duration // how long each fault lasts (default 1 s)
	Commit          CommitFunc    // default FencedCommit
	// OpTimeout bounds each call (default 3 s); longer lets a stalled
	// request be answered after its stall.
	OpTimeout time.Duration
	// IgnoreDeadline: clients act past their local deadline (Workload).
	IgnoreDeadline bool
	Seed           int64
	Logf           func(format string, args ...any) // progress (default: none)
}

// Result is what a run found.
type Result struct {
	Stats      Stats
	Verdict    porcupine.CheckResult // Ok, Illegal, or Unknown if the check timed out
	Violations []string              // from Workload.Verify
	Info       porcupine.LinearizationInfo
	History    *History
	Seed       int64 // the scenario's seed (its choices of faults, members and clients)
}

// checkTimeout bounds porcupine's search.
const checkTimeout = 2 * time.Minute

// Run runs sc on cl (three members, fresh prefix per run).
func Run(ctx context.Context, cl *embedtest.Cluster, sc Scenario) (Result, error) {
	if sc.Clients == 0 && sc.GatewayClients == 0 {
		sc.Clients = 8
	}
	if sc.GatewayClients > 0 && sc.GatewayReplicas == 0 {
		sc.GatewayReplicas = 2
	}
	if sc.Tasks == 0 {
		sc.Tasks = 3
	}
	if sc.TTL == 0 {
		sc.TTL = 2 * time.Second
	}
	if sc.Calm == 0 {
		sc.Calm = 500 * time.Millisecond
	}
	if sc.Logf == nil {
		sc.Logf = func(string, ...any) {}
	}
	if sc.Seed == 0 {
		sc.Seed = time.Now().UnixNano()
	}
	h := NewHistory()
	w := &Workload{Cluster: cl, History: h, Prefix: fmt.Sprintf("/robustness/%s/%d", sc.Name, sc.Seed),
		Tenant: "t", Clients: sc.Clients, TTL: sc.TTL, Commit: sc.Commit, Seed: sc.Seed, OpTimeout: sc.OpTimeout, IgnoreDeadline: sc.IgnoreDeadline,
		GatewayClients: sc.GatewayClients}
	if sc.GatewayClients > 0 {
		g, err := NewGateways(ctx, cl, w.Prefix, w.Tenant, sc.GatewayReplicas, sc.GatewayClients)
		if err != nil {
			return Result{}, fmt.Errorf("gateways: %w", err)
		}
		defer g.Close()
		w.Gateway = g
	}
	for i := 0; i < sc.Tasks; i++ {
		w.Tasks = append(w.Tasks, fmt.Sprintf("task-%d", i))
	}
	stop := make(chan struct{})
	wait, err := w.Start(stop)
	if err != nil {
		return Result{}, err
	}
	defer w.Close()
	n := &Nemesis{Cluster: cl, Workload: w, History: h, Hold: sc.Hold, logf: sc.Logf}
	n.Seed(sc.Seed)
	calm := func() error { return n.hold(ctx, sc.Calm) }
	ferr := calm()
	if ferr == nil && sc.Random > 0 {
		names := sc.Faults
		if len(names) == 0 {
			names = FaultNames()
			if sc.GatewayClients > 0 {
				names = append(names, GatewayFaultNames()...)
			}
		}
		rng := rand.New(rand.NewSource(sc.Seed))
		for end := time.Now().Add(sc.Random); ferr == nil && time.Now().Before(end); {
			if ferr = n.Inject(ctx, names[rng.Intn(len(names))]); ferr == nil {
				ferr = calm()
			}
		}
	} else {
		for _, f := range sc.Faults {
			if ferr != nil {
				break
			}
			if ferr = n.Inject(ctx, f); ferr == nil {
				ferr = calm()
			}
		}
	}
	close(stop)
	werr := wait()
	if ferr != nil {
		return Result{Stats: h.Stats()}, ferr
	}
	if werr != nil {
		return Result{Stats: h.Stats()}, werr
	}
	cli, err := cl.NewClient()
	if err != nil {
		return Result{}, err
	}
	defer cli.Close()
	violations, err := w.Verify(ctx, cli)
	if err != nil {
		return Result{Stats: h.Stats()}, fmt.Errorf("verify: %w", err)
	}
	verdict, info := h.Check(checkTimeout)
	stats := h.Stats()
	if w.Gateway != nil {
		stats.FailedOver = w.Gateway.FailedOver()
	}
	return Result{Stats: stats, Verdict: verdict, Violations: violations, Info: info, History: h, Seed: sc.Seed}, nil
}
