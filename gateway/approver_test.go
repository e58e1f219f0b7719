package gateway_test

import (
	"testing"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// Authorize is idempotent through the gateway: an approval whose answer
// was lost (outcome_unknown) is retried as the hint says, and the retry —
// the same approver, digests and policy, stamped at another time by the
// gateway — answers the record it authorized, writing nothing more.
// Another approval of the AUTHORIZED record is still refused.
func TestARetriedAuthorizeWhoseAnswerWasLostIsTheSameApproval(t *testing.T) {
	w := newWorld(t)
	good := w.replica()
	lossy := w.replicaWrapped(dropAnswers("/leasegate.v1.ApproverService/Authorize"))
	ctx := lgtest.Ctx(t)
	_, rec := proposed(t, w, good, "task-1", "op-1")
	a := ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Note: "checked the topology"}

	_, err := w.client(lossy, "approver").Authorize(ctx, tenant, "task-1", "op-1", a)
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
	var got ledger.Record
	lgtest.WritesNothing(t, w.etcd, coordinator.DefaultPrefix, "the retry of an applied approval", func() {
		got, err = w.client(good, "approver").Authorize(ctx, tenant, "task-1", "op-1", a)
		if err != nil || got.State != ledger.Authorized {
			t.Fatalf("the retried Authorize: %v, %s; want the AUTHORIZED record", err, got.State)
		}
	})
	_, journal, err := w.clientWith(good, "approver", client.WithReadsAs("approver")).Record(ctx, tenant, "task-1", "op-1")
	if err != nil || len(journal) != 2 || journal[1].To != ledger.Authorized || journal[1].Approver != w.certs.IDs["approver"] {
		t.Fatalf("journal %+v (%v): want PROPOSED then one AUTHORIZED by the approver", journal, err)
	}
	a.PreconditionDigest = "writer=db-9"
	lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.IllegalTransition, func() error {
		_, err := w.client(good, "approver").Authorize(ctx, tenant, "task-1", "op-1", a)
		return err
	})
}
