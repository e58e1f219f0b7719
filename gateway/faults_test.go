package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/internal/store"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// authorized claims task for worker-a through r, proposes a DNS change and
// has the approver authorize it.
func authorized(t *testing.T, w *world, r *replica, task, operation string) coordinator.Grant {
	t.Helper()
	g, rec := proposed(t, w, r, task, operation)
	if _, err := w.client(r, "approver").Authorize(lgtest.Ctx(t), tenant, task, operation, ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Note: ""}); err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	return g
}

// waitRecord waits, on an etcd watch, until the operation's record is in
// state want, and returns it.
func waitRecord(t *testing.T, w *world, c *coordinator.Coordinator, task, operation string, want ...ledger.State) ledger.Record {
	t.Helper()
	ctx := lgtest.Ctx(t)
	key := store.Of(c).Keys().Effect(tenant, task, operation)
	for {
		resp, err := w.etcd.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var rec ledger.Record
		if len(resp.Kvs) == 1 {
			if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(want, rec.State) {
				return rec
			}
		}
		wctx, cancel := context.WithCancel(ctx)
		wch := w.etcd.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1))
		select {
		case <-wch:
		case <-ctx.Done():
			cancel()
			t.Fatalf("record %s/%s never reached %s (last %s)", task, operation, want, rec.State)
		}
		cancel()
	}
}

// A worker that disconnects mid-dispatch does not take the dispatch with
// it: the gateway finishes the provider call and records its answer.
func TestAWorkerDisconnectingMidDispatchLeavesItRecorded(t *testing.T) {
	w := newWorld(t)
	gone := make(chan struct{}) // the gateway saw the worker's call end
	r := w.replicaWrapped(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/leasegate.v1.WorkerService/Dispatch" {
				go func() { <-req.Context().Done(); close(gone) }()
			}
			next.ServeHTTP(rw, req)
		})
	})
	g := authorized(t, w, r, "task-1", "op-1")
	entered, release := make(chan struct{}), make(chan struct{})
	w.provider.BeforeApply = func(ctx context.Context, _ string) {
		close(entered)
		select { // a call tied to the worker's context would end here
		case <-release:
		case <-ctx.Done():
		}
	}
	ctx, cancel := context.WithCancel(lgtest.Ctx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := w.client(r, "worker-a").Dispatch(ctx, g, "op-1")
		errc <- err
	}()
	lgtest.Wait(t, entered, "the provider call")
	cancel() // the worker goes away with the call in flight
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call answered")
	}
	lgtest.Wait(t, gone, "the gateway seeing the call end")
	close(release)
	rec := waitRecord(t, w, r.c, "task-1", "op-1", ledger.Confirmed, ledger.Unknown)
	if rec.State != ledger.Confirmed {
		t.Fatalf("the dispatch ended %s, want CONFIRMED: the provider call went with the worker's call", rec.State)
	}
	if rec.Evidence == nil || len(rec.Evidence.ProviderIDs) == 0 {
		t.Fatalf("confirmed without evidence: %+v", rec)
	}
	if got := w.provider.Record("checkout.example"); got != "db-2" {
		t.Fatalf("provider record %q, want db-2", got)
	}
}

// A replica killed with a dispatch in flight leaves it DISPATCHING; the
// next owner's Reconcile through another replica settles it, under the
// same operation id.
func TestAReplicaKilledMidDispatchIsSettledThroughAnother(t *testing.T) {
	w := newWorld(t)
	a, b := w.replica(), w.replica()
	g := authorized(t, w, a, "task-1", "op-1")
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w.provider.BeforeApply = func(ctx context.Context, _ string) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(entered)
			<-release // replica a never gets past here while the test runs
		}
	}
	t.Cleanup(func() { close(release) }) // before a's server is closed
	go func() { _, _ = w.client(a, "worker-a").Dispatch(context.Background(), g, "op-1") }()
	lgtest.Wait(t, entered, "the provider call through replica a")
	// Kill replica a: its callers and its etcd client are cut off, so
	// nothing it does from now on reaches either.
	a.ts.CloseClientConnections()
	if err := a.etcd.Close(); err != nil {
		t.Logf("closing a's etcd client: %v", err)
	}
	waitRecord(t, w, b.c, "task-1", "op-1", ledger.Dispatching)

	ctx := lgtest.Ctx(t)
	// worker-a is gone too: an operator revokes its lease through b.
	if _, err := w.client(b, "operator").RevokeLease(ctx, g.Lease); err != nil {
		t.Fatalf("RevokeLease: %v", err)
	}
	lgtest.WaitOwnerGone(t, b.c, tenant, "task-1")
	wb := w.client(b, "worker-b")
	s := w.session(wb, 10*time.Second)
	g2 := claim(t, s, tenant, "task-1")
	recs, err := wb.Reconcile(ctx, g2)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if len(recs) != 1 || recs[0].State != ledger.Authorized {
		t.Fatalf("reconciled %+v, want the record AUTHORIZED again (the provider never applied it)", recs)
	}
	rec, err := wb.Dispatch(ctx, g2, "op-1")
	if err != nil || rec.State != ledger.Confirmed {
		t.Fatalf("Dispatch through b: %v, state %s", err, rec.State)
	}
	calls := w.provider.Calls()
	if len(calls) != 2 || calls[0].Operation != "op-1" || calls[1].Operation != "op-1" || calls[0].Epoch != g.Epoch || calls[1].Epoch != g2.Epoch {
		t.Fatalf("provider calls %+v, want op-1 at epoch %d then %d", calls, g.Epoch, g2.Epoch)
	}
}

// A lease lives only as long as its worker renews it: the gateway keeps
// no lease alive on its own.
func TestALeaseLivesOnlyOnItsWorkersRenewals(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	wa := w.client(r, "worker-a")

	t.Run("a worker that stops talking loses its lease at its TTL", func(t *testing.T) {
		s := w.session(wa, 2*time.Second)
		g := claim(t, s, tenant, "quiet")
		lgtest.WaitOwnerGone(t, r.c, tenant, "quiet")
		lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.ExpiredOwner, func() error {
			_, err := wa.Commit(ctx, g, fencedtxn.Intent{Tenant: tenant, Task: "quiet", Operation: "c-1", Value: []byte("late")})
			return err
		})
	})
	t.Run("a worker that renews keeps it", func(t *testing.T) {
		s := w.session(wa, 2*time.Second, client.WithKeepAlive())
		g := claim(t, s, tenant, "chatty")
		<-time.After(3 * s.TTL()) // the time passing is what is tested
		if _, err := wa.Commit(ctx, g, fencedtxn.Intent{Tenant: tenant, Task: "chatty", Operation: "c-1", Value: []byte("on time")}); err != nil {
			t.Fatalf("commit after 3 TTLs of renewals: %v", err)
		}
	})
	t.Run("a renewal's deadline counts from its send, not its slow answer", func(t *testing.T) {
		slow := w.replicaWrapped(delayAnswers("/leasegate.v1.WorkerService/RenewSession", time.Second))
		s := w.session(w.client(slow, "worker-a"), 5*time.Second)
		before := time.Now()
		if err := s.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		margin := max(s.TTL()/10, gateway.DefaultMargin)
		if d := s.Deadline(); d.After(after.Add(s.TTL()-margin-900*time.Millisecond)) || d.Before(before.Add(s.TTL()-margin)) {
			t.Fatalf("deadline %v: want send time + ttl - margin (%v), the answer came %v later", d, before.Add(s.TTL()-margin), after.Sub(before))
		}
	})
}

// Bad input is refused as invalid_argument with the disposition, and
// writes nothing: unknown fields (JSON and binary), JSON that does not parse
// or has a value of the wrong type, an oversized request, a bad label.
func TestBadInputIsInvalidArgumentWritingNothing(t *testing.T) {
	w := newWorld(t)
	r := w.replica(gateway.WithMaxMessageBytes(4096))
	hc := w.httpClient("worker-a")
	post := func(procedure, body string) error {
		resp, err := hc.Post(r.ts.URL+"/leasegate.v1.WorkerService/"+procedure, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400: %s", procedure, resp.StatusCode, b)
		}
		var body2 struct {
			Code    string `json:"code"`
			Details []struct {
				Debug struct{ Disposition string } `json:"debug"`
			} `json:"details"`
		}
		_ = json.Unmarshal(b, &body2)
		if body2.Code != "invalid_argument" || len(body2.Details) != 1 {
			t.Errorf("%s: body %s, want invalid_argument with a refusal", procedure, b)
			return nil
		}
		return store.NewError(coordinator.Disposition(body2.Details[0].Debug.Disposition), "", "", "", "", nil)
	}
	prefix := coordinator.DefaultPrefix
	lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
		return post("OpenSession", `{"ttl":"5s","ttlSeconds":5}`)
	})
	lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
		return post("Commit", `{"grant":{"tenant":"tenant-a","task":"t","owner":"x","epoch":"1","lease":"1","realm":"r"},"value":"`+strings.Repeat("A", 8000)+`"}`)
	})
	lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
		return post("GetState", `{"tenant":"tenant a","task":"t"}`)
	})
	lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
		return post("OpenSession", `{"ttl":"5s"`) // cut short
	})
	lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
		return post("OpenSession", `{"ttl":5}`) // a Duration is a string
	})
	s := w.session(w.client(r, "worker-a"), 5*time.Second)
	lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
		return post("Claim", `{"sessionToken":"`+s.Token()+`","tenant":"tenant-a","task":"has space"}`)
	})
	// The binary codec keeps unknown fields: the gateway refuses them.
	var buf bytes.Buffer
	buf.Write([]byte{0x0a, 0x02, 0x08, 0x05}) // ttl {seconds: 5}
	buf.Write(unknownField)
	req, _ := http.NewRequest(http.MethodPost, r.ts.URL+"/leasegate.v1.WorkerService/OpenSession", &buf)
	req.Header.Set("Content-Type", "application/proto")
	lgtest.RefusedWritingNothing(t, w.etcd, prefix, coordinator.InvalidInput, func() error {
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("binary request with an unknown field: HTTP %d, want 400", resp.StatusCode)
		}
		return store.NewError(coordinator.InvalidInput, "", "", "", "", nil)
	})
}

// unknownField is field 99 (varint 1): no message of the API has it.
var unknownField = []byte{0x98, 0x06, 0x01}

// etcd unreachable is a hold (Unavailable), never a refusal.
func TestEtcdUnreachableIsAHold(t *testing.T) {
	w := newWorld(t)
	r := w.replica(gateway.WithCallTimeout(2 * time.Second))
	wa := w.client(r, "worker-a")
	s := w.session(wa, 10*time.Second)
	g := claim(t, s, tenant, "task-1")
	if err := w.cl.Member(0).Halt(); err != nil {
		t.Fatal(err)
	}
	lgtest.WaitDisconnected(t, r.etcd)
	ctx := lgtest.Ctx(t)
	start := time.Now()
	_, err := wa.Get(ctx, tenant, "task-1")
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
	t.Logf("get: %v after %v", err, time.Since(start))
	start = time.Now()
	_, err = wa.Commit(ctx, g, fencedtxn.Intent{Tenant: tenant, Task: "task-1", Operation: "c-1", Value: []byte("x")})
	t.Logf("commit: %v after %v", err, time.Since(start))
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
}

// Over the hop to the gateway: a call that never left is a hold; a write
// whose answer was lost is outcome_unknown, and its retry with the same
// operation id learns the outcome.
func TestTheHopKeepsHoldAndUnknownApart(t *testing.T) {
	w := newWorld(t)
	good := w.replica()
	lossy := w.replicaWrapped(dropAnswers("/leasegate.v1.WorkerService/Commit", "/leasegate.v1.WorkerService/GetState"))
	ctx := lgtest.Ctx(t)
	s := w.session(w.client(good, "worker-a"), 10*time.Second)
	g := claim(t, s, tenant, "task-1")
	in := fencedtxn.Intent{Tenant: tenant, Task: "task-1", Operation: "c-1", Value: []byte("x")}

	_, err := w.client(lossy, "worker-a").Commit(ctx, g, in)
	lgtest.Want(t, err, coordinator.OutcomeUnknown)
	_, err = w.client(lossy, "worker-a").Get(ctx, tenant, "task-1") // a read changed nothing
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
	rc, err := w.client(good, "worker-a").Commit(ctx, g, in)
	if err != nil || rc.Disposition != coordinator.HistoricalRetry {
		t.Fatalf("retry of the lost commit: %v, %s; want historical_retry (it had applied)", err, rc.Disposition)
	}

	down := w.replica()
	dc := w.client(down, "worker-a")
	down.ts.Close()
	lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.AuthorityUnavailable, func() error {
		_, err := dc.Commit(ctx, g, fencedtxn.Intent{Tenant: tenant, Task: "task-1", Operation: "c-2", Value: []byte("y"), ExpectedVersion: 1})
		return err
	})
}

// delayAnswers holds the answers to procedure for d after the gateway
// handled the call (a slow network back to the worker).
func delayAnswers(procedure string, d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			if req.URL.Path != procedure {
				next.ServeHTTP(rw, req)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, req)
			<-time.After(d)
			for k, v := range rec.Header() {
				rw.Header()[k] = v
			}
			rw.WriteHeader(rec.Code)
			_, _ = rw.Write(rec.Body.Bytes())
		})
	}
}

// dropAnswers runs the gateway's handler for the procedures and then drops the
// connection instead of answering: the call applied, its answer is lost.
func dropAnswers(procedures ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			if !slices.Contains(procedures, req.URL.Path) {
				next.ServeHTTP(rw, req)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), req.WithContext(req.Context()))
			panic(http.ErrAbortHandler)
		})
	}
}

// The KeepAlive stream renews once per message the worker sends, and never
// on its own: a stream left open with no messages does not keep the lease.
func TestKeepAliveRenewsOnlyPerMessage(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	s := w.session(w.client(r, "worker-a"), 2*time.Second)
	claim(t, s, tenant, "streamed")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: w.tlsOf("worker-a"), ForceAttemptHTTP2: true}}
	stream, err := leasegatev1connect.NewWorkerServiceClient(hc, r.ts.URL, connect.WithGRPC()).KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	token := s.Token()
	var last time.Time
	for range 3 {
		if err := stream.Send(&leasegatev1.KeepAliveRequest{SessionToken: token}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Receive()
		if err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
		d := resp.GetRenewal().GetDeadline().AsTime()
		if !d.After(last) {
			t.Fatalf("deadline %v did not move past %v", d, last)
		}
		last, token = d, resp.GetRenewal().GetToken()
		<-time.After(time.Second) // longer than half the TTL between renewals
	}
	// The stream stays open; nothing more is sent: the lease runs out.
	lgtest.WaitOwnerGone(t, r.c, tenant, "streamed")
	_ = stream.CloseRequest()
	_ = stream.CloseResponse()
}
