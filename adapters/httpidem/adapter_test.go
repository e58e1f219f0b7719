package httpidem_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/adapters/httpidem"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/adaptertest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

type world struct {
	srv   *realprov.IdemServer
	proxy *realprov.CutProxy
	ad    *httpidem.Adapter
	cnt   *adaptertest.Counting
	env   *adaptertest.Env
}

// newWorld: the service, a proxy in front of it, the adapter through the
// proxy (with the service's lookup unless noLookup), the ledger.
func newWorld(t *testing.T, noLookup bool, lopts ...ledger.Option) *world {
	t.Helper()
	srv := realprov.NewIdemServer(t, map[string]string{"checkout": "db-a"})
	proxy, err := realprov.NewCutProxy(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	base := "http://" + proxy.Addr()
	opts := []httpidem.Option{httpidem.WithKeyRetention(time.Hour),
		httpidem.WithHTTPClient(&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}})}
	if !noLookup {
		opts = append(opts, httpidem.WithLookup(base+"/v1/changes?idempotency_key={key}"))
	}
	ad, err := httpidem.New(base+"/v1/records", opts...)
	if err != nil {
		t.Fatal(err)
	}
	cnt := &adaptertest.Counting{Adapter: ad}
	return &world{srv: srv, proxy: proxy, ad: ad, cnt: cnt, env: adaptertest.New(t, []ledger.Adapter{cnt}, lopts...)}
}

func (w *world) effect(t *testing.T, value string) ledger.Effect {
	t.Helper()
	e, err := w.ad.Effect("checkout", map[string]string{"value": value}, "failover-v3")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPostApplied(t *testing.T) {
	w := newWorld(t, false)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Confirmed || w.srv.Value("checkout") != "db-b" || w.srv.Applied("traffic-db-b") != 1 {
		t.Fatalf("state %s, value %s, applied %d", rec.State, w.srv.Value("checkout"), w.srv.Applied("traffic-db-b"))
	}
	if len(rec.Evidence.ProviderIDs) != 1 || !strings.HasPrefix(rec.Evidence.ProviderIDs[0], "chg-") {
		t.Fatalf("evidence %+v, want the service's change id", rec.Evidence)
	}
}

// The service applies and the answer is lost: UNKNOWN; the next owner asks
// the service by key and confirms from its first answer, without a second
// POST.
func TestAnswerLostReconciledByLookup(t *testing.T) {
	w := newWorld(t, false)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	w.srv.DropNextAnswer()
	if rec := w.env.Dispatch(w.env.G, "traffic-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	rec := w.env.Reconcile(w.env.TakeOver(), "traffic-db-b")
	if rec.State != ledger.Confirmed || w.cnt.Applies() != 1 || w.srv.Applied("traffic-db-b") != 1 {
		t.Fatalf("state %s, applies %d, applied %d", rec.State, w.cnt.Applies(), w.srv.Applied("traffic-db-b"))
	}
}

// The POST is written and never delivered: the lookup says the key was
// never received; the contract makes a retry under the same key safe, so
// the next owner dispatches it again and it applies once. "Assume applied"
// would confirm a change the service never saw.
func TestPostLostBeforeDeliveryRetriedUnderTheSameKey(t *testing.T) {
	w := newWorld(t, false)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	w.proxy.DropAt("Idempotency-Key")
	if rec := w.env.Dispatch(w.env.G, "traffic-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	g2 := w.env.TakeOver()
	if rec := w.env.Reconcile(g2, "traffic-db-b"); rec.State != ledger.Authorized {
		t.Fatalf("state %s, want AUTHORIZED (a safe retry)", rec.State)
	}
	rec := w.env.Dispatch(g2, "traffic-db-b")
	if rec.State != ledger.Confirmed || rec.Attempts != 2 || w.srv.Applied("traffic-db-b") != 1 || w.srv.Value("checkout") != "db-b" {
		t.Fatalf("state %s, attempts %d, applied %d", rec.State, rec.Attempts, w.srv.Applied("traffic-db-b"))
	}
}

// A concurrent duplicate: the first POST is still processing when its
// call times out; the lookup answers 409 (in progress) so the record
// stays UNKNOWN, pending; once the service finishes, it confirms.
func TestInProgressStaysPendingThenConfirms(t *testing.T) {
	w := newWorld(t, false, ledger.WithCallTimeout(300*time.Millisecond))
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	held, release := w.srv.HoldNext()
	defer release()
	if rec := w.env.Dispatch(w.env.G, "traffic-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	lgtest.Wait(t, held, "the POST held in processing")
	g2 := w.env.TakeOver()
	if rec := w.env.Reconcile(g2, "traffic-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s while in progress, want UNKNOWN", rec.State)
	}
	release()
	rec := w.env.Reconcile(g2, "traffic-db-b")
	for i := 0; rec.State == ledger.Unknown && i < 20; i++ {
		rec = w.env.Reconcile(g2, "traffic-db-b")
	}
	if rec.State != ledger.Confirmed || w.srv.Applied("traffic-db-b") != 1 {
		t.Fatalf("state %s, applied %d", rec.State, w.srv.Applied("traffic-db-b"))
	}
}

// Definite refusals with the service's answer as evidence: the resource
// moved between revalidation and the call (412), the key already used with
// another payload (422), a newer fencing epoch already wrote (409).
func TestRefusalsAreFailedWithEvidence(t *testing.T) {
	for _, c := range []struct {
		name, want string
		before     func(w *world)
	}{
		{"resource moved", "412", func(w *world) { w.srv.Set("checkout", "db-c") }},
		{"key reused with another payload", "422", func(w *world) {
			post(t, w.srv.URL+"/v1/records/checkout", "traffic-db-b", "", `{"value":"db-z"}`)
		}},
		{"newer fencing epoch", "stale-fencing-epoch", func(w *world) {
			post(t, w.srv.URL+"/v1/records/checkout", "someone-else", "1000", `{"value":"db-y"}`)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, false)
			w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "db-b"))
			w.cnt.Before = func() { c.before(w) }
			rec := w.env.Dispatch(w.env.G, "traffic-db-b")
			if rec.State != ledger.Failed || rec.Evidence == nil || !strings.Contains(string(rec.Evidence.Detail), c.want) {
				t.Fatalf("state %s, evidence %v; want FAILED with %s", rec.State, rec.Evidence, c.want)
			}
			if w.srv.Value("checkout") == "db-b" {
				t.Fatal("the refused change applied")
			}
		})
	}
}

// The resource changed after the approval: SUPERSEDED, nothing sent.
func TestChangedResourceSupersedesBeforeDispatch(t *testing.T) {
	w := newWorld(t, false)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	w.srv.Set("checkout", "db-c")
	rec := w.env.Dispatch(w.env.G, "traffic-db-b")
	if rec.State != ledger.Superseded || w.cnt.Applies() != 0 {
		t.Fatalf("state %s, applies %d", rec.State, w.cnt.Applies())
	}
}

// Without the service's lookup, Observe reads the resource: the body's
// value there is Applied.
func TestAnswerLostReconciledFromTheResourceWithoutLookup(t *testing.T) {
	w := newWorld(t, true)
	w.env.Authorized(w.env.G, w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	w.srv.DropNextAnswer()
	if rec := w.env.Dispatch(w.env.G, "traffic-db-b"); rec.State != ledger.Unknown {
		t.Fatalf("state %s, want UNKNOWN", rec.State)
	}
	rec := w.env.Reconcile(w.env.TakeOver(), "traffic-db-b")
	if rec.State != ledger.Confirmed {
		t.Fatalf("state %s, want CONFIRMED", rec.State)
	}
}

func post(t *testing.T, u, key, epoch, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewBufferString(body))
	req.Header.Set("Idempotency-Key", key)
	if epoch != "" {
		req.Header.Set("Fencing-Epoch", epoch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestConfigurationCheckedAtConstruction(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, base string
		opts       []httpidem.Option
		want       string
	}{
		{"not a URL", "::", nil, "not an http(s) URL"},
		{"no scheme", "example.test/v1", nil, "not an http(s) URL"},
		{"unresolvable", "http://svc.invalid/v1", nil, "does not resolve"},
		{"lookup without key", "http://127.0.0.1/v1", []httpidem.Option{httpidem.WithLookup("http://127.0.0.1/changes")}, "no {key}"},
		{"missing token file", "http://127.0.0.1/v1", []httpidem.Option{httpidem.WithTokenFile(filepath.Join(dir, "absent"))}, "no such file"},
		{"empty token file", "http://127.0.0.1/v1", []httpidem.Option{httpidem.WithTokenFile(empty)}, "one non-empty line"},
		{"zero retention", "http://127.0.0.1/v1", []httpidem.Option{httpidem.WithKeyRetention(0)}, "must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := httpidem.New(c.base, c.opts...)
			lgtest.Want(t, err, coordinator.InvalidInput)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want %q", err, c.want)
			}
		})
	}
}

func TestExpiredApprovalIsNotDispatched(t *testing.T) {
	w := newWorld(t, false)
	w.env.ExpiredApproval(w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	if w.srv.Applied("traffic-db-b") != 0 || w.srv.Value("checkout") != "db-a" {
		t.Fatal("the service applied it")
	}
}

func TestChangedPolicyIsNotDispatched(t *testing.T) {
	w := newWorld(t, false)
	w.env.ChangedPolicy(w.cnt, "traffic-db-b", w.effect(t, "db-b"))
	if w.srv.Applied("traffic-db-b") != 0 || w.srv.Value("checkout") != "db-a" {
		t.Fatal("the service applied it")
	}
}

func TestAnswerInHandAfterOwnershipChangedConfirms(t *testing.T) {
	w := newWorld(t, false)
	w.env.AnswerInHand(w.cnt, "traffic-db-b", w.effect(t, "db-b"), nil, ledger.Confirmed, ledger.Confirmed)
	if w.srv.Applied("traffic-db-b") != 1 {
		t.Fatalf("applied %d", w.srv.Applied("traffic-db-b"))
	}
}

// The service refuses (412: the resource moved in the gap) while the task
// passes to worker-b: FAILED from the kept answer, no lookup, no re-POST.
func TestRefusalInHandAfterOwnershipChangedIsNotConfirmed(t *testing.T) {
	w := newWorld(t, false)
	w.env.AnswerInHand(w.cnt, "traffic-db-b", w.effect(t, "db-b"), func() { w.srv.Set("checkout", "db-c") }, ledger.Failed, ledger.Failed)
	if w.srv.Value("checkout") != "db-c" {
		t.Fatalf("value %s", w.srv.Value("checkout"))
	}
}

// A service that wants mTLS: the adapter verifies it against WithCAFile's
// roots and presents WithClientCertificate's pair, read again at each
// handshake (a rotated pair is what the next connection presents); the
// token goes as a bearer. Probe passes only with all three, and fails on a
// refused credential.
func TestClientCertificateAndCA(t *testing.T) {
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "pki"), "test.example", "leasegate", "other")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	var mu sync.Mutex
	var seen []string // the client certificates' SPIFFE IDs, one per request
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].URIs[0].String())
		mu.Unlock()
		w.Header().Set("Connection", "close") // each request a new handshake
		if r.Header.Get("Authorization") != "Bearer tok-1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNotFound) // a collection's root: the service is there
	}))
	server, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	ts.StartTLS()
	defer ts.Close()
	base := ts.URL + "/v1/records"
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	use := func(name string) {
		for from, to := range map[string]string{certs.Clients[name].Cert: certFile, certs.Clients[name].Key: keyFile} {
			b, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	use("leasegate")
	ctx := lgtest.Ctx(t)

	ad, err := httpidem.New(base, httpidem.WithCAFile(certs.CA), httpidem.WithClientCertificate(certFile, keyFile), httpidem.WithTokenFile(token))
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.Probe(ctx); err != nil {
		t.Fatalf("Probe with CA, certificate and token: %v", err)
	}
	use("other") // rotated: the same adapter's next handshake presents the new pair
	if err := ad.Probe(ctx); err != nil {
		t.Fatalf("Probe after rotation: %v", err)
	}
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if len(got) != 2 || got[0] != certs.IDs["leasegate"] || got[1] != certs.IDs["other"] {
		t.Fatalf("the service saw certificates %v, want %s then %s", got, certs.IDs["leasegate"], certs.IDs["other"])
	}

	noCert, err := httpidem.New(base, httpidem.WithCAFile(certs.CA), httpidem.WithTokenFile(token))
	if err != nil {
		t.Fatal(err)
	}
	if err := noCert.Probe(ctx); err == nil {
		t.Fatal("Probe without a client certificate passed; the service requires one")
	}
	noRoots, err := httpidem.New(base, httpidem.WithClientCertificate(certFile, keyFile), httpidem.WithTokenFile(token))
	if err != nil {
		t.Fatal(err)
	}
	if err := noRoots.Probe(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Probe without the service's CA: %v, want the certificate refused", err)
	}
	noToken, err := httpidem.New(base, httpidem.WithCAFile(certs.CA), httpidem.WithClientCertificate(certFile, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := noToken.Probe(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Probe without the token: %v, want 401", err)
	}
	if _, err := httpidem.New(base, httpidem.WithHTTPClient(http.DefaultClient), httpidem.WithCAFile(certs.CA)); err == nil {
		t.Fatal("WithHTTPClient with WithCAFile accepted: one of them would be ignored")
	}
}
