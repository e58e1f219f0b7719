package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
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

// lostAnswers is a provider whose every answer is lost and whose world
// cannot tell what happened: a dispatch to it ends UNKNOWN, and a
// reconcile MANUAL_REVIEW, for an operator to resolve.
type lostAnswers struct{}

const kindLost = "test.lost"

func (lostAnswers) Kind() string              { return kindLost }
func (lostAnswers) Contract() ledger.Contract { return ledger.Contract{} }
func (lostAnswers) Precondition(context.Context, ledger.Effect) (ledger.Observation, error) {
	return ledger.Observation{Digest: "world-1", At: time.Now()}, nil
}
func (lostAnswers) Apply(context.Context, ledger.Call) (ledger.Evidence, error) {
	return ledger.Evidence{}, ledger.Ambiguous(context.DeadlineExceeded)
}
func (lostAnswers) Observe(context.Context, ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	return ledger.Inconclusive, ledger.Evidence{}, nil
}

// A rejection and a resolution are journaled with the caller's
// certificate identity, as an approval is; no request field can name
// another (a request that tries is refused as a field the API does not
// have, nothing written).
func TestDecisionsRecordTheCallersCertificateIdentity(t *testing.T) {
	w := newWorld(t)
	r := w.replica(gateway.WithAdapters(lostAnswers{}))
	ctx := lgtest.Ctx(t)
	wa, ap, op := w.client(r, "worker-a"), w.client(r, "approver"), w.client(r, "operator")
	g := claim(t, w.session(wa, 30*time.Second), tenant, "task-1")
	pre := ledger.Observation{Digest: "world-1", At: time.Now()}
	propose := func(operation string) ledger.Record {
		t.Helper()
		rec, err := wa.Propose(ctx, g, operation, ledger.Effect{Kind: kindLost, Target: "x", Params: json.RawMessage(`{"v":1}`), Policy: "v1"}, pre)
		if err != nil {
			t.Fatalf("Propose %s: %v", operation, err)
		}
		return rec
	}
	last := func(operation string) ledger.Transition {
		t.Helper()
		_, journal, err := wa.Record(ctx, tenant, "task-1", operation)
		if err != nil || len(journal) == 0 {
			t.Fatalf("Record %s: %v, journal %v", operation, err, journal)
		}
		return journal[len(journal)-1]
	}

	propose("op-rejected")
	if _, err := ap.Reject(ctx, tenant, "task-1", "op-rejected", "not now"); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	if tr := last("op-rejected"); tr.To != ledger.Rejected || !strings.Contains(tr.Reason, "rejected by "+w.certs.IDs["approver"]+":") {
		t.Fatalf("the rejection's journal entry %+v does not name the approver %s", tr, w.certs.IDs["approver"])
	}

	rec := propose("op-lost")
	if _, err := ap.Authorize(ctx, tenant, "task-1", "op-lost", ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest}); err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	if out, err := wa.Dispatch(ctx, g, "op-lost"); err != nil || out.State != ledger.Unknown {
		t.Fatalf("Dispatch: %v, %+v", err, out)
	}
	if recs, err := wa.Reconcile(ctx, g); err != nil || len(recs) != 1 || recs[0].State != ledger.ManualReview {
		t.Fatalf("Reconcile: %v, %+v", err, recs)
	}
	// The approver's name in a request field: a field the API does not have.
	hc := w.httpClient("operator")
	lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.InvalidInput, func() error {
		body := `{"tenant":"` + tenant + `","task":"task-1","operation":"op-lost","to":"SUPERSEDED","why":"w","approver":"someone-else"}`
		resp, err := hc.Post(r.ts.URL+leasegatev1connect.OperatorServiceResolveProcedure, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var e struct {
			Details []struct {
				Debug struct{ Disposition string } `json:"debug"`
			} `json:"details"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || len(e.Details) != 1 {
			t.Fatalf("HTTP %d: no refusal (%v)", resp.StatusCode, err)
		}
		return store.NewError(coordinator.Disposition(e.Details[0].Debug.Disposition), "", "", "", "", nil)
	})
	if _, err := op.Resolve(ctx, tenant, "task-1", "op-lost", ledger.Superseded, ledger.Evidence{}, "the provider shows nothing; a new operation will redo it"); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if tr := last("op-lost"); tr.To != ledger.Superseded || tr.Approver != w.certs.IDs["operator"] || !strings.Contains(tr.Reason, "resolved by "+w.certs.IDs["operator"]+":") {
		t.Fatalf("the resolution's journal entry %+v does not name the operator %s", tr, w.certs.IDs["operator"])
	}
}

// A grant forged with a later epoch than the authority published is
// stale_owner, and its detail names both ways it can come about — forged,
// or a keyspace restored from before it — not only the restore.
func TestAGrantOfAnUnpublishedEpochIsNamedForgedOrRestored(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	wa := w.client(r, "worker-a")
	g := claim(t, w.session(wa, 30*time.Second), tenant, "task-1")
	forged := g
	forged.Epoch++
	var err error
	lgtest.WritesNothing(t, w.etcd, coordinator.DefaultPrefix, "a forged later epoch", func() {
		_, err = wa.Commit(lgtest.Ctx(t), forged, fencedtxn.Intent{Tenant: tenant, Task: "task-1", Operation: "c-1", Value: []byte("x")})
	})
	lgtest.Want(t, err, coordinator.StaleOwner)
	if msg := err.Error(); !strings.Contains(msg, "forged") || !strings.Contains(msg, "restored from a snapshot") {
		t.Fatalf("refusal %q: want it to name a forged grant and a restored keyspace", msg)
	}
}

// A procedure's path spelt otherwise — doubled or dotted segments, escapes,
// a detour through a service that needs no certificate — reaches no
// handler without the caller's certificate and role: a caller without one
// calling RotateRealm so is refused unauthenticated, redirected to the
// clean path or not found, and nothing is written.
func TestAPathSpeltOtherwiseIsNoWayAround(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	anon := w.httpClient("")
	anon.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, path := range []string{
		"//leasegate.v1.OperatorService/RotateRealm",
		"/leasegate.v1.OperatorService//RotateRealm",
		"/./leasegate.v1.OperatorService/RotateRealm",
		"/leasegate.v1.WorkerService/../leasegate.v1.OperatorService/RotateRealm",
		"/grpc.health.v1.Health/../leasegate.v1.OperatorService/RotateRealm",
		"/grpc.health.v1.Health/%2E%2E/leasegate.v1.OperatorService/RotateRealm",
		"/grpc.health.v1.Health%2F..%2Fleasegate.v1.OperatorService%2FRotateRealm",
		"/leasegate.v1.OperatorService%2FRotateRealm",
		"/leasegate.v1.Operator%53ervice/RotateRealm",
		"/metrics/../leasegate.v1.OperatorService/RotateRealm",
	} {
		t.Run(path, func(t *testing.T) {
			lgtest.WritesNothing(t, w.etcd, coordinator.DefaultPrefix, "a call without a certificate", func() {
				resp, err := anon.Post(r.ts.URL+path, "application/json", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				// Refused unauthenticated, redirected to the path itself, or
				// not found: never a handler's answer (its own checks would
				// refuse an unknown caller too, but after reading the call).
				switch resp.StatusCode {
				case http.StatusUnauthorized, http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusNotFound:
				default:
					t.Fatalf("HTTP %d without a certificate: a handler answered", resp.StatusCode)
				}
			})
		})
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A certificate's identity is its one SPIFFE ID, else its CN; a
// certificate that is ambiguous, or whose CN poses as a SPIFFE ID, names
// none.
func TestCertIdentity(t *testing.T) {
	for _, c := range []struct {
		name string
		cn   string
		uris []string
		want string // "" with says: no identity
		says string
	}{
		{"a SPIFFE ID and a CN", "w", []string{"spiffe://td/w"}, "spiffe://td/w", ""},
		{"a trust domain's own ID", "", []string{"spiffe://td"}, "spiffe://td", ""},
		{"a CN", "worker-a", nil, "worker-a", ""},
		{"a CN and a URI that is no SPIFFE ID", "w", []string{"https://td/w"}, "w", ""},
		{"two SPIFFE IDs", "w", []string{"spiffe://td/operator", "spiffe://td/w"}, "", "exactly one"},
		{"a SPIFFE ID and another URI", "w", []string{"https://td/x", "spiffe://td/w"}, "", "exactly one"},
		{"a SPIFFE URI without a trust domain", "operator", []string{"spiffe:/operator"}, "", "not a SPIFFE ID"},
		{"a SPIFFE URI with a port", "w", []string{"spiffe://td:8443/w"}, "", "not a SPIFFE ID"},
		{"a SPIFFE URI with a user", "w", []string{"spiffe://u@td/w"}, "", "not a SPIFFE ID"},
		{"a SPIFFE URI with a query", "w", []string{"spiffe://td/w?x=1"}, "", "not a SPIFFE ID"},
		{"a SPIFFE URI with a fragment", "w", []string{"spiffe://td/w#x"}, "", "not a SPIFFE ID"},
		{"a CN in SPIFFE form", "spiffe://td/operator", nil, "", "URI SAN only"},
		{"a CN in SPIFFE form, in capitals", "SPIFFE://td/operator", nil, "", "URI SAN only"},
		{"nothing", "", nil, "", "neither"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cert := &x509.Certificate{Subject: pkix.Name{CommonName: c.cn}}
			for _, u := range c.uris {
				cert.URIs = append(cert.URIs, mustURL(t, u))
			}
			got, err := gateway.CertIdentity(cert)
			switch {
			case c.says == "" && (err != nil || got != c.want):
				t.Fatalf("CertIdentity: %q, %v; want %q", got, err, c.want)
			case c.says != "" && (err == nil || got != "" || !strings.Contains(err.Error(), c.says)):
				t.Fatalf("CertIdentity: %q, %v; want no identity, saying %q", got, err, c.says)
			}
		})
	}
}

// testCA is a CA of the test's own, whose client certificates carry what a
// test puts in them.
type testCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its PEM
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.file = ca.write("ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(name, typ string, der []byte) string {
	ca.t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// issue is a client certificate of CN cn and URI SANs uris, as files.
func (ca *testCA) issue(name, cn string, uris ...*url.URL) gateway.ClientFiles {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: n, Subject: pkix.Name{CommonName: cn}, URIs: uris,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return gateway.ClientFiles{Cert: ca.write(name+".pem", "CERTIFICATE", der), Key: ca.write(name+"-key.pem", "EC PRIVATE KEY", kb)}
}

// A certificate from the trusted CA that names the operator only by a CN
// in SPIFFE form, or that carries the operator's SPIFFE ID beside another,
// does not act as the operator: unauthenticated, nothing written. The
// operator's own certificate of that CA does.
func TestACertificateNamingNoIdentityIsUnauthenticated(t *testing.T) {
	w := newWorld(t)
	ca := newTestCA(t)
	w.clientCA = ca.file
	r := w.replica()
	operator := mustURL(t, w.certs.IDs["operator"])
	as := func(f gateway.ClientFiles) *client.Client {
		t.Helper()
		cfg, err := client.TLSConfig(w.certs.CA, f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(r.ts.URL, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	rotate := func(c *client.Client) error {
		_, err := c.RotateRealm(lgtest.Ctx(t))
		return err
	}
	for _, c := range []struct {
		name string
		cert gateway.ClientFiles
	}{
		{"a CN in SPIFFE form", ca.issue("cn", w.certs.IDs["operator"])},
		{"two SPIFFE IDs", ca.issue("two", "x", operator, mustURL(t, w.certs.IDs["stranger"]))},
	} {
		t.Run(c.name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.Unauthenticated, func() error {
				return rotate(as(c.cert))
			})
		})
	}
	if err := rotate(as(ca.issue("operator", "operator", operator))); err != nil {
		t.Fatalf("the operator's own certificate: %v", err)
	}
}
