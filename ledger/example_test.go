package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/ledger"
)

// dns is a toy DNS provider: one record, changes keyed by the caller's
// operation id (its idempotency key), and a switch that loses the next
// answer after applying.
type dns struct {
	mu       sync.Mutex
	target   string
	changes  map[string]string // operation id -> change id
	loseNext bool
}

func (d *dns) Kind() string { return "dns" }

// Contract: it can be asked about an id (Lookup), and a change under an id
// it has seen is not applied again, for a day (RetrySafe, Retention).
func (d *dns) Contract() ledger.Contract {
	return ledger.Contract{Lookup: true, RetrySafe: true, Retention: 24 * time.Hour}
}

func (d *dns) Precondition(_ context.Context, e ledger.Effect) (ledger.Observation, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return ledger.Observation{Digest: "target=" + d.target, At: time.Now()}, nil
}

func (d *dns) Apply(_ context.Context, call ledger.Call) (ledger.Evidence, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, seen := d.changes[call.Operation]
	if !seen {
		id = fmt.Sprintf("change-%d", len(d.changes)+1)
		d.changes[call.Operation] = id
		d.target = call.Effect.Target
	}
	if d.loseNext {
		d.loseNext = false
		return ledger.Evidence{}, ledger.Ambiguous(errors.New("connection reset after send"))
	}
	return ledger.Evidence{ProviderIDs: []string{id}}, nil
}

func (d *dns) Observe(_ context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id, ok := d.changes[rec.Operation]; ok {
		return ledger.Applied, ledger.Evidence{ProviderIDs: []string{id}}, nil
	}
	return ledger.NotApplied, ledger.Evidence{}, nil
}

// Point traffic at a new target through the gateway; then lose a provider's
// answer and let the next owner reconcile it against the provider instead
// of sending a second, fresh change.
func Example() {
	dir, _ := os.MkdirTemp("", "leasegate-ledger-example")
	defer os.RemoveAll(dir)
	cluster, err := embedtest.Start(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	cli, err := cluster.NewClient()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := coordinator.New(ctx, cli)
	if err != nil {
		fmt.Println(err)
		return
	}
	provider := &dns{target: "db-a", changes: map[string]string{}}
	l, err := ledger.New(c, ledger.WithAdapters(provider))
	if err != nil {
		fmt.Println(err)
		return
	}
	worker, err := c.NewSession(ctx, "worker-a", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer worker.Close(ctx)
	g, err := worker.Claim(ctx, "northstar", "checkout-failover")
	if err != nil {
		fmt.Println(err)
		return
	}

	// Propose with the world as seen, approve exactly that, dispatch.
	step := func(g coordinator.Grant, operation, target string) ledger.Record {
		effect := ledger.Effect{Kind: "dns", Target: target, Params: json.RawMessage(`{"ttl":60}`), Policy: "failover-v3"}
		seen, _ := provider.Precondition(ctx, effect)
		rec, err := l.Propose(ctx, g, operation, effect, seen)
		if err == nil {
			rec, err = l.Authorize(ctx, g, operation, ledger.Approval{Approver: "darius",
				ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest})
		}
		if err == nil {
			rec, err = l.Dispatch(ctx, g, operation)
		}
		if err != nil {
			fmt.Println(coordinator.DispositionOf(err), err)
		}
		return rec
	}
	rec := step(g, "traffic-to-db-b", "db-b")
	fmt.Println(rec.Operation, rec.State, rec.Evidence.ProviderIDs)

	provider.mu.Lock()
	provider.loseNext = true
	provider.mu.Unlock()
	rec = step(g, "traffic-to-db-c", "db-c")
	fmt.Println(rec.Operation, rec.State)

	// The worker is gone; the next owner reconciles instead of re-sending.
	_ = c.RevokeLease(ctx, g.Lease)
	next, err := c.NewSession(ctx, "worker-b", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Close(ctx)
	g2, err := next.Claim(ctx, "northstar", "checkout-failover")
	if err != nil {
		fmt.Println(err)
		return
	}
	settled, err := l.Reconcile(ctx, g2)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range settled {
		fmt.Println(r.Operation, r.State, r.Evidence.ProviderIDs)
	}
	// The old worker's grant can no longer start anything.
	_, err = l.Dispatch(ctx, g, "traffic-to-db-b")
	fmt.Println(coordinator.DispositionOf(err))

	_, journal, _ := l.Record(ctx, "northstar", "checkout-failover", "traffic-to-db-c")
	for _, t := range journal {
		from := string(t.From)
		if from == "" {
			from = "(new)"
		}
		fmt.Printf("%d %s -> %s by %s (%s)\n", t.Seq, from, t.To, t.By, t.Owner)
	}
	fmt.Println("changes sent:", len(provider.changes))
	// Output:
	// traffic-to-db-b CONFIRMED [change-1]
	// traffic-to-db-c UNKNOWN
	// traffic-to-db-c CONFIRMED [change-2]
	// stale_owner
	// 1 (new) -> PROPOSED by propose (worker-a)
	// 2 PROPOSED -> AUTHORIZED by authorize (worker-a)
	// 3 AUTHORIZED -> DISPATCHING by dispatch (worker-a)
	// 4 DISPATCHING -> UNKNOWN by dispatch (worker-a)
	// 5 UNKNOWN -> CONFIRMED by reconcile (worker-b)
	// changes sent: 2
}
