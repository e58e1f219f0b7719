package incident

import (
	"context"
	"encoding/json"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
)

// Approve is the incident commander: every poll it reads the tenant's
// PROPOSED records (through the console's identity, a reader) and, for
// each that allow allows, authorizes exactly its digests through the
// gateway's ApproverService with the approver's own certificate. It
// returns when ctx ends; the count is of approvals given.
func Approve(ctx context.Context, console, approver *client.Client, allow func(ledger.Record) bool, poll time.Duration) int {
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n
		case <-time.After(poll):
		}
		recs, err := console.List(ctx, Tenant, "", ledger.Proposed)
		if err != nil {
			continue // a hold: read again next poll
		}
		for _, r := range recs {
			if !allow(r) {
				continue
			}
			if _, err := approver.Authorize(ctx, r.Tenant, r.Task, r.Operation,
				ledger.Approval{ParamsDigest: r.ParamsDigest, PreconditionDigest: r.Precondition.Digest, Note: "approved under the recovery plan"}); err == nil {
				n++
			}
		}
	}
}

// Allows is the plan's approval policy: promoting p.To, and pointing
// p.Record's traffic only at the writer the record's own precondition
// observed (the seed's rule: advertise only the writer the topology
// confirms).
func (p Plan) Allows(r ledger.Record) bool {
	var params map[string]string
	if json.Unmarshal(r.Effect.Params, &params) != nil {
		return false
	}
	switch r.Effect.Kind {
	case devprovider.KindPromote:
		return r.Effect.Target == p.To && params["target"] == p.To
	case devprovider.KindDNS:
		return r.Effect.Target == p.Record && r.Precondition.Digest == devprovider.Digest(params["value"])
	}
	return false
}
