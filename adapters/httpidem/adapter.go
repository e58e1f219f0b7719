package httpidem

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasegate/leasegate/adapters/internal/config"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// Kind is the effect kind the adapter serves by default.
const Kind = "http.idempotent"

// Adapter posts effects to a user's own HTTP service that honours the
// Idempotency-Key header. It is safe for concurrent use.
type Adapter struct {
	kind      string
	base      *url.URL // resources are base/<target>
	lookup    string   // URL template with {key}; "" when the service offers none
	retention time.Duration
	tokenFile string
	client    *http.Client
	// The default client's settings (WithTimeout, WithCAFile,
	// WithClientCertificate); none may go with WithHTTPClient.
	timeout           time.Duration
	roots             *x509.CertPool
	certFile, keyFile string
	now               func() time.Time
}

// Option configures New.
type Option func(*Adapter) error

// WithKind serves another effect kind than Kind.
func WithKind(kind string) Option {
	return func(a *Adapter) error {
		if err := coordinator.CheckLabel("kind", kind); err != nil {
			return config.Invalid("httpidem", "kind", "%v", err)
		}
		a.kind = kind
		return nil
	}
}

// WithLookup names the service's lookup by idempotency key: a URL with
// "{key}" where the key goes (…/changes?idempotency_key={key}). It answers
// 200 with {"status": the first answer's status, "response": its body},
// 404 for a key it never received, 409 while that request is processing.
// With it the contract declares Lookup.
func WithLookup(template string) Option {
	return func(a *Adapter) error {
		if !strings.Contains(template, "{key}") {
			return config.Invalid("httpidem", "lookup", "lookup %q has no {key}", template)
		}
		u, err := url.Parse(strings.ReplaceAll(template, "{key}", "k"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return config.Invalid("httpidem", "lookup", "lookup %q is not an http(s) URL", template)
		}
		a.lookup = template
		return nil
	}
}

// WithKeyRetention is how long the service remembers an idempotency key
// (the draft's key expiry, which the service should publish). With it the
// contract declares RetrySafe for that long; without it, no retry.
func WithKeyRetention(d time.Duration) Option {
	return func(a *Adapter) error {
		if d <= 0 {
			return config.Invalid("httpidem", "key_retention", "key retention %v must be positive", d)
		}
		a.retention = d
		return nil
	}
}

// WithTokenFile sends the bearer token in path (one line, read at every
// request so a rotated file takes effect; never logged).
func WithTokenFile(path string) Option {
	return func(a *Adapter) error {
		if _, err := config.ReadSecret("token file", path); err != nil {
			return config.Invalid("httpidem", "token_file", "%v", err)
		}
		a.tokenFile = path
		return nil
	}
}

// WithHTTPClient sets the client (default: an http.Client with
// WithTimeout's timeout, WithCAFile's roots and WithClientCertificate's
// certificate). Its transport decides TLS; it does not go with those
// options.
func WithHTTPClient(c *http.Client) Option {
	return func(a *Adapter) error {
		if c == nil {
			return errors.New("nil http client")
		}
		a.client = c
		return nil
	}
}

// WithTimeout bounds each request of the default client (default 10 s).
func WithTimeout(d time.Duration) Option {
	return func(a *Adapter) error {
		if d <= 0 {
			return config.Invalid("httpidem", "timeout", "timeout %v must be positive", d)
		}
		a.timeout = d
		return nil
	}
}

// WithCAFile verifies the service's certificate against the PEM
// certificates of path instead of the system's roots.
func WithCAFile(path string) Option {
	return func(a *Adapter) error {
		p, err := config.CertPool(path)
		if err != nil {
			return config.Invalid("httpidem", "ca_file", "%v", err)
		}
		a.roots = p
		return nil
	}
}

// WithClientCertificate presents the certificate in certFile, with its key
// in keyFile (private: config.CheckPrivate), to a service that wants mTLS.
// Both are checked now and read again at every TLS handshake, so a rotated
// pair takes effect; the key is never logged.
func WithClientCertificate(certFile, keyFile string) Option {
	return func(a *Adapter) error {
		if keyFile != "" {
			if err := config.CheckPrivate("client key file", keyFile); err != nil {
				return config.Invalid("httpidem", "client_key_file", "%v", err)
			}
		}
		if _, err := config.KeyPair(certFile, keyFile); err != nil {
			return config.Invalid("httpidem", "client_cert_file", "%v", err)
		}
		a.certFile, a.keyFile = certFile, keyFile
		return nil
	}
}

// defaultClient is the client of WithTimeout, WithCAFile and
// WithClientCertificate.
func (a *Adapter) defaultClient() *http.Client {
	timeout := a.timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if a.roots == nil && a.certFile == "" {
		return &http.Client{Timeout: timeout}
	}
	// net/http's defaults, unless the program replaced http.DefaultTransport
	// with a RoundTripper of its own (then a plain transport, proxy from the
	// environment).
	t := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if d, ok := http.DefaultTransport.(*http.Transport); ok {
		t = d.Clone()
	}
	t.TLSClientConfig = &tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS12}
	if a.certFile != "" {
		certFile, keyFile := a.certFile, a.keyFile
		t.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := config.KeyPair(certFile, keyFile)
			return &c, err
		}
	}
	return &http.Client{Timeout: timeout, Transport: t}
}

// WithClock sets the clock of observation times (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(a *Adapter) error {
		if now == nil {
			return errors.New("nil clock")
		}
		a.now = now
		return nil
	}
}

// New checks the configuration now — when the ledger starts, not at the
// first dispatch: base is an http(s) URL whose host resolves; the token
// file, when given, is readable, private (config.CheckPrivate) and one
// line; the CA and client certificate files, when given, load. A bad
// configuration is invalid_input naming the setting (url, token_file,
// ca_file, client_cert_file, …).
func New(base string, opts ...Option) (*Adapter, error) {
	const op = "httpidem"
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, config.Invalid(op, "url", "base %q is not an http(s) URL", base)
	}
	if err := config.Resolvable(u.Hostname()); err != nil {
		return nil, config.Invalid(op, "url", "%v", err)
	}
	a := &Adapter{kind: Kind, base: u, now: time.Now}
	for _, o := range opts {
		if err := o(a); err != nil {
			var fe *config.FieldError
			if errors.As(err, &fe) {
				return nil, err
			}
			return nil, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	switch {
	case a.client != nil && (a.timeout != 0 || a.roots != nil || a.certFile != ""):
		return nil, store.NewError(store.InvalidInput, op, "", "", "WithHTTPClient does not go with WithTimeout, WithCAFile or WithClientCertificate: its transport decides", nil)
	case a.client == nil:
		a.client = a.defaultClient()
	}
	return a, nil
}

// Kind is the effect kind served.
func (a *Adapter) Kind() string { return a.kind }

// Contract: Conditional (every POST carries the approved ETag as
// If-Match, or If-None-Match: * when the resource was absent); Lookup when
// the service offers one (WithLookup); RetrySafe for the key retention
// the service publishes (WithKeyRetention): a retry under the same key is
// replayed, never applied twice.
func (a *Adapter) Contract() ledger.Contract {
	return ledger.Contract{Lookup: a.lookup != "", RetrySafe: a.retention > 0, Retention: a.retention, Conditional: true}
}

// Effect is a POST of body (JSON) to the resource target.
func (a *Adapter) Effect(target string, body any, policy string) (ledger.Effect, error) {
	if target == "" || strings.ContainsAny(target, "?#") || strings.Contains(target, "..") {
		return ledger.Effect{}, store.NewError(store.InvalidInput, "httpidem", "", "", fmt.Sprintf("target %q must be a resource path", target), nil)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return ledger.Effect{}, store.NewError(store.InvalidInput, "httpidem", "", "", fmt.Sprintf("body: %v", err), nil)
	}
	return ledger.Effect{Kind: a.kind, Target: target, Params: b, Policy: policy}, nil
}

func (a *Adapter) resource(target string) string {
	return a.base.String() + "/" + strings.TrimLeft(target, "/")
}

// State is a resource as the service shows it.
type State struct {
	Status int             `json:"status"` // 200, or 404 (absent)
	ETag   string          `json:"etag,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
}

// Digest is what a change depends on: the resource's ETag (or absence).
func (s State) Digest(target string) string {
	if s.Status == http.StatusNotFound {
		return "http-resource-v1;" + target + ";absent"
	}
	return "http-resource-v1;" + target + ";etag=" + s.ETag
}

func (a *Adapter) request(ctx context.Context, method, u string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.tokenFile != "" {
		tok, err := config.ReadSecret("token file", a.tokenFile)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// Read GETs the resource.
func (a *Adapter) Read(ctx context.Context, target string) (State, error) {
	req, err := a.request(ctx, http.MethodGet, a.resource(target), nil)
	if err != nil {
		return State{}, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return State{}, fmt.Errorf("httpidem: GET %s: %w", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 32<<10))
	switch resp.StatusCode {
	case http.StatusOK:
		if resp.Header.Get("ETag") == "" {
			return State{}, fmt.Errorf("httpidem: GET %s: no ETag; the service cannot take a precondition", target)
		}
		return State{Status: 200, ETag: resp.Header.Get("ETag"), Body: jsonOrString(b)}, nil
	case http.StatusNotFound:
		return State{Status: 404}, nil
	}
	return State{}, fmt.Errorf("httpidem: GET %s: %s", target, resp.Status)
}

// Precondition is the resource now (its ETag), from the service.
func (a *Adapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	s, err := a.Read(ctx, e.Target)
	if err != nil {
		return ledger.Observation{}, err
	}
	d, _ := json.Marshal(s)
	return ledger.Observation{Digest: s.Digest(e.Target), At: a.now().UTC(), Detail: d}, nil
}

// Apply POSTs the effect's body with Idempotency-Key: the operation id
// (the same on every attempt, by every owner), Fencing-Epoch: the epoch,
// and the approved ETag as If-Match.
//
//   - 2xx: applied (a replay of the first answer included); evidence the
//     service's change id and status.
//   - 412 (the resource moved), 422 (the key was used with another
//     payload), 409 stale-fencing-epoch, and other 4xx but 408 and 409
//     request-in-progress: refused, nothing applied by this request.
//   - 409 request-in-progress (an earlier attempt under the key is still
//     processing), 408, 5xx, a connection lost after the request was
//     written: ambiguous.
//   - nothing written (no connection): refused.
func (a *Adapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	e := call.Effect
	var was State
	if err := json.Unmarshal(call.Approved.Detail, &was); err != nil || was.Status == 0 {
		return ledger.Evidence{}, ledger.Refused("the approved precondition does not record the resource", a.said("not sent"))
	}
	var wrote atomic.Bool
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	req, err := a.request(tctx, http.MethodPost, a.resource(e.Target), e.Params)
	if err != nil {
		return ledger.Evidence{}, ledger.Refused(err.Error(), a.said("not sent: "+err.Error()))
	}
	req.Header.Set("Idempotency-Key", call.Operation)
	req.Header.Set("Fencing-Epoch", strconv.FormatInt(call.Epoch, 10))
	if was.Status == http.StatusNotFound {
		req.Header.Set("If-None-Match", "*")
	} else {
		req.Header.Set("If-Match", was.ETag)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		if !wrote.Load() {
			return ledger.Evidence{}, ledger.Refused("nothing sent: "+err.Error(), a.said("not sent: "+err.Error()))
		}
		return ledger.Evidence{}, ledger.Ambiguous(fmt.Errorf("httpidem: POST %s: %w", e.Target, err))
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, 32<<10))
	if rerr != nil {
		return ledger.Evidence{}, ledger.Ambiguous(fmt.Errorf("httpidem: POST %s: reading the answer: %w", e.Target, rerr))
	}
	ev := a.answer(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), b)
	st, typ := resp.StatusCode, problemType(b)
	switch {
	case st >= 200 && st < 300:
		return ev, nil
	case st == http.StatusConflict && typ == "request-in-progress", st == http.StatusRequestTimeout, st >= 500:
		return ev, ledger.Ambiguous(fmt.Errorf("httpidem: POST %s: %d %s", e.Target, st, typ))
	case st >= 400:
		return ledger.Evidence{}, ledger.Refused(fmt.Sprintf("%d %s", st, typ), ev)
	}
	return ev, ledger.Ambiguous(fmt.Errorf("httpidem: POST %s: unexpected %d", e.Target, st))
}

// answer is a service answer as evidence: its change id (the body's
// "change" or "id"), status and body.
func (a *Adapter) answer(status int, replayed string, body []byte) ledger.Evidence {
	var ids struct {
		Change string `json:"change"`
		ID     string `json:"id"`
	}
	_ = json.Unmarshal(body, &ids)
	d, _ := json.Marshal(map[string]any{"status": status, "replayed": replayed == "true", "body": jsonOrString(body)})
	ev := ledger.Evidence{Detail: d, At: a.now().UTC()}
	for _, id := range []string{ids.Change, ids.ID} {
		if id != "" {
			ev.ProviderIDs = append(ev.ProviderIDs, id)
		}
	}
	return ev
}

func problemType(b []byte) string {
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(b, &p)
	return p.Type
}

func jsonOrString(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}

func (a *Adapter) said(what string) ledger.Evidence {
	b, _ := json.Marshal(map[string]string{"adapter": what})
	return ledger.Evidence{Detail: b, At: a.now().UTC()}
}

// Observe asks the service. With a lookup: the first answer under the
// key — 2xx Applied, another status NotApplied (it refused), 404
// NotApplied (never received), 409 Pending (still processing). The lookup
// answers 200 with {"status": <the first answer's HTTP status>,
// "response": <its body>}; the evidence's provider ids are the body's
// "change" and "id", or, when it has neither, "Idempotency-Key <key>". Without
// one, the resource itself: its fields equal to the body's, Applied; the
// approved ETag still, NotApplied; otherwise Inconclusive.
func (a *Adapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	if a.lookup != "" {
		return a.lookupKey(ctx, rec.Operation)
	}
	s, err := a.Read(ctx, rec.Effect.Target)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	d, _ := json.Marshal(s)
	ev := ledger.Evidence{Detail: d, At: a.now().UTC(), ProviderIDs: []string{"etag " + s.ETag}}
	var was State
	_ = json.Unmarshal(rec.Precondition.Detail, &was)
	switch {
	case s.Status == 200 && contains(s.Body, rec.Effect.Params):
		return ledger.Applied, ev, nil
	case s.Digest(rec.Effect.Target) == was.Digest(rec.Effect.Target):
		return ledger.NotApplied, ev, nil
	}
	return ledger.Inconclusive, ev, fmt.Errorf("httpidem: %s changed, but not to the body sent", rec.Effect.Target)
}

func (a *Adapter) lookupKey(ctx context.Context, key string) (ledger.Outcome, ledger.Evidence, error) {
	req, err := a.request(ctx, http.MethodGet, strings.ReplaceAll(a.lookup, "{key}", url.QueryEscape(key)), nil)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return ledger.Inconclusive, ledger.Evidence{}, fmt.Errorf("httpidem: lookup: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 32<<10))
	switch resp.StatusCode {
	case http.StatusOK:
		var first struct {
			Status   int             `json:"status"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(b, &first); err != nil || first.Status == 0 {
			return ledger.Inconclusive, ledger.Evidence{}, fmt.Errorf("httpidem: lookup answered %q", b)
		}
		ev := a.answer(first.Status, "", first.Response)
		if first.Status >= 200 && first.Status < 300 {
			if len(ev.ProviderIDs) == 0 {
				// The service's record of the request is the one under
				// this key: name it, so the evidence says whose answer it is.
				ev.ProviderIDs = []string{"Idempotency-Key " + key}
			}
			return ledger.Applied, ev, nil
		}
		return ledger.NotApplied, ev, nil
	case http.StatusNotFound:
		return ledger.NotApplied, a.answer(404, "", b), nil
	case http.StatusConflict:
		return ledger.Pending, a.answer(409, "", b), nil
	}
	return ledger.Inconclusive, ledger.Evidence{}, fmt.Errorf("httpidem: lookup: %s", resp.Status)
}

// contains reports whether every top-level field of want has the same
// value in got (both JSON objects).
func contains(got, want json.RawMessage) bool {
	var g, w map[string]json.RawMessage
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || len(w) == 0 {
		return false
	}
	for k, v := range w {
		if !bytes.Equal(bytes.TrimSpace(g[k]), bytes.TrimSpace(v)) {
			return false
		}
	}
	return true
}

// Probe GETs the base URL with the token: nil for any answer but 401 or
// 403 (the credential refused) and 5xx (the service failing) — a 404 at a
// collection's root still shows the service there. It changes nothing.
// `leasegate serve` shows it as the adapter's health.
func (a *Adapter) Probe(ctx context.Context) error {
	req, err := a.request(ctx, http.MethodGet, a.base.String(), nil)
	if err != nil {
		return fmt.Errorf("httpidem: %w", err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("httpidem: GET %s: %w", a.base.Redacted(), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500 {
		return fmt.Errorf("httpidem: GET %s: %s", a.base.Redacted(), resp.Status)
	}
	return nil
}
