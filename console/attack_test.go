package console_test

// A hostile client of the console, written from docs/console.md,
// docs/gateway.md and the README: what a security reviewer would try
// before trusting the console at 02:13 during a failover. Every check
// reads what is observed — bytes on the wire, etcd's keys, the journal
// through the API — never what the console says about itself.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/net/html"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/console"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/browser"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
	// attackKind is the effect kind of the attack's adapter (hostileAdapter).
	attackKind = "attack.effect"
	// sessionKey is the gateway's session key, from which the console's
	// action key is derived: a secret no page, header or URL may carry.
	sessionKey = "0123456789abcdef0123456789abcdef"
)

// The XSS payloads. Each sets a global of the page if a browser ever runs
// it; the console must render every one as text.
var payloads = []string{
	`<script>window.__pwned="script"</script>`,
	`"><img/src/onerror=window.__pwned='img'>`,
	`</svg><script>window.__pwned="svg"</script>`,
	`javascript:window.__pwned="js"`,
	`'><svg/onload=window.__pwned='quote'>`,
}

// hostileAdapter is an adapter whose world the test decides: its
// precondition is the effect's target, an Apply of an effect whose
// parameters say "lost" loses its answer (UNKNOWN), and Observe never
// knows (MANUAL_REVIEW after a reconcile). The evidence of an Apply that
// answers carries payloads: what a provider sends is not trusted either.
type hostileAdapter struct{}

func (hostileAdapter) Kind() string              { return attackKind }
func (hostileAdapter) Contract() ledger.Contract { return ledger.Contract{} }
func (hostileAdapter) Precondition(_ context.Context, e ledger.Effect) (ledger.Observation, error) {
	return ledger.Observation{Digest: "world:" + e.Target, At: time.Now(), Detail: json.RawMessage(`{"seen":` + jsonString(e.Target) + `}`)}, nil
}
func (hostileAdapter) Apply(_ context.Context, call ledger.Call) (ledger.Evidence, error) {
	var p struct {
		Lost bool `json:"lost"`
	}
	_ = json.Unmarshal(call.Effect.Params, &p)
	if p.Lost {
		return ledger.Evidence{}, ledger.Ambiguous(context.DeadlineExceeded)
	}
	return ledger.Evidence{ProviderIDs: []string{payloads[0]}, Detail: json.RawMessage(`{"applied":` + jsonString(payloads[1]) + `}`)}, nil
}
func (hostileAdapter) Observe(context.Context, ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	return ledger.Inconclusive, ledger.Evidence{}, nil
}

// jsonString is s as a JSON string, with '<', '>' and '&' as they are
// (json.Marshal would write them \u003c...): the stored bytes hold the
// payload itself.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSpace(b.String())
}

// attackWorld is a gateway with its console over an embedded etcd, with
// two tenants and an identity of each role in each, an operator of all
// tenants, and identities whose certificate names are payloads.
type attackWorld struct {
	t        *testing.T
	url      string
	ca       string               // the server's CA, for clients
	dir      string               // the certificates
	files    map[string][2]string // identity name -> certificate, key
	ids      map[string]string    // identity name -> the identity the gateway knows
	c        *coordinator.Coordinator
	prefix   string
	sessions map[string]*client.Session
	clients  map[string]*client.Client
}

// The identities of an attackWorld, by name.
var attackIdentities = []struct {
	name    string
	role    gateway.Role
	tenants []string
}{
	{"worker-a", gateway.RoleWorker, []string{tenantA}},
	{"worker-b", gateway.RoleWorker, []string{tenantB}},
	{"approver-a", gateway.RoleApprover, []string{tenantA}},
	{"approver-b", gateway.RoleApprover, []string{tenantB}},
	{"operator-a", gateway.RoleOperator, []string{tenantA}},
	{"operator-all", gateway.RoleOperator, []string{gateway.AllTenants}},
}

// hostileNames are identities whose certificate's CN (no URI SAN) is a
// payload: an approver and an operator of tenant-a.
var hostileNames = map[string]gateway.Role{
	"evil-approver": gateway.RoleApprover,
	"evil-operator": gateway.RoleOperator,
}

func hostileCN(name string) string {
	if name == "evil-approver" {
		return `approver"><img/src/onerror=window.__pwned='cn'>`
	}
	return `operator</svg><script>window.__pwned="cn"</script>`
}

func newAttackWorld(t *testing.T) *attackWorld {
	t.Helper()
	cl := embedtest.NewCluster(t)
	dir := t.TempDir()
	var names []string
	for _, id := range attackIdentities {
		names = append(names, id.name)
	}
	names = append(names, "stranger") // a certificate of the CA the configuration does not name
	certs, err := gateway.WriteDevCerts(dir, trustDomain, names...)
	if err != nil {
		t.Fatal(err)
	}
	w := &attackWorld{t: t, ca: certs.CA, dir: dir, files: map[string][2]string{}, ids: map[string]string{}, prefix: coordinator.DefaultPrefix,
		sessions: map[string]*client.Session{}, clients: map[string]*client.Client{}}
	var ids []gateway.Identity
	for _, id := range attackIdentities {
		w.files[id.name] = [2]string{certs.Clients[id.name].Cert, certs.Clients[id.name].Key}
		w.ids[id.name] = certs.IDs[id.name]
		ids = append(ids, gateway.Identity{ID: certs.IDs[id.name], Roles: []gateway.Role{id.role}, Tenants: id.tenants})
		if err := console.WritePKCS12(filepath.Join(dir, id.name+".p12"), certs.Clients[id.name].Cert, certs.Clients[id.name].Key, certs.CA, console.DevPKCS12Password); err != nil {
			t.Fatal(err)
		}
	}
	w.files["stranger"] = [2]string{certs.Clients["stranger"].Cert, certs.Clients["stranger"].Key}
	// A second CA, also trusted for clients, issues the certificates whose
	// CN is a payload (the dev CA's key is not kept).
	caPEM, caCert, caKey := newCA(t, dir)
	for name, role := range hostileNames {
		cert, key := issue(t, dir, name, hostileCN(name), caCert, caKey)
		w.files[name] = [2]string{cert, key}
		w.ids[name] = hostileCN(name)
		ids = append(ids, gateway.Identity{ID: hostileCN(name), Roles: []gateway.Role{role}, Tenants: []string{tenantA}})
	}
	clientCAs := filepath.Join(dir, "client-cas.pem")
	devCA, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(clientCAs, append(devCA, caPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	w.c = lgtest.Coordinator(t, cl)
	srv, err := gateway.New(w.c, gateway.WithIdentities(ids...), gateway.WithSessionKey([]byte(sessionKey)),
		gateway.WithAdapters(hostileAdapter{}), gateway.WithLimits(gateway.Limits{}), // the defaults, as serve --dev
		gateway.WithLedgerOptions(ledger.WithCallTimeout(300*time.Millisecond), ledger.WithRecordTimeout(2*time.Second),
			ledger.WithPolling(10*time.Millisecond, 20*time.Millisecond, 2)))
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(srv, console.WithActionKey(console.ActionKey([]byte(sessionKey))))
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount(console.Path, con)
	tlsCfg, err := gateway.TLSConfig(certs.ServerCert, certs.ServerKey, clientCAs)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.EnableHTTP2 = true
	ts.TLS = tlsCfg
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	w.url = ts.URL
	return w
}

// newCA writes a CA's certificate to dir and returns its PEM, certificate
// and key.
func newCA(t *testing.T, dir string) ([]byte, *x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "attack CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, key
}

// issue writes a client certificate with subject CN cn (and no SAN),
// issued by ca, and its key; it returns their files.
func issue(t *testing.T, dir, name, cn string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(cf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cf, kf
}

// tlsFor is the client TLS of identity name ("" for none).
func (w *attackWorld) tlsFor(name string) *tls.Config {
	t := w.t
	t.Helper()
	if name == "" {
		pool := x509.NewCertPool()
		b, err := os.ReadFile(w.ca)
		if err != nil || !pool.AppendCertsFromPEM(b) {
			t.Fatalf("CA %s: %v", w.ca, err)
		}
		return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	f, ok := w.files[name]
	if !ok {
		t.Fatalf("no identity %q", name)
	}
	cfg, err := client.TLSConfig(w.ca, f[0], f[1])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// api is identity name's Go client of the gateway; reads go through its
// role's own service.
func (w *attackWorld) api(name string) *client.Client {
	t := w.t
	t.Helper()
	if c, ok := w.clients[name]; ok {
		return c
	}
	var opts []client.Option
	for _, id := range attackIdentities {
		if id.name == name && id.role != gateway.RoleWorker {
			opts = append(opts, client.WithReadsAs(string(id.role)))
		}
	}
	if r, ok := hostileNames[name]; ok {
		opts = append(opts, client.WithReadsAs(string(r)))
	}
	c, err := client.New(w.url, w.tlsFor(name), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w.clients[name] = c
	return c
}

// browserless is identity name's plain HTTP client of the console: it
// follows no redirect (the test reads the Location itself).
func (w *attackWorld) browserless(name string) *http.Client {
	tr := &http.Transport{TLSClientConfig: w.tlsFor(name), ForceAttemptHTTP2: true}
	w.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// answer is what the console sent back, as read off the wire.
type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) String() string {
	return fmt.Sprintf("HTTP %d %v: %.600s", a.status, a.header, a.body)
}

// do sends req as identity name ("" for no certificate).
func (w *attackWorld) do(name string, req *http.Request) answer {
	t := w.t
	t.Helper()
	resp, err := w.browserless(name).Do(req)
	if err != nil {
		t.Fatalf("%s %s as %q: %v", req.Method, req.URL, name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s as %q: reading the answer: %v", req.Method, req.URL, name, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (w *attackWorld) request(method, path string, body io.Reader) *http.Request {
	req, err := http.NewRequest(method, w.url+path, body)
	if err != nil {
		w.t.Fatal(err)
	}
	return req
}

func (w *attackWorld) get(name, path string) answer {
	w.t.Helper()
	return w.do(name, w.request(http.MethodGet, path, nil))
}

// post sends form as a same-origin browser form would (Origin and
// Sec-Fetch-Site of the console's own), with extra headers on top.
func (w *attackWorld) post(name, path string, form url.Values, extra map[string]string) answer {
	w.t.Helper()
	req := w.request(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", w.url)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range extra {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return w.do(name, req)
}

var tokenMeta = regexp.MustCompile(`<meta name="leasegate-action-token" content="([^"]*)">`)

// token is the action token the console's pages give identity name.
func (w *attackWorld) token(name string) string {
	t := w.t
	t.Helper()
	a := w.get(name, "/console/")
	m := tokenMeta.FindStringSubmatch(a.body)
	if a.status != http.StatusOK || m == nil {
		t.Fatalf("no action token on %s's Now page: %v", name, a)
	}
	return m[1]
}

// formOf is the named inputs of the form with id on page body, as the
// browser would send them (a field typed in is left for the caller).
func formOf(t *testing.T, body, id string) url.Values {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(body))
	in := false
	v := url.Values{}
	for {
		switch z.Next() {
		case html.ErrorToken:
			if !in {
				t.Fatalf("no form %q on the page: %.2000s", id, body)
			}
			return v
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			switch tok.Data {
			case "form":
				in = attr(tok, "id") == id
			case "input", "select", "textarea":
				if in && attr(tok, "name") != "" {
					v.Set(attr(tok, "name"), attr(tok, "value"))
				}
			}
		case html.EndTagToken:
			if tok := z.Token(); tok.Data == "form" && in {
				return v
			}
		}
	}
}

func attr(tok html.Token, key string) string {
	for _, a := range tok.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// opPath is the console's page of one operation.
func opPath(tenant, task, operation string) string {
	return "/console/op/" + url.PathEscape(tenant) + "/" + url.PathEscape(task) + "/" + url.PathEscape(operation)
}

// session is identity name's session (one per worker, for the test).
func (w *attackWorld) session(name string) *client.Session {
	t := w.t
	t.Helper()
	if s, ok := w.sessions[name]; ok {
		return s
	}
	s, err := w.api(name).OpenSession(ctxOf(t), time.Minute, client.WithKeepAlive())
	if err != nil {
		t.Fatalf("OpenSession %s: %v", name, err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	w.sessions[name] = s
	return s
}

func (w *attackWorld) claim(name, tenant, task string) coordinator.Grant {
	t := w.t
	t.Helper()
	g, err := w.session(name).Claim(ctxOf(t), tenant, task)
	if err != nil {
		t.Fatalf("%s claims %s/%s: %v", name, tenant, task, err)
	}
	return g
}

// effect is an effect of the attack's adapter on target; lost: its answer
// is lost (UNKNOWN).
func effect(target string, lost bool) ledger.Effect {
	return ledger.Effect{Kind: attackKind, Target: target, Params: json.RawMessage(`{"lost":` + fmt.Sprint(lost) + `}`), Policy: "v1"}
}

// propose proposes e as g's owner, under pre or (nil) the adapter's own
// observation.
func (w *attackWorld) propose(g coordinator.Grant, operation string, e ledger.Effect, pre *ledger.Observation) ledger.Record {
	t := w.t
	t.Helper()
	c := w.api(workerOf(g.Tenant))
	if pre == nil {
		obs, err := c.ObservePrecondition(ctxOf(t), g, e)
		if err != nil {
			t.Fatalf("ObservePrecondition: %v", err)
		}
		pre = &obs
	}
	rec, err := c.Propose(ctxOf(t), g, operation, e, *pre)
	if err != nil {
		t.Fatalf("Propose %q: %v", operation, err)
	}
	return rec
}

func workerOf(tenant string) string {
	if tenant == tenantB {
		return "worker-b"
	}
	return "worker-a"
}

// approve authorizes rec as approver (through the API).
func (w *attackWorld) approve(approver string, rec ledger.Record, note string) ledger.Record {
	t := w.t
	t.Helper()
	out, err := w.api(approver).Authorize(ctxOf(t), rec.Tenant, rec.Task, rec.Operation,
		ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Note: note})
	if err != nil {
		t.Fatalf("%s authorizes %q: %v", approver, rec.Operation, err)
	}
	return out
}

// unknown is a record whose dispatch lost its answer: UNKNOWN.
func (w *attackWorld) unknown(g coordinator.Grant, approver, operation, target string) ledger.Record {
	t := w.t
	t.Helper()
	w.approve(approver, w.propose(g, operation, effect(target, true), nil), "")
	rec, err := w.api(workerOf(g.Tenant)).Dispatch(ctxOf(t), g, operation)
	if err != nil || rec.State != ledger.Unknown {
		t.Fatalf("Dispatch %q: %s, %v (want UNKNOWN)", operation, rec.State, err)
	}
	return rec
}

// reconcile reconciles g's task: its UNKNOWN records go to MANUAL_REVIEW
// (the adapter never knows).
func (w *attackWorld) reconcile(g coordinator.Grant) {
	t := w.t
	t.Helper()
	recs, err := w.api(workerOf(g.Tenant)).Reconcile(ctxOf(t), g)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	for _, r := range recs {
		if r.State != ledger.ManualReview {
			t.Fatalf("Reconcile left %q %s, want MANUAL_REVIEW", r.Operation, r.State)
		}
	}
}

// record is the record and journal as the API gives them to an operator
// of all tenants.
func (w *attackWorld) record(tenant, task, operation string) (ledger.Record, []ledger.Transition) {
	t := w.t
	t.Helper()
	rec, journal, err := w.api("operator-all").Record(ctxOf(t), tenant, task, operation)
	if err != nil {
		t.Fatalf("Record %s/%s/%s: %v", tenant, task, operation, err)
	}
	return rec, journal
}

// keys is every key under the keyspace with its ModRevision.
func (w *attackWorld) keys() map[string]int64 {
	t := w.t
	t.Helper()
	resp, err := w.c.Client().Get(ctxOf(t), w.prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m[string(kv.Key)] = kv.ModRevision
	}
	return m
}

// wroteNothing fails the test if f changed any key of the keyspace.
func (w *attackWorld) wroteNothing(what string, f func()) {
	t := w.t
	t.Helper()
	before := w.keys()
	f()
	after := w.keys()
	for k, rev := range after {
		if before[k] != rev {
			t.Errorf("%s wrote %s (revision %d, was %d)", what, k, rev, before[k])
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s deleted %s", what, k)
		}
	}
}

// inert fails the test unless body (a page of the console) holds no
// markup but the console's own: every <script> is the console's script,
// no image, frame or object, at most the one <svg> of the timeline (and
// closed once), no event-handler attribute and no javascript: URL. Data
// can only add markup by an unescaped '<' or quote, which this catches.
func inert(t *testing.T, where, body string) {
	t.Helper()
	const ownScript = `<script src="/console/static/console.js" defer></script>`
	if n, own := strings.Count(body, "<script"), strings.Count(body, ownScript); n != own {
		t.Errorf("%s: %d <script> tags, %d of them the console's: %s", where, n, own, around(body, "<script"))
	}
	for _, tag := range []string{"<img", "<iframe", "<object", "<embed", "<base", "<foreignObject", "<svg/", "<math"} {
		if strings.Contains(body, tag) {
			t.Errorf("%s: an unescaped %s tag: %s", where, tag, around(body, tag))
		}
	}
	if open, closed := strings.Count(body, "<svg"), strings.Count(body, "</svg>"); open > 1 || open != closed {
		t.Errorf("%s: %d <svg> and %d </svg>: %s", where, open, closed, around(body, "</svg>"))
	}
	z := html.NewTokenizer(strings.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		if tok.Data == "title" {
			// An SVG <title> is not raw text: a tag inside would be one.
			z.NextIsNotRawText()
		}
		for _, a := range tok.Attr {
			key := strings.ToLower(a.Key)
			if strings.HasPrefix(key, "on") {
				t.Errorf("%s: <%s> has an event handler %s=%q", where, tok.Data, a.Key, a.Val)
			}
			if v := strings.ToLower(strings.TrimSpace(a.Val)); strings.HasPrefix(v, "javascript:") &&
				(key == "href" || key == "src" || key == "action" || key == "formaction" || strings.HasSuffix(key, ":href")) {
				t.Errorf("%s: <%s %s=%q>: a javascript: URL", where, tok.Data, a.Key, a.Val)
			}
		}
	}
}

func around(body, sub string) string {
	i := strings.Index(body, sub)
	if i < 0 {
		return "(not found)"
	}
	return body[max(0, i-120):min(len(body), i+200)]
}

// asJSON is s as the text of a JSON string json.Marshal writes ('<' as
// \u003c): how the console shows a JSON detail.
func asJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// shows reports whether the page's text (its markup decoded) holds s: the
// payload was rendered, as text.
func shows(body, s string) bool {
	return strings.Contains(html.UnescapeString(body), s)
}

// Every string a worker, an approver, an operator, a provider or a
// certificate puts into a record, a journal or a task reaches the Now,
// Effects and Operation pages and the operation's timeline (SVG drawn on
// the server) as text: the pages' bytes hold no markup but the console's,
// and in Chromium no payload ran or made an element, including a task
// claimed while the page is open (the live list).
func TestStoredPayloadsRenderInert(t *testing.T) {
	w := newAttackWorld(t)
	ctx := ctxOf(t)

	// What the API refuses is fine: a tenant or an effect kind that is a
	// payload.
	if _, err := w.session("worker-a").Claim(ctx, payloads[0], "x"); coordinator.DispositionOf(err) != coordinator.PermissionDenied {
		t.Errorf("claim in tenant %q: %v, want permission_denied", payloads[0], err)
	}
	// Tasks named by payloads; on each, an operation whose id, target,
	// parameters (a key and a value), precondition (digest and detail) and
	// policy are the payload: all the worker's to choose.
	grants := make([]coordinator.Grant, len(payloads))
	for i, p := range payloads {
		grants[i] = w.claim("worker-a", tenantA, p)
		e := ledger.Effect{Kind: attackKind, Target: p, Policy: p,
			Params: json.RawMessage(`{"x":` + jsonString(p) + `,` + jsonString(p) + `:[1]}`)}
		w.propose(grants[i], p, e, &ledger.Observation{Digest: p, At: time.Now(), Detail: json.RawMessage(`{"d":` + jsonString(p) + `}`)})
		bad := e
		bad.Kind = p
		if _, err := w.api("worker-a").Propose(ctx, grants[i], "kind", bad, ledger.Observation{Digest: "d", At: time.Now()}); coordinator.DispositionOf(err) != coordinator.InvalidInput {
			t.Errorf("an effect of kind %q: %v, want invalid_input", p, err)
		}
	}
	// Decisions by identities whose certificate names are payloads, with
	// notes, reasons, whys and evidence that are payloads; the provider's
	// evidence is payloads too.
	g := grants[1]
	confirmed := "confirmed" + payloads[2]
	w.approve("evil-approver", w.propose(g, confirmed, effect(payloads[2], false), nil), payloads[0])
	if rec, err := w.api("worker-a").Dispatch(ctx, g, confirmed); err != nil || rec.State != ledger.Confirmed {
		t.Fatalf("Dispatch: %s, %v", rec.State, err)
	}
	rejected := "rejected" + payloads[3]
	w.propose(g, rejected, effect(payloads[3], false), nil)
	if _, err := w.api("evil-approver").Reject(ctx, tenantA, g.Task, rejected, payloads[1]); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	resolved, review := "resolved"+payloads[4], "review"+payloads[0]
	w.unknown(g, "evil-approver", resolved, payloads[4])
	w.unknown(g, "evil-approver", review, payloads[0])
	w.reconcile(g)
	if _, err := w.api("evil-operator").Resolve(ctx, tenantA, g.Task, resolved, ledger.Failed,
		ledger.Evidence{ProviderIDs: []string{payloads[0]}, Detail: json.RawMessage(`{"e":` + jsonString(payloads[2]) + `}`)}, payloads[3]); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	gu := w.claim("worker-a", tenantA, "unknown"+payloads[4])
	unknown := "unknown" + payloads[1]
	w.unknown(gu, "evil-approver", unknown, payloads[1])

	type page struct {
		as, path string
		want     []string // what the page must show, as text
		status   int      // 0: 200
	}
	pages := []page{
		{"operator-all", "/console/", payloads, 0},
		{"operator-all", "/console/effects", append([]string{unknown, review, resolved, rejected, confirmed}, payloads...), 0},
		// Filters are echoed in the form; an unknown state is the API's
		// refusal, which quotes it.
		{"operator-all", "/console/effects?" + url.Values{"tenant": {payloads[0]}, "task": {payloads[1]}, "state": {payloads[2]}, "kind": {payloads[3]}}.Encode(), []string{`</svg><script>window.__pwned=`}, http.StatusBadRequest},
		{"operator-all", "/console/effects?" + url.Values{"tenant": {tenantA}, "task": {payloads[1]}, "kind": {payloads[3]}}.Encode(), []string{payloads[1], payloads[3]}, 0},
		{"operator-all", "/console/effects?" + url.Values{"tenant": {tenantA}, "task": {payloads[1]}}.Encode(), []string{review, resolved, rejected, confirmed}, 0},
		{"operator-all", opPath(tenantA, g.Task, confirmed), []string{confirmed, payloads[0], payloads[1], payloads[2], w.ids["evil-approver"]}, 0},
		{"operator-all", opPath(tenantA, g.Task, rejected), []string{rejected, payloads[1], w.ids["evil-approver"]}, 0},
		{"operator-all", opPath(tenantA, g.Task, resolved), []string{resolved, payloads[0], asJSON(payloads[2]), payloads[3], w.ids["evil-operator"]}, 0},
		{"operator-all", opPath(tenantA, gu.Task, unknown), []string{unknown, gu.Task}, 0},
		{"evil-approver", "/console/", []string{w.ids["evil-approver"]}, 0},
		{"evil-operator", opPath(tenantA, g.Task, review), []string{review, w.ids["evil-operator"]}, 0},
		// Refusal pages quote what they were asked for: an operation that
		// does not exist, a tenant the identity does not serve.
		{"operator-all", opPath(tenantA, payloads[0], "none"+payloads[2]), []string{"none" + payloads[2]}, http.StatusBadRequest},
		{"approver-a", opPath(payloads[4], payloads[0], payloads[2]), []string{`may not act on tenant`}, http.StatusForbidden},
	}
	for i, p := range payloads {
		pages = append(pages, page{"operator-all", opPath(tenantA, p, p), []string{p}, 0})
		pages = append(pages, page{"evil-approver", opPath(tenantA, p, p), []string{p, w.ids["evil-approver"]}, 0})
		_ = i
	}
	for _, pg := range pages {
		a := w.get(pg.as, pg.path)
		where := pg.as + " " + pg.path
		if want := cmp.Or(pg.status, http.StatusOK); a.status != want {
			t.Errorf("%s: %v", where, a)

			continue
		}
		inert(t, where, a.body)
		// The second line: were markup to slip through, the browser runs
		// only the console's own script file. And no other site may frame
		// the page (a click on an approve button under a decoy) or keep it.
		if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") || a.header.Get("X-Content-Type-Options") != "nosniff" ||
			a.header.Get("X-Frame-Options") != "DENY" || a.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", where, a.header)
		}
		for _, s := range pg.want {
			if !shows(a.body, s) {
				t.Errorf("%s: the page does not show %q", where, s)
			}
		}
	}
	// The forms a hostile record is decided with: the approve form carries
	// the precondition digest and policy (payloads) in attributes, the
	// resolve form is drawn for the operator named by a payload.
	if f := formOf(t, w.get("evil-approver", opPath(tenantA, payloads[1], payloads[1])).body, "approve"); f.Get("precondition_digest") != payloads[1] || f.Get("policy") != payloads[1] {
		t.Errorf("the approve form's digest and policy are %q, %q; want the record's %q", f.Get("precondition_digest"), f.Get("policy"), payloads[1])
	}

	// In a browser: nothing ran, no element was made, the payloads are text.
	b := w.browser("operator-all")
	const noScriptRan = `(function(){
		if (window.__pwned !== undefined) return "a payload ran: " + window.__pwned;
		var bad = document.querySelectorAll("img, iframe, object, embed, foreignObject, script:not([src]), [onerror], [onload], [onclick], [onmouseover], a[href^='javascript']");
		if (bad.length) return "the page has " + bad.length + " elements a payload made: " + bad[0].outerHTML;
		if (document.querySelectorAll("svg").length > 1) return "more than one svg";
		return "";
	})()`
	p := w.page(b, "/console/")
	waitFor(t, p, "the live list", `document.body.dataset.live === "synced"`)
	live := `"><img/src/onerror=window.__pwned='live'>`
	w.claim("worker-a", tenantA, live)
	key, _ := json.Marshal(tenantA + "/" + live)
	waitFor(t, p, "the live row of a task named by a payload", `Array.from(document.querySelectorAll("#tasks tbody tr")).some(function(r){return r.dataset.key === `+string(key)+` && r.cells[1].textContent.length > 0})`)
	for _, path := range []string{"", "/console/effects", opPath(tenantA, payloads[1], payloads[1]), opPath(tenantA, g.Task, resolved)} {
		if path != "" {
			p.Navigate(t, w.url+path)
		}
		if bad := eval[string](t, p, noScriptRan); bad != "" {
			t.Errorf("%s in Chromium: %s", path, bad)
		}
		if txt := eval[string](t, p, `document.body.innerText`); !strings.Contains(txt, payloads[1]) {
			t.Errorf("%s in Chromium: the page does not show %q as text", path, payloads[1])
		}
	}
	if txt := w.get("operator-all", "/console/").body; !shows(txt, live) {
		t.Errorf("the Now page does not show the task %q claimed live", live)
	}
}

// browser is a headless Chromium presenting identity name's certificate.
func (w *attackWorld) browser(name string) *browser.Browser {
	t := w.t
	t.Helper()
	return browser.Start(t, browser.ClientCertificate(t, filepath.Join(w.dir, name+".p12"), console.DevPKCS12Password, w.ca, w.url)...)
}

func (w *attackWorld) page(b *browser.Browser, path string) *browser.Page {
	t := w.t
	t.Helper()
	p := b.NewPage(t, 1280, 900)
	p.Navigate(t, w.url+path)
	return p
}

// refused fails the test unless a is a refusal: a 4xx page, not the
// redirect of a decision made.
func refused(t *testing.T, what string, a answer) {
	t.Helper()
	if a.status < 400 || a.status >= 500 {
		t.Errorf("%s: not refused: %v", what, a)
	}
}

// state is the record's state and journal length, as the API reads them.
func (w *attackWorld) state(tenant, task, operation string) (ledger.State, int) {
	w.t.Helper()
	rec, journal := w.record(tenant, task, operation)
	return rec.State, len(journal)
}

func with(v url.Values, key, value string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	if value == "" {
		out.Del(key)
	} else {
		out.Set(key, value)
	}
	return out
}

// A POST that another site could make the browser send, or that is not
// the console's own form as its page sent it, is refused before anything
// is written: a valid token from another origin, another site or another
// certificate; a token altered, moved in time, or in the URL; a GET or
// another method to the action; a method override; a multipart or plain
// text body; a body over the bound. The same form as the page sent it then
// approves (so each refusal was the defence's, not a malformed request).
func TestForgedOrCrossSitePostsAreRefused(t *testing.T) {
	w := newAttackWorld(t)
	g := w.claim("worker-a", tenantA, "db")
	rec := w.propose(g, "op-csrf", effect("db-2", false), nil)
	path := opPath(tenantA, "db", "op-csrf")
	action := path + "/approve"
	form := formOf(t, w.get("approver-a", path).body, "approve")
	form.Set("note", "checked")
	tok := form.Get("csrf")
	if tok == "" || tok != w.token("approver-a") {
		t.Fatalf("the approve form's token %q is not the page's", tok)
	}
	exp, mac, ok := strings.Cut(tok, ".")
	if !ok {
		t.Fatalf("a token %q that is not expiry.mac", tok)
	}
	expiry, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		t.Fatalf("a token %q whose expiry is not a number: %v", tok, err)
	}
	// The MAC's first character changed (all six of its bits count; the
	// last character's low bits do not).
	altered := exp + "." + map[bool]string{true: "B", false: "A"}[mac[0] == 'A'] + mac[1:]
	// A token with a good MAC, minted as the console makes them (the test
	// holds the key): one whose expiry has passed must be refused for
	// that alone. A fresh one approves another record below, so the
	// minting is right.
	mint := func(expiry int64) string {
		pemBytes, err := os.ReadFile(w.files["approver-a"][0])
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(pemBytes)
		h := hmac.New(sha256.New, console.ActionKey([]byte(sessionKey)))
		h.Write([]byte("leasegate-console-action-v1\x00"))
		sum := sha256.Sum256(blk.Bytes)
		h.Write(sum[:])
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(expiry)))
		return strconv.FormatInt(expiry, 10) + "." + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	}
	sameSite := strings.Replace(w.url, "127.0.0.1", "localhost", 1) // another origin of the same site
	multipartBody := func(f url.Values) (string, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for k, vs := range f {
			for _, v := range vs {
				_ = mw.WriteField(k, v)
			}
		}
		_ = mw.Close()
		return b.String(), mw.FormDataContentType()
	}
	send := func(method, target, contentType, body string, headers map[string]string) answer {
		req := w.request(method, target, strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Origin", w.url)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for k, v := range headers {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		return w.do("approver-a", req)
	}
	const formType = "application/x-www-form-urlencoded"
	attempts := []struct {
		what string
		send func() answer
	}{
		{"a valid token from a cross-site Origin", func() answer {
			return w.post("approver-a", action, form, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
		}},
		{"a valid token, Origin another site, no Sec-Fetch-Site", func() answer {
			return w.post("approver-a", action, form, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""})
		}},
		{"a valid token, Origin null (a sandboxed frame, a redirect)", func() answer {
			return w.post("approver-a", action, form, map[string]string{"Origin": "null", "Sec-Fetch-Site": ""})
		}},
		{"a valid token, Sec-Fetch-Site cross-site, no Origin", func() answer {
			return w.post("approver-a", action, form, map[string]string{"Origin": "", "Sec-Fetch-Site": "cross-site"})
		}},
		{"a valid token, Sec-Fetch-Site same-site, no Origin", func() answer {
			return w.post("approver-a", action, form, map[string]string{"Origin": "", "Sec-Fetch-Site": "same-site"})
		}},
		{"a valid token from another origin of the same site", func() answer {
			return w.post("approver-a", action, form, map[string]string{"Origin": sameSite, "Sec-Fetch-Site": "same-site"})
		}},
		{"another approver's token (another certificate)", func() answer {
			return w.post("approver-a", action, with(form, "csrf", w.token("approver-b")), nil)
		}},
		{"the token of a worker of the same tenant", func() answer {
			return w.post("approver-a", action, with(form, "csrf", w.token("worker-a")), nil)
		}},
		{"no token", func() answer { return w.post("approver-a", action, with(form, "csrf", ""), nil) }},
		{"a token of garbage", func() answer { return w.post("approver-a", action, with(form, "csrf", "x.y"), nil) }},
		{"the token with its expiry an hour in the past", func() answer {
			return w.post("approver-a", action, with(form, "csrf", strconv.FormatInt(expiry-int64(13*time.Hour/time.Second), 10)+"."+mac), nil)
		}},
		{"the token with its expiry a day later", func() answer {
			return w.post("approver-a", action, with(form, "csrf", strconv.FormatInt(expiry+86400, 10)+"."+mac), nil)
		}},
		{"a token with a good MAC that expired a second ago", func() answer {
			return w.post("approver-a", action, with(form, "csrf", mint(time.Now().Unix()-1)), nil)
		}},
		{"the token with its MAC altered", func() answer { return w.post("approver-a", action, with(form, "csrf", altered), nil) }},
		{"the token's MAC alone", func() answer { return w.post("approver-a", action, with(form, "csrf", mac), nil) }},
		{"the token in the query string, not the body", func() answer {
			return w.post("approver-a", action+"?csrf="+url.QueryEscape(tok), with(form, "csrf", ""), nil)
		}},
		{"the form as a GET (token in the URL)", func() answer { return send(http.MethodGet, action+"?"+form.Encode(), "", "", nil) }},
		{"a GET with X-HTTP-Method-Override: POST", func() answer {
			return send(http.MethodGet, action+"?"+form.Encode(), "", "", map[string]string{"X-HTTP-Method-Override": "POST", "X-Method-Override": "POST"})
		}},
		{"PUT", func() answer { return send(http.MethodPut, action, formType, form.Encode(), nil) }},
		{"DELETE", func() answer { return send(http.MethodDelete, action, formType, form.Encode(), nil) }},
		{"PATCH with X-HTTP-Method-Override: POST", func() answer {
			return send(http.MethodPatch, action, formType, form.Encode(), map[string]string{"X-HTTP-Method-Override": "POST"})
		}},
		{"a POST with _method=GET and a cross-site Origin", func() answer {
			return w.post("approver-a", action+"?_method=GET", form, map[string]string{"Origin": "https://evil.example", "X-HTTP-Method-Override": "GET"})
		}},
		{"the form as text/plain (what a cross-site form may send without a preflight)", func() answer {
			return send(http.MethodPost, action, "text/plain", form.Encode(), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
		}},
		{"a multipart form without the token", func() answer {
			body, ct := multipartBody(with(form, "csrf", ""))
			return send(http.MethodPost, action, ct, body, nil)
		}},
		{"a multipart form with the token, cross-site", func() answer {
			body, ct := multipartBody(form)
			return send(http.MethodPost, action, ct, body, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
		}},
		{"a body of 1 MiB (a field the form does not have, past the form's bound)", func() answer {
			return w.post("approver-a", action, with(form, "pad", strings.Repeat("p", 1<<20)), nil)
		}},
	}
	for _, a := range attempts {
		w.wroteNothing(a.what, func() { refused(t, a.what, a.send()) })
	}
	if st, n := w.state(tenantA, "db", "op-csrf"); st != ledger.Proposed || n != 1 {
		t.Fatalf("after the refusals the record is %s with %d journal entries, want PROPOSED with 1", st, n)
	}

	// A freshly minted token approves: the expired one was refused for its
	// expiry.
	minted := w.propose(g, "op-minted", effect("db-2", false), nil)
	mf := w.decision("approver-a", "approve", minted)
	mf.Set("csrf", mint(time.Now().Add(time.Hour).Unix()))
	if a := w.post("approver-a", opPath(tenantA, "db", "op-minted")+"/approve", mf, nil); a.status != http.StatusSeeOther {
		t.Fatalf("a freshly minted token: %v", a)
	}
	if st, _ := w.state(tenantA, "db", "op-minted"); st != ledger.Authorized {
		t.Fatalf("a freshly minted token left the record %s", st)
	}

	// The form as the page sent it: approved, by the certificate's identity.
	a := w.post("approver-a", action, form, nil)
	if loc, err := url.Parse(a.header.Get("Location")); a.status != http.StatusSeeOther || err != nil || loc.EscapedPath() != path {
		t.Fatalf("the page's own form: %v, want a redirect to %s", a, path)
	}
	got, journal := w.record(tenantA, "db", "op-csrf")
	if last := journal[len(journal)-1]; got.State != ledger.Authorized || last.Approver != w.ids["approver-a"] ||
		got.ParamsDigest != rec.ParamsDigest || got.Approval == nil || got.Approval.Note != "checked" {
		t.Fatalf("after the page's form: %s, journal %+v", got.State, last)
	}
}

// decision is the form of action on rec, as identity name's page would
// send it (name's own token, the record's digests).
func (w *attackWorld) decision(name, action string, rec ledger.Record) url.Values {
	f := url.Values{"csrf": {w.token(name)}}
	switch action {
	case "approve":
		f.Set("params_digest", rec.ParamsDigest)
		f.Set("precondition_digest", rec.Precondition.Digest)
		f.Set("policy", rec.Effect.Policy)
		f.Set("note", "by "+name)
	case "reject":
		f.Set("reason", "by "+name)
	case "resolve":
		f.Set("to", string(ledger.Superseded))
		f.Set("why", "by "+name)
	}
	return f
}

// Each role reaches each action (approve, reject, resolve) on a record of
// its own tenant and of another: only an approver of the record's tenant
// approves or rejects, only an operator of its tenant (or of all) resolves;
// every other POST, with the identity's own valid token, is refused and
// writes nothing. The decisions made name the certificate's identity.
func TestEachRoleDecidesOnlyItsOwnTenantsRecords(t *testing.T) {
	w := newAttackWorld(t)
	recs := map[string]ledger.Record{}
	for _, tenant := range []string{tenantA, tenantB} {
		approver := map[string]string{tenantA: "approver-a", tenantB: "approver-b"}[tenant]
		g := w.claim(workerOf(tenant), tenant, "task")
		recs[tenant+" PROPOSED"] = w.propose(g, "proposed", effect("x", false), nil)
		gr := w.claim(workerOf(tenant), tenant, "review")
		w.unknown(gr, approver, "review", "x")
		w.reconcile(gr)
		rec, _ := w.record(tenant, "review", "review")
		recs[tenant+" MANUAL_REVIEW"] = rec
	}
	allowed := func(name, action string, rec ledger.Record) bool {
		switch {
		case action == "resolve" && rec.State == ledger.ManualReview:
			return name == "operator-all" || (name == "operator-a" || name == "evil-operator") && rec.Tenant == tenantA
		case action != "resolve" && rec.State == ledger.Proposed:
			return (name == "approver-a" || name == "evil-approver") && rec.Tenant == tenantA || name == "approver-b" && rec.Tenant == tenantB
		}
		return false
	}
	names := []string{"worker-a", "worker-b", "approver-a", "approver-b", "operator-a", "operator-all", "evil-approver", "evil-operator"}
	for _, name := range names {
		for what, rec := range recs {
			for _, action := range []string{"approve", "reject", "resolve"} {
				if allowed(name, action, rec) {
					continue
				}
				desc := fmt.Sprintf("%s %ss %s", name, action, what)
				w.wroteNothing(desc, func() {
					refused(t, desc, w.post(name, opPath(rec.Tenant, rec.Task, rec.Operation)+"/"+action, w.decision(name, action, rec), nil))
				})
			}
		}
	}
	for what, rec := range recs {
		if st, n := w.state(rec.Tenant, rec.Task, rec.Operation); st != rec.State || n != int(rec.Seq) {
			t.Fatalf("%s is %s with %d entries after the refusals, was %s with %d", what, st, n, rec.State, rec.Seq)
		}
	}
	// The decisions each may make, made from the console: the journal
	// names the certificate's identity.
	for _, d := range []struct{ name, action, what string }{
		{"approver-a", "approve", tenantA + " PROPOSED"},
		{"approver-b", "reject", tenantB + " PROPOSED"},
		{"operator-a", "resolve", tenantA + " MANUAL_REVIEW"},
		{"operator-all", "resolve", tenantB + " MANUAL_REVIEW"},
	} {
		rec := recs[d.what]
		if a := w.post(d.name, opPath(rec.Tenant, rec.Task, rec.Operation)+"/"+d.action, w.decision(d.name, d.action, rec), nil); a.status != http.StatusSeeOther {
			t.Fatalf("%s %ss %s: %v", d.name, d.action, d.what, a)
		}
		_, journal := w.record(rec.Tenant, rec.Task, rec.Operation)
		last := journal[len(journal)-1]
		if last.Seq != rec.Seq+1 || !strings.Contains(last.Approver+" "+last.Reason, w.ids[d.name]) {
			t.Errorf("%s %ss %s: the journal's entry %+v does not name %s", d.name, d.action, d.what, last, w.ids[d.name])
		}
	}
}

// The secrets of tenant-b's record: what a page must not show an identity
// of tenant-a.
const (
	bravoTarget = "bravo-target-secret"
	bravoParam  = "bravo-param-secret"
)

// Tricks in the path of an operation's page and its actions, and in the
// Effects filters, never widen what an identity of tenant-a sees or does:
// percent-encoded slashes, "..", a tenant "*", empty segments, repeated
// and comma-joined filters. Nothing of tenant-b's record reaches its pages
// (an operator of all tenants sees it, so the test would), and no approval
// of it is written.
func TestPathTricksDoNotWidenATenantsView(t *testing.T) {
	w := newAttackWorld(t)
	gb := w.claim("worker-b", tenantB, "bravo")
	pb := w.propose(gb, "pb", ledger.Effect{Kind: attackKind, Target: bravoTarget, Params: json.RawMessage(`{"p":"` + bravoParam + `"}`), Policy: "v1"}, nil)
	ga := w.claim("worker-a", tenantA, "alpha")
	w.propose(ga, "pa", effect("alpha-target", false), nil)
	leaks := func(body string) string {
		for _, s := range []string{bravoTarget, bravoParam, pb.ParamsDigest, pb.Precondition.Digest} {
			if strings.Contains(body, s) {
				return s
			}
		}
		return ""
	}
	// The test sees the secrets where they are shown.
	for _, path := range []string{opPath(tenantB, "bravo", "pb"), "/console/effects", "/console/effects?tenant=tenant-b"} {
		if a := w.get("operator-all", path); leaks(a.body) == "" {
			t.Fatalf("an operator of all tenants does not see tenant-b's record on %s: %v", path, a)
		}
	}
	if a := w.get("approver-a", "/console/effects"); !strings.Contains(a.body, "alpha-target") {
		t.Fatalf("approver-a does not see its own tenant's record: %v", a)
	}
	pages := []string{
		opPath(tenantB, "bravo", "pb"),
		"/console/op/*/bravo/pb",
		"/console/op/%2A/bravo/pb",
		"/console/op/tenant-a%2F..%2Ftenant-b/bravo/pb",
		"/console/op/tenant-a/..%2F..%2Fop%2Ftenant-b/bravo/pb",
		"/console/op/tenant-a/../tenant-b/bravo/pb",
		"/console/op/tenant-a/%2E%2E/tenant-b/bravo/pb",
		"/console/op//bravo/pb",
		"/console/op/tenant-b//pb",
		"/console/op/tenant-b/bravo/",
		"/console/op/tenant-b/bravo/pb/",
		"/console/op/tenant-b%00/bravo/pb",
		"/console/op/Tenant-B/bravo/pb",
		"/console/effects?tenant=tenant-b",
		"/console/effects?tenant=*",
		"/console/effects?tenant=%2A",
		"/console/effects?tenant=",
		"/console/effects?tenant=tenant-a&tenant=tenant-b",
		"/console/effects?tenant=tenant-b&tenant=tenant-a",
		"/console/effects?tenant=tenant-a,tenant-b",
		"/console/effects?tenant=tenant-b&task=bravo",
		"/console/effects?tenant=*&task=bravo",
		"/console/effects?tenant=tenant-a/../tenant-b",
		"/console/effects?task=bravo",
		"/console/effects?kind=" + attackKind,
		"/console/effects?state=PROPOSED",
	}
	for _, path := range pages {
		a := w.get("approver-a", path)
		for hops := 0; a.status/100 == 3 && hops < 3; hops++ { // follow a redirect (a cleaned path) as a browser would
			loc, err := url.Parse(a.header.Get("Location"))
			if err != nil {
				t.Fatalf("%s: a redirect to %q", path, a.header.Get("Location"))
			}
			a = w.get("approver-a", loc.RequestURI())
		}
		if s := leaks(a.body); s != "" {
			t.Errorf("approver-a GET %s: tenant-b's %q in the page: %v", path, s, a)
		}
	}
	form := w.decision("approver-a", "approve", pb)
	for _, path := range pages[:13] {
		desc := "approver-a approves through " + path
		w.wroteNothing(desc, func() {
			a := w.post("approver-a", path+"/approve", form, nil)
			// A cleaned path is a 307: a browser sends the POST again there.
			for hops := 0; (a.status == http.StatusTemporaryRedirect || a.status == http.StatusPermanentRedirect) && hops < 3; hops++ {
				loc, err := url.Parse(a.header.Get("Location"))
				if err != nil {
					t.Fatalf("%s: a redirect to %q", desc, a.header.Get("Location"))
				}
				a = w.post("approver-a", loc.RequestURI(), form, nil)
			}
			refused(t, desc, a)
		})
	}
	if st, n := w.state(tenantB, "bravo", "pb"); st != ledger.Proposed || n != 1 {
		t.Fatalf("tenant-b's record is %s with %d entries, want PROPOSED with 1", st, n)
	}
}

// An approval names the digests its page showed: a record decided by
// another since the page was read, or a form whose digests were altered,
// is refused and writes nothing; the same form sent twice approves once.
func TestAnApprovalOfAStaleOrAlteredReadIsRefused(t *testing.T) {
	w := newAttackWorld(t)
	g := w.claim("worker-a", tenantA, "db")
	ctx := ctxOf(t)
	pageForm := func(operation string) (string, url.Values) {
		path := opPath(tenantA, "db", operation)
		f := formOf(t, w.get("approver-a", path).body, "approve")
		f.Set("note", "looked at it")
		return path + "/approve", f
	}
	// The premise: a record's digests never change after Propose.
	rec := w.propose(g, "op-rejected", effect("db-2", false), nil)
	if _, err := w.api("worker-a").Propose(ctx, g, "op-rejected", effect("db-3", false), rec.Precondition); coordinator.DispositionOf(err) != coordinator.OperationConflict {
		t.Fatalf("the same operation proposed with other parameters: %v, want operation_conflict", err)
	}
	// Read, then rejected by another approver: the approval is refused.
	action, f := pageForm("op-rejected")
	if _, err := w.api("evil-approver").Reject(ctx, tenantA, "db", "op-rejected", "no"); err != nil {
		t.Fatal(err)
	}
	w.wroteNothing("approving a record rejected since", func() { refused(t, "approving a record rejected since", w.post("approver-a", action, f, nil)) })
	// Read, then approved by another: this approval is refused, the other
	// stands.
	w.propose(g, "op-other", effect("db-2", false), nil)
	action, f = pageForm("op-other")
	other, _ := w.record(tenantA, "db", "op-other")
	w.approve("evil-approver", other, "mine")
	w.wroteNothing("approving a record approved since by another", func() {
		refused(t, "approving a record approved since by another", w.post("approver-a", action, f, nil))
	})
	if got, _ := w.record(tenantA, "db", "op-other"); got.Approval == nil || got.Approval.Approver != w.ids["evil-approver"] {
		t.Fatalf("the standing approval is %+v, want evil-approver's", got.Approval)
	}
	// Altered digests: refused, nothing written.
	w.propose(g, "op-altered", effect("db-2", false), nil)
	action, f = pageForm("op-altered")
	for _, field := range []string{"params_digest", "precondition_digest"} {
		desc := "an approval with " + field + " altered"
		w.wroteNothing(desc, func() { refused(t, desc, w.post("approver-a", action, with(f, field, "0"+f.Get(field)[1:]), nil)) })
	}
	desc := "an approval under another policy"
	w.wroteNothing(desc, func() { refused(t, desc, w.post("approver-a", action, with(f, "policy", "v0"), nil)) })
	// The form as read, twice (a double click, a resent POST): one approval.
	for i := 0; i < 2; i++ {
		if a := w.post("approver-a", action, f, nil); a.status != http.StatusSeeOther {
			t.Fatalf("the page's form, sent %d times: %v", i+1, a)
		}
	}
	got, journal := w.record(tenantA, "db", "op-altered")
	if got.State != ledger.Authorized || len(journal) != 2 || journal[1].Approver != w.ids["approver-a"] {
		t.Fatalf("after the form twice: %s, journal %+v; want one approval by approver-a", got.State, journal)
	}
}

// liveStream is one /console/live stream read by a plain client: its
// answer's status and header, and its events (the data lines, and the
// retry lines as they are) as they come.
type liveStream struct {
	status int
	header http.Header
	events chan string
	cancel context.CancelFunc
	done   chan struct{}
}

// openLive opens /console/live as identity name.
func (w *attackWorld) openLive(name string) *liveStream {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url+"/console/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: w.tlsFor(name), ForceAttemptHTTP2: true}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		cancel()
		t.Fatalf("/console/live as %s: %v", name, err)
	}
	ls := &liveStream{status: resp.StatusCode, header: resp.Header, events: make(chan string, 64), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ls.done)
		defer tr.CloseIdleConnections()
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			ev, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok && strings.HasPrefix(sc.Text(), "retry:") {
				ev, ok = sc.Text(), true
			}
			if ok {
				select {
				case ls.events <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	t.Cleanup(ls.close)
	return ls
}

func (ls *liveStream) close() {
	ls.cancel()
	<-ls.done
}

// until reads events until one satisfies f, and returns every event read;
// it fails the test if the stream ends first or none comes in time.
func (ls *liveStream) until(t *testing.T, what string, f func(string) bool) []string {
	t.Helper()
	var seen []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-ls.events:
			seen = append(seen, ev)
			if f(ev) {
				return seen
			}
		case <-ls.done:
			// The events it sent before it ended are all buffered by now.
			for {
				select {
				case ev := <-ls.events:
					seen = append(seen, ev)
					if f(ev) {
						return seen
					}
					continue
				default:
				}
				t.Fatalf("the stream ended before %s; it sent %q", what, seen)
			}
		case <-timeout:
			t.Fatalf("no %s on the stream in 30 s; it sent %q", what, seen)
		}
	}
}

func isSynced(ev string) bool { return strings.Contains(ev, `"type":"synced"`) }

// taskEvent is an event of task of one of types.
func taskEvent(task string, types ...string) func(string) bool {
	return func(ev string) bool {
		for _, typ := range types {
			if strings.Contains(ev, `"task":"`+task+`"`) && strings.Contains(ev, `"type":"`+typ+`"`) {
				return true
			}
		}
		return false
	}
}

// The live stream of an identity of tenant-a carries tenant-a's ownership
// changes and nothing of tenant-b's, made meanwhile and in between; an
// operator of all tenants, on the same changes, sees tenant-b's (so the
// test would see them).
func TestLiveStreamOfOneTenantCarriesNothingOfAnother(t *testing.T) {
	w := newAttackWorld(t)
	ga := w.claim("worker-a", tenantA, "alpha-before")
	gb := w.claim("worker-b", tenantB, "bravo-before")
	mine, all := w.openLive("approver-a"), w.openLive("operator-all")
	var got []string
	got = append(got, mine.until(t, "the synced event", isSynced)...)
	all.until(t, "the synced event", isSynced)
	gb2 := w.claim("worker-b", tenantB, "bravo-live")
	w.claim("worker-a", tenantA, "alpha-live")
	got = append(got, mine.until(t, "alpha-live's claim", taskEvent("alpha-live", "claimed"))...)
	all.until(t, "bravo-live's claim", taskEvent("bravo-live", "claimed"))
	for _, g := range []coordinator.Grant{gb, gb2} {
		if err := w.api("worker-b").Release(ctxOf(t), g); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.api("worker-a").Release(ctxOf(t), ga); err != nil {
		t.Fatal(err)
	}
	all.until(t, "bravo-before's release", taskEvent("bravo-before", "vacated"))
	got = append(got, mine.until(t, "alpha-before's release", taskEvent("alpha-before", "vacated"))...)
	for _, ev := range got {
		if strings.Contains(ev, "bravo") || strings.Contains(ev, tenantB) || strings.Contains(ev, w.ids["worker-b"]) {
			t.Errorf("approver-a's live stream carries tenant-b's %s", ev)
		}
	}
	if t.Failed() {
		t.Logf("approver-a's stream: %q", got)
	}
}

// A client with no certificate, with one of the CA that the configuration
// does not name, or with one of another CA gets the "who are you" page on
// every path of the console — the live stream and every action included —
// and nothing of any tenant; a POST writes nothing. The static assets need
// no identity and hold nothing: the same bytes for everyone, no token, no
// name of any tenant, task or identity.
func TestWithoutAKnownCertificateOnlyWhoAreYou(t *testing.T) {
	w := newAttackWorld(t)
	g := w.claim("worker-a", tenantA, "alpha-secret-task")
	rec := w.propose(g, "op-secret", effect("alpha-target-secret", false), nil)
	// A certificate of a CA the gateway does not trust, naming an identity
	// it knows.
	_, fca, fkey := newCA(t, w.dir)
	cf, kf := issue(t, w.dir, "foreign", "operator-all", fca, fkey)
	w.files["foreign"] = [2]string{cf, kf}
	markers := []string{"alpha-secret-task", "alpha-target-secret", "op-secret", tenantA, w.ids["worker-a"], rec.ParamsDigest,
		"leasegate-action-token", `name="csrf"`}
	// A page may quote the path it was asked for: a marker in the path
	// is not a leak.
	leak := func(body, path string) string {
		for _, m := range markers {
			if strings.Contains(body, m) && !strings.Contains(path, m) {
				return m
			}
		}
		return ""
	}
	routes := []string{"/console/", "/console/effects", "/console/effects?tenant=tenant-a", opPath(tenantA, "alpha-secret-task", "op-secret"),
		"/console/live", "/console/static/../effects", "/console/op/tenant-a/alpha-secret-task/../alpha-secret-task/op-secret"}
	notRoutes := []string{"/console/nope", "/console/op/tenant-a", "/console/op/tenant-a/alpha-secret-task/op-secret/approve"}
	static := []string{"/console/static/console.js", "/console/static/console.css", "/console/static/"}
	withCert := map[string]string{}
	for _, path := range static {
		a := w.get("operator-all", path)
		if a.status != http.StatusOK {
			t.Fatalf("%s with a certificate: %v", path, a)
		}
		withCert[path] = a.body
	}
	form := w.decision("approver-a", "approve", rec)
	for _, who := range []string{"", "stranger", "foreign"} {
		resp, err := w.browserless(who).Get(w.url + "/console/")
		if err != nil {
			if who == "foreign" { // refused at the handshake: nothing to read
				t.Logf("a certificate of another CA: %v", err)
				continue
			}
			t.Fatalf("as %q: %v", who, err)
		}
		resp.Body.Close()
		get := func(path string) answer { // as a browser: following a redirect
			a := w.get(who, path)
			for hops := 0; a.status/100 == 3 && hops < 3; hops++ {
				loc, err := url.Parse(a.header.Get("Location"))
				if err != nil {
					t.Fatalf("%s: a redirect to %q", path, a.header.Get("Location"))
				}
				a = w.get(who, loc.RequestURI())
			}
			return a
		}
		for _, path := range routes {
			a := get(path)
			if a.status != http.StatusUnauthorized || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") || !strings.Contains(a.body, "Who are you?") {
				t.Errorf("GET %s as %q: %v, want the who-are-you page (401)", path, who, a)
			}
			if m := leak(a.body, path); m != "" {
				t.Errorf("GET %s as %q: the page holds %q", path, who, m)
			}
		}
		// A path the console does not serve is not found, for everyone
		// alike: that holds nothing either.
		for _, path := range notRoutes {
			if a := get(path); a.status != http.StatusUnauthorized && a.status != http.StatusNotFound && a.status != http.StatusMethodNotAllowed || leak(a.body, path) != "" {
				t.Errorf("GET %s as %q: %v, want the who-are-you page or not found, holding nothing", path, who, a)
			}
		}
		for _, action := range []string{"approve", "reject", "resolve"} {
			path := opPath(tenantA, "alpha-secret-task", "op-secret") + "/" + action
			desc := fmt.Sprintf("POST %s as %q", path, who)
			w.wroteNothing(desc, func() {
				a := w.post(who, path, form, nil)
				if a.status != http.StatusUnauthorized || leak(a.body, path) != "" {
					t.Errorf("%s: %v, want the who-are-you page (401) and nothing else", desc, a)
				}
			})
		}
		for _, path := range static {
			a := get(path)
			if a.status != http.StatusOK || a.body != withCert[path] {
				t.Errorf("GET %s as %q: %v, want the bytes an identity gets", path, who, a)
			}
			if m := leak(a.body, path); m != "" {
				t.Errorf("GET %s as %q: the asset holds %q", path, who, m)
			}
		}
	}
	if st, n := w.state(tenantA, "alpha-secret-task", "op-secret"); st != ledger.Proposed || n != 1 {
		t.Fatalf("the record is %s with %d entries, want PROPOSED with 1", st, n)
	}
}

// tokenShape is an action token as the console's pages carry one (an
// expiry in Unix seconds, a dot, a base64url HMAC-SHA-256), whenever it
// was made.
var tokenShape = regexp.MustCompile(`[0-9]{10}\.[A-Za-z0-9_-]{43}`)

// No page, header or redirect carries a key, and no header, URL or
// redirect carries the action token (it is in the page body only); a
// refusal does not echo the token it was sent; no cookie is set.
func TestNoSecretInHeadersURLsOrRefusals(t *testing.T) {
	w := newAttackWorld(t)
	g := w.claim("worker-a", tenantA, "db")
	rec := w.propose(g, "op-leak", effect("db-2", false), nil)
	path := opPath(tenantA, "db", "op-leak")
	tok := w.token("approver-a")
	_, mac, _ := strings.Cut(tok, ".")
	other := w.token("approver-b")
	_, otherMAC, _ := strings.Cut(other, ".")
	actionKey := console.ActionKey([]byte(sessionKey))
	secrets := map[string]string{"the session key": sessionKey}
	for name, k := range map[string][]byte{"session key": []byte(sessionKey), "action key": actionKey} {
		secrets[name+" (hex)"] = hex.EncodeToString(k)
		secrets[name+" (base64)"] = base64.StdEncoding.EncodeToString(k)
		secrets[name+" (base64url)"] = base64.RawURLEncoding.EncodeToString(k)
	}
	secrets["the action key"] = string(actionKey)
	for _, name := range []string{"approver-a", "operator-all"} {
		key, err := os.ReadFile(w.files[name][1])
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(key)
		secrets[name+"'s private key"] = base64.StdEncoding.EncodeToString(blk.Bytes)[:40]
	}
	type seen struct {
		what string
		a    answer
	}
	var answers []seen
	look := func(what string, a answer) { answers = append(answers, seen{what, a}) }
	for _, p := range []string{"/console/", "/console/effects", "/console/effects?tenant=tenant-b", path, opPath(tenantB, "db", "op-leak"), "/console/nope", "/console/static/console.js"} {
		look("approver-a GET "+p, w.get("approver-a", p))
	}
	look("no certificate GET /console/", w.get("", "/console/"))
	look("stranger GET /console/", w.get("stranger", "/console/"))
	form := formOf(t, w.get("approver-a", path).body, "approve")
	look("approver-a POST with approver-b's token", w.post("approver-a", path+"/approve", with(form, "csrf", other), nil))
	look("approver-a POST a cross-site form", w.post("approver-a", path+"/approve", form, map[string]string{"Origin": "https://evil.example"}))
	look("approver-a POST altered digests (the API's refusal)", w.post("approver-a", path+"/approve", with(form, "params_digest", "00"), nil))
	look("worker-a POST an approval (the API's refusal)", w.post("worker-a", path+"/approve", with(form, "csrf", w.token("worker-a")), nil))
	look("approver-a POST the page's form", w.post("approver-a", path+"/approve", form, nil))
	live := w.openLive("approver-a")
	live.until(t, "the synced event", isSynced)
	look("approver-a GET /console/live", answer{status: live.status, header: live.header})
	live.close()

	for _, s := range answers {
		for k, vs := range s.a.header {
			if k == "Set-Cookie" {
				t.Errorf("%s: sets a cookie %q", s.what, vs)
			}
			for _, v := range vs {
				for name, secret := range secrets {
					if strings.Contains(v, secret) {
						t.Errorf("%s: header %s carries %s", s.what, k, name)
					}
				}
				if tokenShape.MatchString(v) || strings.Contains(v, mac) {
					t.Errorf("%s: header %s: %q carries an action token", s.what, k, v)
				}
			}
		}
		for name, secret := range secrets {
			if strings.Contains(s.a.body, secret) {
				t.Errorf("%s: the page carries %s", s.what, name)
			}
		}
		if strings.Contains(s.a.body, otherMAC) {
			t.Errorf("%s: the page echoes approver-b's token", s.what)
		}
		z := html.NewTokenizer(strings.NewReader(s.a.body))
		for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
			if tt == html.StartTagToken || tt == html.SelfClosingTagToken {
				tok := z.Token()
				for _, at := range tok.Attr {
					if (at.Key == "href" || at.Key == "src" || at.Key == "action") && (tokenShape.MatchString(at.Val) || strings.Contains(at.Val, mac)) {
						t.Errorf("%s: a URL carries the action token: <%s %s=%q>", s.what, tok.Data, at.Key, at.Val)
					}
				}
			}
		}
	}
	if got, _ := w.record(tenantA, "db", "op-leak"); got.State != ledger.Authorized || got.ParamsDigest != rec.ParamsDigest {
		t.Fatalf("the page's own form did not approve: %s", got.State)
	}
}

// Live streams are bounded by the gateway's per-identity limit on
// WatchOwnership streams (its default, 32, as serve --dev has it): an
// identity of one tenant holds one watch per open stream; the 33rd stream
// is refused, holds nothing in etcd and ends (naming a retry delay, so the
// browser does not reconnect in a loop), and the page in a browser says
// why; closing one stream frees its unit for the next.
func TestLiveStreamsStopAtTheWatchLimit(t *testing.T) {
	w := newAttackWorld(t)
	limit := gateway.DefaultLimits().Watches
	units := func() int {
		resp, err := w.c.Client().Get(ctxOf(t), w.prefix+"/limits/watches/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return int(resp.Count)
	}
	waitUnits := func(want int) {
		t.Helper()
		// Each unit's key is deleted by the stream's end: wait on etcd's
		// watch of them rather than a sleep.
		ctx, cancel := context.WithTimeout(ctxOf(t), 30*time.Second)
		defer cancel()
		wch := w.c.Client().Watch(ctx, w.prefix+"/limits/watches/", clientv3.WithPrefix())
		for units() != want {
			select {
			case <-wch:
			case <-ctx.Done():
				t.Fatalf("%d watch units held, want %d", units(), want)
			}
		}
	}
	var streams []*liveStream
	for i := 0; i < limit; i++ {
		ls := w.openLive("approver-a")
		ls.until(t, fmt.Sprintf("stream %d's synced event", i+1), isSynced)
		streams = append(streams, ls)
	}
	if n := units(); n != limit {
		t.Fatalf("%d streams hold %d watch units", limit, n)
	}
	over := w.openLive("approver-a")
	got := over.until(t, "the refusal of the stream over the limit", func(ev string) bool {
		return isSynced(ev) || strings.Contains(ev, `"type":"error"`)
	})
	if last := got[len(got)-1]; isSynced(last) || !strings.Contains(last, "limits.watches") {
		t.Errorf("stream %d: %q, want a refusal naming the limit", limit+1, got)
	}
	// Refused, the stream ends rather than hold a connection that carries
	// nothing, and tells the browser to wait before it tries again.
	select {
	case <-over.done:
	case <-time.After(30 * time.Second):
		t.Errorf("stream %d was refused and is still open after 30 s", limit+1)
	}
	retry := -1
	for _, ev := range got {
		if v, ok := strings.CutPrefix(ev, "retry:"); ok {
			retry, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if retry < 1000 {
		t.Errorf("stream %d: %q, want a retry of at least a second before the browser reconnects", limit+1, got)
	}
	over.close()
	if n := units(); n != limit {
		t.Fatalf("after the refused stream, %d watch units held, want %d", n, limit)
	}
	// In a browser the Now page says why it is not live, and keeps saying
	// it while it waits to try again (its stream ended).
	p := w.page(w.browser("approver-a"), "/console/")
	waitFor(t, p, "the page saying why it is not live and that it will try again",
		`document.getElementById("live-state").textContent.indexOf("limits.watches") >= 0 && document.getElementById("live-state").textContent.indexOf("trying again") >= 0`)
	if n := units(); n != limit {
		t.Fatalf("after the browser's refused stream, %d watch units held, want %d", n, limit)
	}
	streams[0].close()
	waitUnits(limit - 1)
	again := w.openLive("approver-a")
	again.until(t, "the synced event of a stream opened after one closed", isSynced)
	waitUnits(limit)
	again.close()
	for _, ls := range streams[1:] {
		ls.close()
	}
	waitUnits(0)
}

// invisible are characters that change how text reads without being seen:
// a right-to-left override, a left-to-right isolate and its end, a
// zero-width space, and a control character.
var invisible = []rune{'\u202e', '\u2066', '\u2069', '\u200b', '\u0007'}

// hidesText reports whether s holds a character of invisible.
func hidesText(s string) bool { return strings.ContainsAny(s, string(invisible)) }

// What an approver judges cannot be made to read as something else: a
// target, parameters, a precondition, evidence, a note and a reason that
// hold a right-to-left override (which shows "db-2" for other bytes),
// isolates, a zero-width space or a control character are drawn with
// those characters written out, on the Operation and Effects pages and in
// the timeline; the approve form still carries the exact digests, and
// approves the record.
func TestInvisibleCharactersAreShownNotObeyed(t *testing.T) {
	w := newAttackWorld(t)
	ctx := ctxOf(t)
	g := w.claim("worker-a", tenantA, "db")
	spoof := "db-\u202e2-bd\u2066x\u2069\u200b\u0007" // reads "db-db-2…"
	e := ledger.Effect{Kind: attackKind, Target: spoof, Policy: "v1",
		Params: json.RawMessage(`{"to":` + jsonString(spoof) + `,` + jsonString("\u202ekey") + `:1}`)}
	pre := ledger.Observation{Digest: "world\u202e1", At: time.Now(), Detail: json.RawMessage(`{"seen":` + jsonString(spoof) + `}`)}
	w.propose(g, "op-spoof", e, &pre)
	rejected := w.propose(g, "op-spoof-rejected", e, &pre)
	if _, err := w.api("approver-a").Reject(ctx, tenantA, "db", rejected.Operation, "no\u202e reason\u200b"); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	for _, path := range []string{opPath(tenantA, "db", "op-spoof"), opPath(tenantA, "db", "op-spoof-rejected"), "/console/effects"} {
		a := w.get("approver-a", path)
		if a.status != http.StatusOK {
			t.Fatalf("%s: %v", path, a)
		}
		// Text, and attributes other than a form's values, hold none.
		z := html.NewTokenizer(strings.NewReader(a.body))
		for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
			tok := z.Token()
			switch tt {
			case html.TextToken:
				if hidesText(tok.Data) {
					t.Errorf("%s: text %q holds an invisible character", path, tok.Data)
				}
			case html.StartTagToken, html.SelfClosingTagToken:
				if tok.Data == "title" {
					z.NextIsNotRawText()
				}
				for _, at := range tok.Attr {
					if hidesText(at.Val) && !(tok.Data == "input" && at.Key == "value") {
						t.Errorf("%s: <%s %s=%q> holds an invisible character", path, tok.Data, at.Key, at.Val)
					}
				}
			}
		}
		if !shows(a.body, "[U+202E]") {
			t.Errorf("%s: the right-to-left override is not written out", path)
		}
	}
	path := opPath(tenantA, "db", "op-spoof")
	f := formOf(t, w.get("approver-a", path).body, "approve")
	if f.Get("precondition_digest") != pre.Digest {
		t.Fatalf("the approve form carries precondition digest %q, want the record's %q", f.Get("precondition_digest"), pre.Digest)
	}
	if a := w.post("approver-a", path+"/approve", f, nil); a.status != http.StatusSeeOther {
		t.Fatalf("approving the record as read: %v", a)
	}
	if st, _ := w.state(tenantA, "db", "op-spoof"); st != ledger.Authorized {
		t.Fatalf("the record is %s after its approval, want AUTHORIZED", st)
	}
}

// flashOf is the text of the operation page's "Done: …" line ("" if none).
func flashOf(body string) string {
	i := strings.Index(body, `id="flash"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], "</p>")
	return html.UnescapeString(body[i : i+j])
}

// The line an operation's page shows after a decision ("Done: approve")
// comes from the URL the decision redirected to; a link anyone can send
// must not put words of its own there, nor announce a decision the
// journal does not hold.
func TestADecisionsLineCannotBeForgedByALink(t *testing.T) {
	w := newAttackWorld(t)
	g := w.claim("worker-a", tenantA, "db")
	rec := w.propose(g, "op-flash", effect("db-2", false), nil)
	path := opPath(tenantA, "db", "op-flash")
	for _, done := range []string{"approve — the incident commander asks you to approve op-evil too", "approve", "reject", "resolve", payloads[1]} {
		a := w.get("approver-a", path+"?"+url.Values{"done": {done}}.Encode())
		if a.status != http.StatusOK {
			t.Fatalf("%s?done=%q: %v", path, done, a)
		}
		if f := flashOf(a.body); f != "" {
			t.Errorf("?done=%q on a record nobody decided: the page says %q", done, f)
		}
		inert(t, path+"?done=…", a.body)
	}
	// A decision made: its redirect's page says so.
	a := w.post("approver-a", path+"/approve", w.decision("approver-a", "approve", rec), nil)
	loc, err := url.Parse(a.header.Get("Location"))
	if a.status != http.StatusSeeOther || err != nil {
		t.Fatalf("approving: %v", a)
	}
	if f := flashOf(w.get("approver-a", loc.RequestURI()).body); !strings.Contains(f, "approve") {
		t.Errorf("after the approval, its page says %q, want the approval done", f)
	}
	if f := flashOf(w.get("approver-a", path+"?done=reject").body); f != "" {
		t.Errorf("?done=reject on an approved record: the page says %q", f)
	}
}

// An operator's resolve form, altered past what the page offers — a state
// the ledger does not allow from MANUAL_REVIEW, one spelled otherwise,
// an outcome without evidence, evidence that is not JSON or too large, no
// why — is refused and writes nothing; the form as offered resolves.
func TestResolveFieldsOutsideTheFormAreRefused(t *testing.T) {
	w := newAttackWorld(t)
	g := w.claim("worker-a", tenantA, "review")
	w.unknown(g, "approver-a", "op-review", "x")
	w.reconcile(g)
	path := opPath(tenantA, "review", "op-review")
	form := formOf(t, w.get("operator-all", path).body, "resolve")
	form.Set("why", "the provider's log shows it applied")
	form.Set("provider_ids", "req-1\nreq-2")
	form.Set("detail", `{"log":"applied at 02:13"}`)
	bigDetail := `{"x":"` + strings.Repeat("d", 100<<10) + `"}`
	for _, alt := range []struct{ what, key, value string }{
		{"to AUTHORIZED", "to", string(ledger.Authorized)},
		{"to PROPOSED", "to", string(ledger.Proposed)},
		{"to DISPATCHING", "to", string(ledger.Dispatching)},
		{"to UNKNOWN", "to", string(ledger.Unknown)},
		{"to MANUAL_REVIEW", "to", string(ledger.ManualReview)},
		{"no to", "to", ""},
		{"to confirmed (lower case)", "to", "confirmed"},
		{"to CONFIRMED with a trailing space", "to", "CONFIRMED "},
		{"no why", "why", ""},
		{"a why past the ledger's bound", "why", strings.Repeat("w", 8<<10)},
		{"evidence detail that is not JSON", "detail", `{"log":`},
		{"evidence detail past the ledger's bound", "detail", bigDetail},
	} {
		f := with(form, alt.key, alt.value)
		if alt.value == "" {
			f.Del(alt.key)
		}
		desc := "a resolution with " + alt.what
		w.wroteNothing(desc, func() { refused(t, desc, w.post("operator-all", path+"/resolve", f, nil)) })
	}
	for _, to := range []ledger.State{ledger.Confirmed, ledger.Failed} {
		f := with(with(form, "provider_ids", ""), "detail", "")
		f.Del("provider_ids")
		f.Del("detail")
		f.Set("to", string(to))
		desc := "a resolution to " + string(to) + " without evidence"
		w.wroteNothing(desc, func() { refused(t, desc, w.post("operator-all", path+"/resolve", f, nil)) })
	}
	if st, n := w.state(tenantA, "review", "op-review"); st != ledger.ManualReview || n != 5 {
		t.Fatalf("after the refusals the record is %s with %d entries, want MANUAL_REVIEW with 5", st, n)
	}
	form.Set("to", string(ledger.Confirmed))
	if a := w.post("operator-all", path+"/resolve", form, nil); a.status != http.StatusSeeOther {
		t.Fatalf("the form as offered: %v", a)
	}
	rec, journal := w.record(tenantA, "review", "op-review")
	if last := journal[len(journal)-1]; rec.State != ledger.Confirmed || rec.Evidence == nil || len(rec.Evidence.ProviderIDs) != 2 ||
		last.Approver != w.ids["operator-all"] {
		t.Fatalf("after the form: %s, evidence %+v, journal %+v", rec.State, rec.Evidence, last)
	}
}
