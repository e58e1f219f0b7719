package dnsupdate_test

import (
	"context"
	"fmt"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// Point checkout at the promoted writer through the gateway. (Not run by
// go test: it needs a DNS server; TestUpdateApplied runs it on named.)
func Example() {
	ctx := context.Background()
	var c *coordinator.Coordinator // coordinator.New(ctx, etcdClient)
	var g coordinator.Grant        // the worker's grant of the task

	ad, err := dnsupdate.New("127.0.0.1:5353", "example.test.", "/etc/leasegate/update.key")
	if err != nil {
		fmt.Println(err) // invalid_input: a bad server, zone or key file, before any dispatch
		return
	}
	l, _ := ledger.New(c, ledger.WithAdapters(ad))
	effect, _ := ad.Effect("checkout.example.test.", "A", "10.0.0.2", 60, "failover-v3")
	seen, err := ad.Precondition(ctx, effect) // the record now: 10.0.0.1
	if err != nil {
		fmt.Println(err)
		return
	}
	rec, _ := l.Propose(ctx, g, "traffic-db-b-2026-11-28", effect, seen)
	rec, _ = l.Authorize(ctx, g, rec.Operation, ledger.Approval{Approver: "darius",
		ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest})
	rec, _ = l.Dispatch(ctx, g, rec.Operation)
	if rec.State == ledger.Failed {
		// The server's prerequisite failed: an operator changed the record
		// after the ledger revalidated it. rec.Evidence has the value now.
		fmt.Println(string(rec.Evidence.Detail))
	}
}
