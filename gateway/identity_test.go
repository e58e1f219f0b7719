package gateway_test

import (
	"encoding/json"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/internal/lgtest"
	"github.com/leasegate/leasegate/ledger"
)

// proposed claims task for worker-a through r and proposes a DNS change,
// returning the grant and the record.
func proposed(t *testing.T, w *world, r *replica, task, operation string) (coordinator.Grant, ledger.Record) {
	t.Helper()
	wa := w.client(r, "worker-a")
	s := w.session(wa, 10*time.Second)
	g := claim(t, s, tenant, task)
	rec, err := wa.Propose(lgtest.Ctx(t), g, operation,
		ledger.Effect{Kind: devprovider.KindDNS, Target: "checkout.example", Params: json.RawMessage(`{"value":"db-2"}`), Policy: "v1"},
		ledger.Observation{Digest: devprovider.Digest("db-1"), At: time.Now()})
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	return g, rec
}

func TestCallersAreRefusedWritingNothing(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	g, rec := proposed(t, w, r, "task-1", "op-1")
	prefix := coordinator.DefaultPrefix
	ctx := lgtest.Ctx(t)

	t.Run("an impostor worker commits with another worker's grant", func(t *testing.T) {
		wb := w.client(r, "worker-b")
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			_, err := wb.Commit(ctx, g, fencedtxn.Intent{Tenant: tenant, Task: "task-1", Operation: "c-1", Value: []byte("x")})
			return err
		})
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			_, err := wb.Dispatch(ctx, g, "op-1")
			return err
		})
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			return wb.Release(ctx, g)
		})
	})
	t.Run("an impostor worker claims under another worker's session", func(t *testing.T) {
		s := w.session(w.client(r, "worker-a"), 10*time.Second)
		// worker-b presents worker-a's token: the session is bound to worker-a.
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			_, err := w.rawWorker(r, "worker-b").Claim(ctx, &leasegatev1.ClaimRequest{SessionToken: s.Token(), Tenant: tenant, Task: "task-2"})
			return asRefusal(err)
		})
	})
	t.Run("a worker authorizes", func(t *testing.T) {
		wa := w.client(r, "worker-a")
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			_, err := wa.Authorize(ctx, tenant, "task-1", "op-1", ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Note: ""})
			return err
		})
	})
	t.Run("a worker of another tenant", func(t *testing.T) {
		wo := w.client(r, "worker-other")
		s := w.session(wo, 10*time.Second)
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			_, err := s.Claim(ctx, tenant, "task-3")
			return err
		})
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			_, err := wo.Get(ctx, tenant, "task-1")
			return err
		})
	})
	t.Run("an approver of another tenant's task", func(t *testing.T) {
		ap := w.client(r, "approver")
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			_, err := ap.Authorize(ctx, otherTenant, "task-1", "op-1", ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Note: ""})
			return err
		})
	})
	t.Run("no certificate", func(t *testing.T) {
		anon := w.client(r, "")
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.Unauthenticated, func() error {
			_, err := anon.OpenSession(ctx, 10*time.Second)
			return err
		})
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.Unauthenticated, func() error {
			_, err := anon.Commit(ctx, g, fencedtxn.Intent{Tenant: tenant, Task: "task-1", Operation: "c-1", Value: []byte("x")})
			return err
		})
	})
	t.Run("a certificate the configuration does not name", func(t *testing.T) {
		st := w.client(r, "stranger")
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.Unauthenticated, func() error {
			_, err := st.OpenSession(ctx, 10*time.Second)
			return err
		})
	})
	t.Run("a worker rotating the realm", func(t *testing.T) {
		wa := w.client(r, "worker-a")
		lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.PermissionDenied, func() error {
			_, err := wa.RotateRealm(ctx)
			return err
		})
	})
}

// The journal records the approver from its certificate, and only an
// approver's call can authorize.
func TestApprovalRecordsTheCertificateIdentity(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	g, rec := proposed(t, w, r, "task-1", "op-1")
	ctx := lgtest.Ctx(t)
	ap := w.client(r, "approver")
	// An approval under another policy version than the effect's is refused.
	lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.OperationConflict, func() error {
		_, err := ap.Authorize(ctx, tenant, "task-1", "op-1", ledger.Approval{ParamsDigest: rec.ParamsDigest,
			PreconditionDigest: rec.Precondition.Digest, Policy: "v0"})
		return err
	})
	out, err := ap.Authorize(ctx, tenant, "task-1", "op-1", ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Note: "looks right"})
	if err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	if out.State != ledger.Authorized || out.Approval == nil || out.Approval.Approver != w.certs.IDs["approver"] || out.Approval.Policy != "v1" {
		t.Fatalf("authorized record %+v, want AUTHORIZED by %s", out, w.certs.IDs["approver"])
	}
	wa := w.client(r, "worker-a")
	done, err := wa.Dispatch(ctx, g, "op-1")
	if err != nil || done.State != ledger.Confirmed {
		t.Fatalf("Dispatch: %v, state %s", err, done.State)
	}
	_, journal, err := wa.Record(ctx, tenant, "task-1", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	var approvers []string
	for _, tr := range journal {
		if tr.To == ledger.Authorized {
			approvers = append(approvers, tr.Approver)
		}
	}
	if len(approvers) != 1 || approvers[0] != w.certs.IDs["approver"] {
		t.Fatalf("journal approvers %v, want [%s]", approvers, w.certs.IDs["approver"])
	}
	if got := w.provider.Record("checkout.example"); got != "db-2" {
		t.Fatalf("provider record %q, want db-2", got)
	}
}
