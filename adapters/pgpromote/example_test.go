package pgpromote_test

import (
	"context"
	"fmt"

	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// Promote db-b through the gateway. (Not run by go test: it needs a
// PostgreSQL pair; TestPromotionApplied runs it on a real one.)
func Example() {
	ctx := context.Background()
	var c *coordinator.Coordinator // coordinator.New(ctx, etcdClient)
	var g coordinator.Grant        // the worker's grant of the task

	ad, err := pgpromote.New([]pgpromote.Node{
		{Name: "db-a", ConnString: "host=127.0.0.1 port=5432 dbname=postgres user=leasegate"},
		{Name: "db-b", ConnString: "host=127.0.0.1 port=5433 dbname=postgres user=leasegate"},
	}, "/etc/leasegate/pg.password")
	if err != nil {
		fmt.Println(err) // invalid_input: a bad address or password file, before any dispatch
		return
	}
	l, err := ledger.New(c, ledger.WithAdapters(ad))
	if err != nil {
		fmt.Println(err)
		return
	}
	effect, _ := ad.Effect("db-b", "5s", "failover-v3")
	seen, err := ad.Precondition(ctx, effect) // the topology now: db-a writer, db-b standby
	if err != nil {
		fmt.Println(err)
		return
	}
	rec, _ := l.Propose(ctx, g, "promote-db-b-2026-11-28", effect, seen)
	rec, _ = l.Authorize(ctx, g, rec.Operation, ledger.Approval{Approver: "darius",
		ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest})
	rec, _ = l.Dispatch(ctx, g, rec.Operation)
	switch rec.State {
	case ledger.Confirmed: // db-b is the writer on a new timeline
	case ledger.Unknown: // the answer was lost: the next owner's Reconcile reads the topology
	case ledger.Failed: // the server refused: rec.Evidence holds its answer and the topology
	case ledger.Superseded: // the topology changed since the approval: nothing was sent
	}
}
