package gateway_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// effectDigest is docs/ledger.md's effect digest, written from the doc
// alone as a client in another language would: SHA-256 over the tag, kind,
// target, canonical params and policy, each prefixed by its length as 8
// bytes big-endian. A record's params_json is already canonical.
func effectDigest(e *leasegatev1.Effect) string {
	h := sha256.New()
	for _, f := range []string{"leasegate-effect-v1", e.GetKind(), e.GetTarget(), e.GetParamsJson(), e.GetPolicy()} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// An approver reads the record it approves — the effect, its parameters,
// the precondition and when it was observed, the journal — from the
// gateway, with no worker role; it recomputes the parameters' digest from
// the record by the documented layout and approves exactly that digest.
// An operator of the tenant reads it too.
func TestAnApproverReadsWhatItApprovesAndApprovesThatDigest(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	g, _ := proposed(t, w, r, "task-1", "op-1")
	wa := w.client(r, "worker-a")
	other, err := wa.Propose(ctx, g, "op-2", ledger.Effect{Kind: devprovider.KindDNS, Target: "checkout.example",
		Params: json.RawMessage(`{"value":"db-3"}`), Policy: "v1"}, ledger.Observation{Digest: devprovider.Digest("db-1"), At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	ap := leasegatev1connect.NewApproverServiceClient(w.httpClient("approver"), r.ts.URL)
	op := leasegatev1connect.NewOperatorServiceClient(w.httpClient("operator"), r.ts.URL)

	got, err := ap.GetRecord(ctx, &leasegatev1.GetRecordRequest{Tenant: tenant, Task: "task-1", Operation: "op-1"})
	if err != nil {
		t.Fatalf("GetRecord by the approver: %v", err)
	}
	rec := got.GetRecord()
	if rec.GetState() != "PROPOSED" || rec.GetPrecondition().GetDigest() != devprovider.Digest("db-1") ||
		rec.GetPrecondition().GetObservedAt() == nil || len(got.GetJournal()) != 1 {
		t.Fatalf("the approver read %v with journal %v; want the PROPOSED record, its precondition and observation time, its journal", rec, got.GetJournal())
	}
	d := effectDigest(rec.GetEffect())
	if d != rec.GetParamsDigest() {
		t.Fatalf("the documented digest of the record's effect is %s; the record says %s", d, rec.GetParamsDigest())
	}
	list, err := ap.ListRecords(ctx, &leasegatev1.ListRecordsRequest{Tenant: tenant, Task: "task-1", State: "PROPOSED"})
	if err != nil || len(list.GetRecords()) != 2 {
		t.Fatalf("ListRecords by the approver: %v, %d records; want both proposals", err, len(list.GetRecords()))
	}
	if _, err := op.GetRecord(ctx, &leasegatev1.GetRecordRequest{Tenant: tenant, Task: "task-1", Operation: "op-1"}); err != nil {
		t.Fatalf("GetRecord by an operator of every tenant: %v", err)
	}
	if l, err := op.ListRecords(ctx, &leasegatev1.ListRecordsRequest{}); err != nil || len(l.GetRecords()) != 2 {
		t.Fatalf("ListRecords of every tenant by an operator of every tenant: %v, %d records", err, len(l.GetRecords()))
	}

	// The digest read from op-1 does not approve op-2, whose parameters
	// differ: refused, nothing written.
	lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.OperationConflict, func() error {
		_, err := ap.Authorize(ctx, &leasegatev1.AuthorizeRequest{Tenant: tenant, Task: "task-1", Operation: "op-2",
			ParamsDigest: d, PreconditionDigest: other.Precondition.Digest})
		return asRefusal(err)
	})
	a, err := ap.Authorize(ctx, &leasegatev1.AuthorizeRequest{Tenant: tenant, Task: "task-1", Operation: "op-1",
		ParamsDigest: d, PreconditionDigest: rec.GetPrecondition().GetDigest()})
	if err != nil || a.GetRecord().GetState() != "AUTHORIZED" || a.GetRecord().GetApproval().GetParamsDigest() != d {
		t.Fatalf("Authorize of the digest read: %v, %v", err, a.GetRecord())
	}
}
