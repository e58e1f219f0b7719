package console_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/console"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/browser"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

const (
	tenant = "tenant-a"
	// tenantAB is another tenant whose name begins with tenant's: a
	// sibling sharing its prefix.
	tenantAB    = "tenant-ab"
	trustDomain = "test.example"
	// unknownOp is an operation whose provider call never answers: the
	// dispatch records it UNKNOWN.
	unknownOp = "op-unknown"
)

// The identities: two workers, an approver and an operator of tenant-a
// (the operator of every tenant), a worker of tenantAB, an approver of
// both tenants; and "stranger", a certificate the CA issued that the
// server's configuration does not name.
var callers = []string{"worker", "worker-2", "approver", "operator", "worker-ab", "approver-ab", "stranger"}

// world is one gateway with its console on loopback TLS over an embedded
// etcd, the simulated providers, and a certificate (and PKCS#12 file) per
// identity.
type world struct {
	t        testing.TB
	certs    gateway.DevCerts
	provider *devprovider.Provider
	url      string // https://127.0.0.1:port
	c        *coordinator.Coordinator
	etcd     *clientv3.Client // the gateway's etcd, to see what a refusal wrote
}

func newWorld(t testing.TB) *world {
	t.Helper()
	cl := embedtest.NewCluster(t)
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(dir, trustDomain, callers...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range callers {
		f := certs.Clients[name]
		if err := console.WritePKCS12(filepath.Join(dir, name+".p12"), f.Cert, f.Key, certs.CA, console.DevPKCS12Password); err != nil {
			t.Fatal(err)
		}
	}
	w := &world{t: t, certs: certs, provider: devprovider.New("db-1")}
	w.provider.BeforeApply = func(ctx context.Context, operation string) {
		if operation == unknownOp {
			<-ctx.Done() // the call never answers: ambiguous, UNKNOWN
		}
	}
	ids := []gateway.Identity{
		{ID: certs.IDs["worker"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{tenant}},
		{ID: certs.IDs["worker-2"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{tenant}},
		{ID: certs.IDs["approver"], Roles: []gateway.Role{gateway.RoleApprover}, Tenants: []string{tenant}},
		{ID: certs.IDs["operator"], Roles: []gateway.Role{gateway.RoleOperator}, Tenants: []string{gateway.AllTenants}},
		{ID: certs.IDs["worker-ab"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{tenantAB}},
		{ID: certs.IDs["approver-ab"], Roles: []gateway.Role{gateway.RoleApprover}, Tenants: []string{tenantAB, tenant}},
	}
	w.c = lgtest.Coordinator(t, cl)
	w.etcd = w.c.Client()
	key := []byte("0123456789abcdef0123456789abcdef")
	srv, err := gateway.New(w.c, gateway.WithIdentities(ids...), gateway.WithSessionKey(key),
		gateway.WithAdapters(append(w.provider.Adapters(), lostAnswers{})...),
		// One observation: a lost answer's Reconcile is MANUAL_REVIEW at once.
		gateway.WithLedgerOptions(ledger.WithCallTimeout(300*time.Millisecond), ledger.WithRecordTimeout(2*time.Second),
			ledger.WithPolling(time.Millisecond, time.Millisecond, 1)))
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(srv, console.WithActionKey(console.ActionKey(key)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount(console.Path, con)
	tlsCfg, err := gateway.TLSConfig(certs.ServerCert, certs.ServerKey, certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	// The requests in flight, waited for before etcd stops: the server's
	// Close does not wait for an HTTP/2 request whose connection the
	// client closed.
	var inflight sync.WaitGroup
	api := srv.Handler()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		api.ServeHTTP(rw, r)
	}))
	ts.EnableHTTP2 = true
	ts.TLS = tlsCfg
	// Chromium opens connections it never uses (preconnects): their
	// handshakes end in EOF, which net/http would log.
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(func() { ts.Close(); inflight.Wait() })
	w.url = ts.URL
	return w
}

// client is caller's Go client of the gateway (over TLS, its certificate).
func (w *world) client(caller string) *client.Client {
	t := w.t
	t.Helper()
	cfg, err := client.TLSConfig(w.certs.CA, w.certs.Clients[caller].Cert, w.certs.Clients[caller].Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(w.url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// httpAs is an HTTP client of the gateway over TLS presenting caller's
// certificate ("" for none), as a browser with it imported would.
func (w *world) httpAs(caller string) *http.Client {
	t := w.t
	t.Helper()
	var cfg *tls.Config
	var err error
	if caller == "" {
		cfg, err = client.TLSConfig(w.certs.CA, "", "")
	} else {
		cfg, err = client.TLSConfig(w.certs.CA, w.certs.Clients[caller].Cert, w.certs.Clients[caller].Key)
	}
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true},
		// A decision answers a redirect: the test reads it, not its target.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// reviewed is a MANUAL_REVIEW record of g's task: an effect whose every
// answer is lost, approved, dispatched (UNKNOWN) and reconciled.
func (w *world) reviewed(c *client.Client, g coordinator.Grant, operation string) ledger.Record {
	t := w.t
	t.Helper()
	rec := w.propose(c, g, operation, kindLost, "db-2", map[string]string{"role": "primary"})
	if _, err := w.client("approver").Authorize(ctxOf(t), g.Tenant, g.Task, operation, ledger.Approval{
		ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Policy: "v1"}); err != nil {
		t.Fatalf("Authorize %s: %v", operation, err)
	}
	if rec, err := c.Dispatch(ctxOf(t), g, operation); err != nil || rec.State != ledger.Unknown {
		t.Fatalf("Dispatch %s: %s, %v; want UNKNOWN (every answer is lost)", operation, rec.State, err)
	}
	recs, err := c.Reconcile(ctxOf(t), g)
	if err != nil || len(recs) != 1 || recs[0].State != ledger.ManualReview {
		t.Fatalf("Reconcile: %v, %+v; want %s in MANUAL_REVIEW", err, recs, operation)
	}
	return recs[0]
}

// lostAnswers is a provider whose every answer is lost and whose world
// says nothing: a dispatch is UNKNOWN, its reconciliation MANUAL_REVIEW.
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

// session opens a session of caller's, closed at the end of the test.
func (w *world) session(c *client.Client) *client.Session {
	t := w.t
	t.Helper()
	s, err := c.OpenSession(ctxOf(t), 30*time.Second, client.WithKeepAlive())
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// propose records operation on g's task, an effect of kind on target.
func (w *world) propose(c *client.Client, g coordinator.Grant, operation, kind, target string, params any) ledger.Record {
	t := w.t
	t.Helper()
	p, _ := json.Marshal(params)
	e := ledger.Effect{Kind: kind, Target: target, Params: p, Policy: "v1"}
	obs, err := c.ObservePrecondition(ctxOf(t), g, e)
	if err != nil {
		t.Fatalf("ObservePrecondition: %v", err)
	}
	rec, err := c.Propose(ctxOf(t), g, operation, e, obs)
	if err != nil {
		t.Fatalf("Propose %s: %v", operation, err)
	}
	return rec
}

// browserAs is a headless Chromium presenting caller's certificate to the
// gateway.
func (w *world) browserAs(caller string) *browser.Browser {
	t := w.t
	t.Helper()
	p12 := filepath.Join(w.certs.Dir, caller+".p12")
	return browser.Start(t, browser.ClientCertificate(t, p12, console.DevPKCS12Password, w.certs.CA, w.url)...)
}

// page opens path of the console in b.
func (w *world) page(b *browser.Browser, path string) *browser.Page {
	t := w.t
	t.Helper()
	p := b.NewPage(t, 1280, 900)
	p.Navigate(t, w.url+path)
	return p
}

// eval runs JavaScript in p and returns its value.
func eval[T any](t *testing.T, p *browser.Page, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browser.Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor waits until js is true in p (a condition on the page, polled by
// the browser itself on each animation frame), across a navigation of the
// page (a form's answer) if one happens meanwhile.
func waitFor(t *testing.T, p *browser.Page, what, js string) {
	t.Helper()
	deadline := time.Now().Add(browser.Timeout)
	for {
		ctx, cancel := context.WithTimeout(p.Context(), 2*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s (%s): %v; the page says: %s", what, js, err, text(t, p, "main"))
		}
	}
}

// text is the rendered text of the first element sel matches ("" if none).
func text(t *testing.T, p *browser.Page, sel string) string {
	t.Helper()
	b, _ := json.Marshal(sel)
	return eval[string](t, p, `(function(){var e=document.querySelector(`+string(b)+`);return e?e.innerText:""})()`)
}

func contains(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ctxOf is a test's context: a browser test outlasts lgtest.Ctx's bound on
// a loaded machine (Chromium starts in seconds to tens of seconds).
func ctxOf(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
