package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/internal/store"
)

// Path is where the console is served on the gateway's port.
const Path = "/console/"

// MinActionKeyBytes is the least key the action tokens are made with.
const MinActionKeyBytes = 32

//go:embed assets
var assets embed.FS

// Console serves the pages. It holds no state between requests but its
// key and templates: every page is read through the API when asked for.
type Console struct {
	srv    *gateway.Server
	apis   map[gateway.Role]*client.Client // the API in-process, reading through each role's service
	tokens csrfTokens
	pages  map[string]*template.Template
	static http.Handler
	lg     *zap.Logger
	now    func() time.Time
	mux    *http.ServeMux
}

type options struct {
	lg  *zap.Logger
	key []byte
}

// Option configures New.
type Option func(*options) error

// WithLogger sets the logger (default zap.NewNop()).
func WithLogger(lg *zap.Logger) Option {
	return func(o *options) error {
		if lg == nil {
			return fmt.Errorf("nil logger")
		}
		o.lg = lg
		return nil
	}
}

// WithActionKey sets the key the action tokens are made with (at least
// MinActionKeyBytes). Every replica of one deployment needs the same key,
// or a form read from one replica is refused by another: leasegate serve
// derives it from the session key (ActionKey).
func WithActionKey(key []byte) Option {
	return func(o *options) error {
		if len(key) < MinActionKeyBytes {
			return fmt.Errorf("action key of %d bytes: at least %d", len(key), MinActionKeyBytes)
		}
		o.key = append([]byte(nil), key...)
		return nil
	}
}

// ActionKey derives the console's action-token key from the gateway's
// session key, so that replicas sharing one share the other, and neither
// key can be computed from the other's use.
func ActionKey(sessionKey []byte) []byte {
	h := sha256.New()
	h.Write([]byte("leasegate-console-action-key-v1\x00"))
	h.Write(sessionKey)
	return h.Sum(nil)
}

// New is the console of srv: mount it with srv.Mount(console.Path, c).
func New(srv *gateway.Server, opts ...Option) (*Console, error) {
	if srv == nil {
		return nil, store.NewError(store.InvalidInput, "console", "", "", "nil gateway server", nil)
	}
	o := options{lg: zap.NewNop()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, store.NewError(store.InvalidInput, "console", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if o.key == nil {
		return nil, store.NewError(store.InvalidInput, "console", "", "", "an action key is required (WithActionKey)", nil)
	}
	// The API itself, in this process: every read and action of the
	// console is one of its calls, with the browser's certificate.
	hc := &http.Client{Transport: inproc{api: srv.Handler()}}
	c := &Console{srv: srv, apis: map[gateway.Role]*client.Client{}, tokens: csrfTokens{key: o.key}, lg: o.lg.Named("console"), now: time.Now}
	for _, r := range []gateway.Role{gateway.RoleWorker, gateway.RoleApprover, gateway.RoleOperator} {
		api, err := client.NewWithHTTPClient("https://console.invalid", hc, client.WithReadsAs(string(r)))
		if err != nil {
			return nil, err
		}
		c.apis[r] = api
	}
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(assets, "assets/static")
	c.static = http.StripPrefix(Path+"static/", http.FileServerFS(static))
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET "+Path+"{$}", c.nowPage)
	m.HandleFunc("GET "+Path+"effects", c.effectsPage)
	m.HandleFunc("GET "+Path+"op/{tenant}/{task}/{operation}", c.operationPage)
	m.HandleFunc("POST "+Path+"op/{tenant}/{task}/{operation}/{action}", c.act)
	m.HandleFunc("GET "+Path+"live", c.live)
	m.Handle("GET "+Path+"static/", c.static)
	c.mux = m
}

// ServeHTTP serves the console's pages, with headers that keep them out of
// caches and frames and let them load nothing from elsewhere.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer Chromium sends
	// "Origin: null" on the console's own form posts.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if !strings.HasPrefix(r.URL.Path, Path+"static/") {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

// caller is who a request comes from: its identity under the server's
// configuration, and the context its API calls carry (the browser's TLS
// state).
type caller struct {
	id    gateway.Identity
	ctx   context.Context
	token string
	api   *client.Client // reads through a service of one of the identity's roles
}

// whoIs identifies r's caller, or answers the page that says why it has
// none (and how to present a certificate) and returns false.
func (c *Console) whoIs(w http.ResponseWriter, r *http.Request) (caller, bool) {
	id, err := c.srv.Identify(r)
	if err != nil {
		c.fail(w, r, http.StatusUnauthorized, caller{}, "Who are you?", err)
		return caller{}, false
	}
	cl := caller{id: id, ctx: withBrowser(r.Context(), r.TLS), api: c.apis[gateway.RoleWorker]}
	// Each service of the API serves its reads to its own role: read
	// through one of the caller's (the API still checks every call).
	for _, role := range []gateway.Role{gateway.RoleWorker, gateway.RoleOperator, gateway.RoleApprover} {
		if id.Has(role) {
			cl.api = c.apis[role]
			break
		}
	}
	cl.token = c.tokens.make(r.TLS.VerifiedChains[0][0], c.now())
	return cl, true
}

// base is what every page shows.
type base struct {
	Title      string
	Nav        string
	Identity   gateway.Identity
	Token      string
	Now        time.Time
	IsApprover bool
	IsOperator bool
}

func (c *Console) base(cl caller, title, nav string) base {
	return base{Title: title, Nav: nav, Identity: cl.id, Token: cl.token, Now: c.now().UTC(),
		IsApprover: cl.id.Has(gateway.RoleApprover), IsOperator: cl.id.Has(gateway.RoleOperator)}
}

// scopes are the tenants to read for id: "" (all) for an identity of all
// tenants, else each of its tenants.
func scopes(id gateway.Identity) []string {
	if id.Serves(gateway.AllTenants) {
		return []string{""}
	}
	return append([]string(nil), id.Tenants...)
}

func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	if err := c.pages[name].ExecuteTemplate(&b, "layout", data); err != nil {
		c.lg.Error("page not rendered", zap.String("page", name), zap.Error(err))
		http.Error(w, "the console could not render this page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// refusal is an error as a page shows it.
type refusal struct {
	Disposition string
	Detail      string
	Hint        string
}

func refusalOf(err error) refusal {
	if err == nil {
		return refusal{}
	}
	r := refusal{Disposition: string(coordinator.DispositionOf(err)), Detail: err.Error()}
	var ce *coordinator.Error
	if errors.As(err, &ce) {
		r.Detail = ce.Detail
		if ce.Op != "" {
			r.Detail = ce.Op + ": " + ce.Detail
		}
	}
	var he interface{ Hint() string }
	if errors.As(err, &he) {
		r.Hint = he.Hint()
	}
	if r.Disposition == "" {
		r.Disposition = "error"
	}
	return r
}

type failPage struct {
	base
	Heading string
	Refusal refusal
}

// fail answers a page that shows err.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, cl caller, heading string, err error) {
	c.render(w, status, "error", failPage{base: c.base(cl, heading, ""), Heading: heading, Refusal: refusalOf(err)})
}

// statusOf is the HTTP status a page answers an API refusal with.
func statusOf(err error) int {
	switch coordinator.DispositionOf(err) {
	case coordinator.PermissionDenied:
		return http.StatusForbidden
	case coordinator.Unauthenticated:
		return http.StatusUnauthorized
	case coordinator.InvalidInput:
		return http.StatusBadRequest
	case coordinator.AuthorityUnavailable:
		return http.StatusServiceUnavailable
	}
	switch coordinator.DispositionOf(err).Class() {
	case coordinator.ClassRefused:
		return http.StatusConflict
	}
	return http.StatusBadGateway
}
