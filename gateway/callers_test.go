package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/api/wire"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// hostile is one call a caller may not make, and how it is refused.
type hostile struct {
	procedure string // the API's procedure it calls
	name      string
	want      coordinator.Disposition
	call      func(ctx context.Context) error
}

// Every procedure of the API refuses the callers it must, writing nothing:
// a worker using another worker's session or grant, or one forged with its
// own name on another worker's claim (as GetOwnership shows epoch and
// lease), or a tampered session token; a caller of another tenant, of
// another role, or of some tenants only where a call needs all; an
// operator revoking a lease that is not a leasegate lease. The list of
// procedures is the API's own: a procedure without a row fails the test.
func TestEveryProcedureRefusesAHostileCaller(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)

	// worker-a holds tenant-a/task-1 with a proposal; worker-other holds
	// tenant-b/task-x.
	wa := w.client(r, "worker-a")
	sa := w.session(wa, 30*time.Second)
	g := claim(t, sa, tenant, "task-1")
	effect := ledger.Effect{Kind: devprovider.KindDNS, Target: "checkout.example", Params: json.RawMessage(`{"value":"db-2"}`), Policy: "v1"}
	pre := ledger.Observation{Digest: devprovider.Digest("db-1"), At: time.Now()}
	rec, err := wa.Propose(ctx, g, "op-1", effect, pre)
	if err != nil {
		t.Fatal(err)
	}
	// A session of worker-a's that holds no task: its lease names no tenant.
	idle := w.session(wa, 30*time.Second)
	so := w.session(w.client(r, "worker-other"), 30*time.Second)
	gOther := claim(t, so, otherTenant, "task-x")

	// A grant naming worker-b on worker-a's claim: owner label, epoch and
	// lease are all a worker of the tenant can read.
	forged := g
	forged.Owner = w.certs.IDs["worker-b"]
	// A grant naming worker-other on worker-a's claim, in worker-a's tenant.
	foreign := g
	foreign.Owner = w.certs.IDs["worker-other"]
	// worker-a's token with its owner rewritten to worker-b, signature kept.
	tampered := func() string {
		p, sig, _ := strings.Cut(sa.Token(), ".")
		raw, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		c["o"] = w.certs.IDs["worker-b"]
		raw, _ = json.Marshal(c)
		return base64.RawURLEncoding.EncodeToString(raw) + "." + sig
	}()
	// A lease of another application's, carrying a key outside the keyspace.
	bare, err := w.etcd.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.etcd.Put(ctx, "/another-app/lock", "x", clientv3.WithLease(bare.ID)); err != nil {
		t.Fatal(err)
	}

	wk := func(caller string) leasegatev1connect.WorkerServiceClient { return w.rawWorker(r, caller) }
	h2 := func(caller string) leasegatev1connect.WorkerServiceClient {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: w.tlsOf(caller), ForceAttemptHTTP2: true}}
		t.Cleanup(hc.CloseIdleConnections)
		return leasegatev1connect.NewWorkerServiceClient(hc, r.ts.URL, connect.WithGRPC())
	}
	ap := func(caller string) leasegatev1connect.ApproverServiceClient {
		return leasegatev1connect.NewApproverServiceClient(w.httpClient(caller), r.ts.URL)
	}
	op := func(caller string) leasegatev1connect.OperatorServiceClient {
		return leasegatev1connect.NewOperatorServiceClient(w.httpClient(caller), r.ts.URL)
	}
	pg := wire.GrantToProto
	lease := coordinator.FormatLeaseID(g.Lease)
	const (
		denied  = coordinator.PermissionDenied
		invalid = coordinator.InvalidInput
		stale   = coordinator.StaleOwner
	)
	authorize := &leasegatev1.AuthorizeRequest{Tenant: tenant, Task: "task-1", Operation: "op-1",
		ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest}
	resolve := &leasegatev1.ResolveRequest{Tenant: tenant, Task: "task-1", Operation: "op-1", To: "SUPERSEDED", Why: "w"}
	keepAlive := func(caller, token string) func(context.Context) error {
		return func(ctx context.Context) error {
			stream, err := h2(caller).KeepAlive(ctx)
			if err != nil {
				return asRefusal(err)
			}
			defer func() { _ = stream.CloseResponse() }()
			_ = stream.Send(&leasegatev1.KeepAliveRequest{SessionToken: token})
			_ = stream.CloseRequest()
			_, err = stream.Receive()
			return asRefusal(err)
		}
	}
	watch := func(caller, tenant string) func(context.Context) error {
		return func(ctx context.Context) error {
			stream, err := wk(caller).WatchOwnership(ctx, &leasegatev1.WatchOwnershipRequest{Tenant: tenant, MarkSynced: true})
			if err != nil {
				return asRefusal(err)
			}
			defer stream.Close()
			if stream.Receive() {
				return nil // a watch of it began: not refused
			}
			return asRefusal(stream.Err())
		}
	}
	// watchOf is watch through another service's client.
	watchOf := func(start func(context.Context) (*connect.ServerStreamForClient[leasegatev1.WatchOwnershipResponse], error)) func(context.Context) error {
		return func(ctx context.Context) error {
			stream, err := start(ctx)
			if err != nil {
				return asRefusal(err)
			}
			defer stream.Close()
			if stream.Receive() {
				return nil
			}
			return asRefusal(stream.Err())
		}
	}

	rows := []hostile{
		{leasegatev1connect.WorkerServiceOpenSessionProcedure, "without a certificate", coordinator.Unauthenticated, func(ctx context.Context) error {
			_, err := wk("").OpenSession(ctx, &leasegatev1.OpenSessionRequest{Ttl: wire.Dur(10 * time.Second)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceOpenSessionProcedure, "by an approver", denied, func(ctx context.Context) error {
			_, err := w.rawWorker(r, "approver").OpenSession(ctx, &leasegatev1.OpenSessionRequest{Ttl: wire.Dur(10 * time.Second)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceRenewSessionProcedure, "with another worker's token", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").RenewSession(ctx, &leasegatev1.RenewSessionRequest{SessionToken: sa.Token()})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceRenewSessionProcedure, "with a token rewritten to name the caller", invalid, func(ctx context.Context) error {
			_, err := wk("worker-b").RenewSession(ctx, &leasegatev1.RenewSessionRequest{SessionToken: tampered})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceKeepAliveProcedure, "with another worker's token", denied, keepAlive("worker-b", sa.Token())},
		{leasegatev1connect.WorkerServiceKeepAliveProcedure, "with a token rewritten to name the caller", invalid, keepAlive("worker-b", tampered)},
		{leasegatev1connect.WorkerServiceCloseSessionProcedure, "with another worker's token", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").CloseSession(ctx, &leasegatev1.CloseSessionRequest{SessionToken: sa.Token()})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceCloseSessionProcedure, "with a token rewritten to name the caller", invalid, func(ctx context.Context) error {
			_, err := wk("worker-b").CloseSession(ctx, &leasegatev1.CloseSessionRequest{SessionToken: tampered})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceClaimProcedure, "under another worker's session", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").Claim(ctx, &leasegatev1.ClaimRequest{SessionToken: sa.Token(), Tenant: tenant, Task: "task-2"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceClaimProcedure, "in another tenant", denied, func(ctx context.Context) error {
			_, err := wk("worker-a").Claim(ctx, &leasegatev1.ClaimRequest{SessionToken: sa.Token(), Tenant: otherTenant, Task: "task-2"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceClaimProcedure, "in another tenant spelt as a path", denied, func(ctx context.Context) error {
			_, err := wk("worker-a").Claim(ctx, &leasegatev1.ClaimRequest{SessionToken: sa.Token(), Tenant: tenant + "/../" + otherTenant, Task: "task-2"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceClaimProcedure, "in a tenant spelt with a look-alike letter", invalid, func(ctx context.Context) error {
			_, err := wk("worker-a").Claim(ctx, &leasegatev1.ClaimRequest{SessionToken: sa.Token(), Tenant: "tenant-\u0430", Task: "task-2"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceReleaseProcedure, "another worker's grant", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").Release(ctx, &leasegatev1.ReleaseRequest{Grant: pg(g)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceReleaseProcedure, "a grant forged with the caller's name", stale, func(ctx context.Context) error {
			_, err := wk("worker-b").Release(ctx, &leasegatev1.ReleaseRequest{Grant: pg(forged)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceRenewGrantProcedure, "another worker's grant", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").RenewGrant(ctx, &leasegatev1.RenewGrantRequest{Grant: pg(g)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceRenewGrantProcedure, "a grant forged with the caller's name", stale, func(ctx context.Context) error {
			_, err := wk("worker-b").RenewGrant(ctx, &leasegatev1.RenewGrantRequest{Grant: pg(forged)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceGetOwnershipProcedure, "of another tenant", denied, func(ctx context.Context) error {
			_, err := wk("worker-other").GetOwnership(ctx, &leasegatev1.GetOwnershipRequest{Tenant: tenant, Task: "task-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceListTasksProcedure, "of another tenant", denied, func(ctx context.Context) error {
			_, err := wk("worker-other").ListTasks(ctx, &leasegatev1.ListTasksRequest{Tenant: tenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceListTasksProcedure, "of every tenant by a worker of one", invalid, func(ctx context.Context) error {
			_, err := wk("worker-other").ListTasks(ctx, &leasegatev1.ListTasksRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceWatchOwnershipProcedure, "of another tenant", denied, watch("worker-other", tenant)},
		{leasegatev1connect.WorkerServiceWatchOwnershipProcedure, "of every tenant by a worker of one", invalid, watch("worker-other", "")},
		{leasegatev1connect.WorkerServiceCommitProcedure, "with another worker's grant", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").Commit(ctx, &leasegatev1.CommitRequest{Grant: pg(g), Operation: "c-1", Value: []byte("x")})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceCommitProcedure, "with a grant forged with the caller's name", stale, func(ctx context.Context) error {
			_, err := wk("worker-b").Commit(ctx, &leasegatev1.CommitRequest{Grant: pg(forged), Operation: "c-1", Value: []byte("x")})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceCommitProcedure, "with a grant forged in another tenant", denied, func(ctx context.Context) error {
			_, err := wk("worker-other").Commit(ctx, &leasegatev1.CommitRequest{Grant: pg(foreign), Operation: "c-1", Value: []byte("x")})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceGetStateProcedure, "of another tenant", denied, func(ctx context.Context) error {
			_, err := wk("worker-other").GetState(ctx, &leasegatev1.GetStateRequest{Tenant: tenant, Task: "task-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceProposeProcedure, "with another worker's grant", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").Propose(ctx, &leasegatev1.ProposeRequest{Grant: pg(g), Operation: "op-2",
				Effect: wire.EffectToProto(effect), Precondition: wire.ObservationToProto(pre)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceProposeProcedure, "with a grant forged with the caller's name", stale, func(ctx context.Context) error {
			_, err := wk("worker-b").Propose(ctx, &leasegatev1.ProposeRequest{Grant: pg(forged), Operation: "op-2",
				Effect: wire.EffectToProto(effect), Precondition: wire.ObservationToProto(pre)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceObservePreconditionProcedure, "with a grant forged with the caller's name", stale, func(ctx context.Context) error {
			_, err := wk("worker-b").ObservePrecondition(ctx, &leasegatev1.ObservePreconditionRequest{Grant: pg(forged), Effect: wire.EffectToProto(effect)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceDispatchProcedure, "with another worker's grant", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").Dispatch(ctx, &leasegatev1.DispatchRequest{Grant: pg(g), Operation: "op-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceDispatchProcedure, "with a grant forged with the caller's name", stale, func(ctx context.Context) error {
			_, err := wk("worker-b").Dispatch(ctx, &leasegatev1.DispatchRequest{Grant: pg(forged), Operation: "op-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceGetRecordProcedure, "of another tenant", denied, func(ctx context.Context) error {
			_, err := wk("worker-other").GetRecord(ctx, &leasegatev1.GetRecordRequest{Tenant: tenant, Task: "task-1", Operation: "op-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceListRecordsProcedure, "of another tenant", denied, func(ctx context.Context) error {
			_, err := wk("worker-other").ListRecords(ctx, &leasegatev1.ListRecordsRequest{Tenant: tenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceListRecordsProcedure, "of every tenant by a worker of one", invalid, func(ctx context.Context) error {
			_, err := wk("worker-other").ListRecords(ctx, &leasegatev1.ListRecordsRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceReconcileProcedure, "with another worker's grant", denied, func(ctx context.Context) error {
			_, err := wk("worker-b").Reconcile(ctx, &leasegatev1.ReconcileRequest{Grant: pg(g)})
			return asRefusal(err)
		}},
		{leasegatev1connect.WorkerServiceReconcileProcedure, "with a grant forged with the caller's name", stale, func(ctx context.Context) error {
			_, err := wk("worker-b").Reconcile(ctx, &leasegatev1.ReconcileRequest{Grant: pg(forged)})
			return asRefusal(err)
		}},

		{leasegatev1connect.ApproverServiceAuthorizeProcedure, "by the proposing worker", denied, func(ctx context.Context) error {
			_, err := ap("worker-a").Authorize(ctx, authorize)
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceAuthorizeProcedure, "by an operator", denied, func(ctx context.Context) error {
			_, err := ap("operator").Authorize(ctx, authorize)
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceAuthorizeProcedure, "in another tenant", denied, func(ctx context.Context) error {
			_, err := ap("approver").Authorize(ctx, &leasegatev1.AuthorizeRequest{Tenant: otherTenant, Task: "task-x", Operation: "op-1",
				ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceRejectProcedure, "by the proposing worker", denied, func(ctx context.Context) error {
			_, err := ap("worker-a").Reject(ctx, &leasegatev1.RejectRequest{Tenant: tenant, Task: "task-1", Operation: "op-1", Reason: "no"})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceRejectProcedure, "in another tenant", denied, func(ctx context.Context) error {
			_, err := ap("approver").Reject(ctx, &leasegatev1.RejectRequest{Tenant: otherTenant, Task: "task-x", Operation: "op-1", Reason: "no"})
			return asRefusal(err)
		}},

		{leasegatev1connect.ApproverServiceGetRecordProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := ap("worker-a").GetRecord(ctx, &leasegatev1.GetRecordRequest{Tenant: tenant, Task: "task-1", Operation: "op-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceGetRecordProcedure, "in another tenant", denied, func(ctx context.Context) error {
			_, err := ap("approver").GetRecord(ctx, &leasegatev1.GetRecordRequest{Tenant: otherTenant, Task: "task-x", Operation: "op-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceListRecordsProcedure, "by an operator", denied, func(ctx context.Context) error {
			_, err := ap("operator").ListRecords(ctx, &leasegatev1.ListRecordsRequest{Tenant: tenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceListRecordsProcedure, "in another tenant", denied, func(ctx context.Context) error {
			_, err := ap("approver").ListRecords(ctx, &leasegatev1.ListRecordsRequest{Tenant: otherTenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceListRecordsProcedure, "of every tenant, by an approver of one", invalid, func(ctx context.Context) error {
			_, err := ap("approver").ListRecords(ctx, &leasegatev1.ListRecordsRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceGetRecordProcedure, "by an approver", denied, func(ctx context.Context) error {
			_, err := op("approver").GetRecord(ctx, &leasegatev1.GetRecordRequest{Tenant: tenant, Task: "task-1", Operation: "op-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceGetRecordProcedure, "by an operator of another tenant", denied, func(ctx context.Context) error {
			_, err := op("operator-b").GetRecord(ctx, &leasegatev1.GetRecordRequest{Tenant: tenant, Task: "task-1", Operation: "op-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceListRecordsProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := op("worker-a").ListRecords(ctx, &leasegatev1.ListRecordsRequest{Tenant: tenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceListRecordsProcedure, "by an operator of another tenant", denied, func(ctx context.Context) error {
			_, err := op("operator-b").ListRecords(ctx, &leasegatev1.ListRecordsRequest{Tenant: tenant, Task: "task-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceListTasksProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := ap("worker-a").ListTasks(ctx, &leasegatev1.ListTasksRequest{Tenant: tenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceListTasksProcedure, "in another tenant", denied, func(ctx context.Context) error {
			_, err := ap("approver").ListTasks(ctx, &leasegatev1.ListTasksRequest{Tenant: otherTenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceListTasksProcedure, "of every tenant, by an approver of one", invalid, func(ctx context.Context) error {
			_, err := ap("approver").ListTasks(ctx, &leasegatev1.ListTasksRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceGetOwnershipProcedure, "by an operator", denied, func(ctx context.Context) error {
			_, err := ap("operator").GetOwnership(ctx, &leasegatev1.GetOwnershipRequest{Tenant: tenant, Task: "task-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceGetOwnershipProcedure, "in another tenant", denied, func(ctx context.Context) error {
			_, err := ap("approver").GetOwnership(ctx, &leasegatev1.GetOwnershipRequest{Tenant: otherTenant, Task: "task-x"})
			return asRefusal(err)
		}},
		{leasegatev1connect.ApproverServiceWatchOwnershipProcedure, "by a worker", denied, watchOf(func(ctx context.Context) (*connect.ServerStreamForClient[leasegatev1.WatchOwnershipResponse], error) {
			return ap("worker-a").WatchOwnership(ctx, &leasegatev1.WatchOwnershipRequest{Tenant: tenant, MarkSynced: true})
		})},
		{leasegatev1connect.ApproverServiceWatchOwnershipProcedure, "in another tenant", denied, watchOf(func(ctx context.Context) (*connect.ServerStreamForClient[leasegatev1.WatchOwnershipResponse], error) {
			return ap("approver").WatchOwnership(ctx, &leasegatev1.WatchOwnershipRequest{Tenant: otherTenant, MarkSynced: true})
		})},
		{leasegatev1connect.OperatorServiceListTasksProcedure, "by an approver", denied, func(ctx context.Context) error {
			_, err := op("approver").ListTasks(ctx, &leasegatev1.ListTasksRequest{Tenant: tenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceListTasksProcedure, "by an operator of another tenant", denied, func(ctx context.Context) error {
			_, err := op("operator-b").ListTasks(ctx, &leasegatev1.ListTasksRequest{Tenant: tenant})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceGetOwnershipProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := op("worker-a").GetOwnership(ctx, &leasegatev1.GetOwnershipRequest{Tenant: tenant, Task: "task-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceGetOwnershipProcedure, "by an operator of another tenant", denied, func(ctx context.Context) error {
			_, err := op("operator-b").GetOwnership(ctx, &leasegatev1.GetOwnershipRequest{Tenant: tenant, Task: "task-1"})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceWatchOwnershipProcedure, "by a worker", denied, watchOf(func(ctx context.Context) (*connect.ServerStreamForClient[leasegatev1.WatchOwnershipResponse], error) {
			return op("worker-a").WatchOwnership(ctx, &leasegatev1.WatchOwnershipRequest{Tenant: tenant, MarkSynced: true})
		})},
		{leasegatev1connect.OperatorServiceWatchOwnershipProcedure, "by an operator of another tenant", denied, watchOf(func(ctx context.Context) (*connect.ServerStreamForClient[leasegatev1.WatchOwnershipResponse], error) {
			return op("operator-b").WatchOwnership(ctx, &leasegatev1.WatchOwnershipRequest{Tenant: tenant, MarkSynced: true})
		})},

		{leasegatev1connect.OperatorServiceResolveProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := op("worker-a").Resolve(ctx, resolve)
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceResolveProcedure, "by an approver", denied, func(ctx context.Context) error {
			_, err := op("approver").Resolve(ctx, resolve)
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceResolveProcedure, "by an operator of another tenant", denied, func(ctx context.Context) error {
			_, err := op("operator-b").Resolve(ctx, resolve)
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceRevokeLeaseProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := op("worker-a").RevokeLease(ctx, &leasegatev1.RevokeLeaseRequest{Lease: lease})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceRevokeLeaseProcedure, "by an operator of some tenants", denied, func(ctx context.Context) error {
			_, err := op("operator-b").RevokeLease(ctx, &leasegatev1.RevokeLeaseRequest{Lease: coordinator.FormatLeaseID(gOther.Lease)})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceRevokeLeaseProcedure, "of another application's lease", invalid, func(ctx context.Context) error {
			_, err := op("operator").RevokeLease(ctx, &leasegatev1.RevokeLeaseRequest{Lease: coordinator.FormatLeaseID(int64(bare.ID))})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceListLeasesProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := op("worker-a").ListLeases(ctx, &leasegatev1.ListLeasesRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceListLeasesProcedure, "by an operator of some tenants", denied, func(ctx context.Context) error {
			_, err := op("operator-b").ListLeases(ctx, &leasegatev1.ListLeasesRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceShowLeaseProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := op("worker-a").ShowLease(ctx, &leasegatev1.ShowLeaseRequest{Lease: lease})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceShowLeaseProcedure, "of another tenant's lease", denied, func(ctx context.Context) error {
			_, err := op("operator-b").ShowLease(ctx, &leasegatev1.ShowLeaseRequest{Lease: lease})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceShowLeaseProcedure, "of a lease holding no task, by an operator of some tenants", denied, func(ctx context.Context) error {
			_, err := op("operator-b").ShowLease(ctx, &leasegatev1.ShowLeaseRequest{Lease: coordinator.FormatLeaseID(idle.Lease())})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceShowRealmProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := op("worker-a").ShowRealm(ctx, &leasegatev1.ShowRealmRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceShowRealmProcedure, "by an operator of some tenants", denied, func(ctx context.Context) error {
			_, err := op("operator-b").ShowRealm(ctx, &leasegatev1.ShowRealmRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceRotateRealmProcedure, "by a worker", denied, func(ctx context.Context) error {
			_, err := op("worker-a").RotateRealm(ctx, &leasegatev1.RotateRealmRequest{})
			return asRefusal(err)
		}},
		{leasegatev1connect.OperatorServiceRotateRealmProcedure, "by an operator of some tenants", denied, func(ctx context.Context) error {
			_, err := op("operator-b").RotateRealm(ctx, &leasegatev1.RotateRealmRequest{})
			return asRefusal(err)
		}},
	}
	// A row whose check, if it failed, would end worker-a's claim (a
	// release, a session closed) runs last: every other row meets the claim
	// live, and is refused by its own check, not by a claim already gone.
	ends := func(h hostile) bool {
		return h.procedure == leasegatev1connect.WorkerServiceReleaseProcedure || h.procedure == leasegatev1connect.WorkerServiceCloseSessionProcedure
	}
	slices.SortStableFunc(rows, func(a, b hostile) int {
		switch {
		case ends(a) == ends(b):
			return 0
		case ends(a):
			return 1
		}
		return -1
	})
	covered := map[string]bool{}
	for _, h := range rows {
		covered[h.procedure] = true
		t.Run(strings.TrimPrefix(h.procedure, "/leasegate.v1.")+" "+h.name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, h.want, func() error { return h.call(ctx) })
		})
	}
	svcs := leasegatev1.File_leasegate_v1_leasegate_proto.Services()
	for i := range svcs.Len() {
		for j := range svcs.Get(i).Methods().Len() {
			if p := "/" + string(svcs.Get(i).FullName()) + "/" + string(svcs.Get(i).Methods().Get(j).Name()); !covered[p] {
				t.Errorf("%s has no hostile caller in this test", p)
			}
		}
	}
	// Nothing refused was done: worker-a's session and grant still hold,
	// and the other application's lease and key are still there.
	if err := r.c.Current(ctx, g); err != nil {
		t.Fatalf("worker-a's grant after the refusals: %v", err)
	}
	if ttl, err := w.etcd.TimeToLive(ctx, bare.ID); err != nil || ttl.TTL <= 0 {
		t.Fatalf("the other application's lease after the refusals: %+v, %v", ttl, err)
	}
}
