package httpidem_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leasegate/leasegate/adapters/httpidem"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// Change a record at a service that honours Idempotency-Key. (Not run by
// go test: it needs the service; TestPostApplied runs it on one.)
func Example() {
	ctx := context.Background()
	var c *coordinator.Coordinator // coordinator.New(ctx, etcdClient)
	var g coordinator.Grant        // the worker's grant of the task

	ad, err := httpidem.New("http://127.0.0.1:8080/v1/records",
		httpidem.WithKeyRetention(24*time.Hour),
		httpidem.WithLookup("http://127.0.0.1:8080/v1/changes?idempotency_key={key}"))
	if err != nil {
		fmt.Println(err) // invalid_input, before any dispatch
		return
	}
	l, _ := ledger.New(c, ledger.WithAdapters(ad))
	effect, _ := ad.Effect("checkout", map[string]string{"value": "db-b"}, "failover-v3")
	seen, _ := ad.Precondition(ctx, effect)
	rec, _ := l.Propose(ctx, g, "traffic-db-b-2026-11-28", effect, seen)
	rec, _ = l.Authorize(ctx, g, rec.Operation, ledger.Approval{Approver: "darius",
		ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest})
	rec, _ = l.Dispatch(ctx, g, rec.Operation) // POST, Idempotency-Key: traffic-db-b-2026-11-28
	fmt.Println(rec.State)
}
