package drill

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/client"
	gw "github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
)

// The fenced design's workers reach the effect gateway over the network:
// one TLS listener on loopback per drill run (hop), with the drill's own
// throwaway certificates (gw.WriteDevCerts, as leasegate serve --dev
// makes them), in front of one gateway.Server per fenced trial. Each
// trial's gateway holds that trial's provider adapters (the simulated
// providers of its world) and its simulated clock; the listener routes a
// request to it by the path prefix /t/<trial>/ its clients are given.
// Workers, the commander and the traffic policy call it with the Go client
// (package client), each under its own certificate: a worker's identity is
// its owner label, an approval records the approver's. A worker holds no
// adapter: once the gateway has a dispatch it runs it to its end, whatever
// the worker does meanwhile.
//
// In simulated time, a call to the gateway is an actor of its own (the
// gateway handling it), spawned as the worker sends it; the worker waits for
// its answer. So a worker that stops while its call is at the gateway
// stops alone: the gateway completes the call and records its answer, and
// the worker, paused, goes on to its next action when it wakes — which the
// fence refuses. Only one actor of a trial runs at a time, as before: the
// gateway's handler runs while the actor of its call is blocked on the
// network, and hands the world back when it answers or sleeps.

// hopTrustDomain is the SPIFFE trust domain of the drill's certificates.
const hopTrustDomain = "leasegate.drill"

// The callers of a fenced trial's gateway, one certificate each.
const (
	callerTraffic = "traffic-policy" // approves traffic changes by its rule
)

var hopCallers = []string{"worker-a", "worker-b", commander, callerTraffic}

// hop is the run's gateway listener and its callers' connections.
type hop struct {
	addr   string // 127.0.0.1:port
	base   string // https://127.0.0.1:port
	srv    *http.Server
	served chan error
	key    []byte
	ids    map[string]string       // caller name → certificate identity (SPIFFE ID)
	names  map[string]string       // certificate identity → caller name
	http   map[string]*http.Client // caller name → its connections
	mu     sync.Mutex
	trials map[string]http.Handler
	n      int
}

// startHop writes the throwaway certificates into a temporary directory
// (removed once they are loaded), listens on a loopback port, and serves
// the trials' gateways there until close.
func startHop(lg *zap.Logger) (*hop, error) {
	dir, err := os.MkdirTemp("", "leasegate-drill-certs-")
	if err != nil {
		return nil, fmt.Errorf("drill: gateway certificates: %w", err)
	}
	defer os.RemoveAll(dir)
	certs, err := gw.WriteDevCerts(dir, hopTrustDomain, hopCallers...)
	if err != nil {
		return nil, fmt.Errorf("drill: %w", err)
	}
	return listenHop(lg, certs, hopCallers, "fenced workers reach their gateway over loopback TLS")
}

// listenHop listens on a loopback port with the server certificate of
// certs and serves the trials' gateways there until close, callers (of
// certs) its clients; what says so in the log.
func listenHop(lg *zap.Logger, certs gw.DevCerts, callers []string, what string) (*hop, error) {
	stls, err := gw.TLSConfig(certs.ServerCert, certs.ServerKey, certs.CA)
	if err != nil {
		return nil, fmt.Errorf("drill: %w", err)
	}
	h := &hop{key: make([]byte, gw.MinSessionKeyBytes), ids: map[string]string{}, names: map[string]string{},
		http: map[string]*http.Client{}, trials: map[string]http.Handler{}, served: make(chan error, 1)}
	if _, err := rand.Read(h.key); err != nil {
		return nil, fmt.Errorf("drill: session key: %w", err)
	}
	for _, name := range callers {
		f := certs.Clients[name]
		ctls, err := client.TLSConfig(certs.CA, f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("drill: %w", err)
		}
		h.http[name] = client.HTTPClient(ctls) // as client.New makes it, shared by the caller's clients of every trial
		h.ids[name], h.names[certs.IDs[name]] = certs.IDs[name], name
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("drill: gateway listener: %w", err)
	}
	h.addr = ln.Addr().String()
	h.base = "https://" + h.addr
	h.srv = &http.Server{Handler: http.HandlerFunc(h.route), TLSConfig: stls, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: zap.NewStdLog(lg.Named("gateway-hop"))}
	go func() { h.served <- h.srv.ServeTLS(ln, "", "") }()
	lg.Info(what, zap.String("listen", h.addr))
	return h, nil
}

// close stops the listener and drops every connection.
func (h *hop) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.srv.Shutdown(ctx)
	if serr := <-h.served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	for _, c := range h.http {
		c.CloseIdleConnections()
	}
	if err != nil {
		return fmt.Errorf("drill: gateway listener: %w", err)
	}
	return nil
}

// route serves /t/<trial>/<procedure> by that trial's gateway.
func (h *hop) route(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/t/")
	key, proc, ok2 := strings.Cut(rest, "/")
	h.mu.Lock()
	next := h.trials[key]
	h.mu.Unlock()
	if !ok || !ok2 || next == nil {
		http.NotFound(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = "/"+proc, ""
	next.ServeHTTP(w, r2)
}

// serveTrial puts a trial's handler on the listener under a key of its
// own, named after name: its path is /t/<key>/. unserveTrial takes it off.
func (h *hop) serveTrial(name string, next http.Handler) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	key := fmt.Sprintf("%s-%d", name, h.n)
	h.trials[key] = next
	return key
}

func (h *hop) unserveTrial(key string) {
	h.mu.Lock()
	delete(h.trials, key)
	h.mu.Unlock()
}

// peer is the caller name of a request's client certificate ("" if none
// of the run's).
func (h *hop) peer(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return ""
	}
	for _, u := range r.TLS.PeerCertificates[0].URIs {
		if n, ok := h.names[u.String()]; ok {
			return n
		}
	}
	return ""
}

// trialGateway is one fenced trial's gateway: a gateway.Server with the
// trial's adapters and clock, and its callers' clients.
type trialGateway struct {
	h       *hop
	key     string
	clients map[string]*client.Client // caller name → its client of this gateway
}

// startGateway serves w's gateway on the run's hop.
func (h *hop) startGateway(w *world) (*trialGateway, error) {
	var ids []gw.Identity
	tenant := w.run.tenant(w.design)
	for _, name := range hopCallers {
		roles := []gw.Role{gw.RoleWorker}
		switch name {
		case commander:
			roles = []gw.Role{gw.RoleApprover, gw.RoleOperator}
		case callerTraffic:
			roles = []gw.Role{gw.RoleApprover}
		}
		ids = append(ids, gw.Identity{ID: h.ids[name], Roles: roles, Tenants: []string{tenant}})
	}
	srv, err := gw.New(w.run.coord, gw.WithIdentities(ids...), gw.WithSessionKey(h.key),
		gw.WithAdapters(hopAdapter{w: w, kind: kindPromote}, hopAdapter{w: w, kind: kindTraffic}),
		gw.WithLogger(w.run.cfg.Logger),
		gw.WithLedgerOptions(
			ledger.WithClock(func() time.Time { return simTime(w.s.now) }),
			ledger.WithSleep(func(ctx context.Context, d time.Duration) error { return w.sleep(d) }),
			ledger.WithPolling(2*time.Second, 30*time.Second, 12)))
	if err != nil {
		return nil, fmt.Errorf("drill: gateway: %w", err)
	}
	tg := &trialGateway{h: h, key: h.serveTrial(fmt.Sprintf("%s-%d", w.design, w.trial), handOver(w, srv.Handler())),
		clients: map[string]*client.Client{}}
	for _, name := range hopCallers {
		c, err := client.NewWithHTTPClient(h.base+"/t/"+tg.key, h.http[name])
		if err != nil {
			tg.stop()
			return nil, fmt.Errorf("drill: gateway client: %w", err)
		}
		tg.clients[name] = c
	}
	return tg, nil
}

// stop takes the trial's gateway off the listener.
func (tg *trialGateway) stop() { tg.h.unserveTrial(tg.key) }

// callHeader carries the id of a worker's call (atGateway) to the trial's
// gateway.
const callHeader = "Drill-Call"

// hopCall is one call at the gateway: whether its handler started (or the
// caller gave up first, abandoned), and done once the handler returned.
type hopCall struct {
	started, abandoned bool
	done               chan struct{}
}

// handOver wraps a trial gateway's handler so that the world passes
// between a call's actor and the handler with edges the race detector sees
// (the network is not one): the handler takes the world under hopMu as it
// starts, and gives it back by closing the call's done as it returns, which
// the call's actor waits for even when its client gave up early (so the
// actor never ends while its handler still acts in the world). A handler
// whose caller gave up before it started touches nothing.
func handOver(w *world, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(callHeader)
		w.hopMu.Lock()
		c := w.hopCalls[id]
		abandoned := c != nil && c.abandoned
		if c != nil && !abandoned {
			c.started = true
		}
		w.hopMu.Unlock()
		if abandoned {
			http.Error(rw, "drill: the caller gave up on this call", http.StatusServiceUnavailable)
			return
		}
		if c != nil {
			defer close(c.done)
		}
		next.ServeHTTP(rw, r)
	})
}

// handOver is an edge of its own, around a session's call (which does not
// reach the world): a lock taken and released.
func (w *world) handOver() {
	w.hopMu.Lock()
	//lint:ignore SA2001 an empty critical section on purpose: the edge is the point
	w.hopMu.Unlock()
}

// sleep lets simulated time pass for whoever runs now: a worker, or the
// gateway's handling of a worker's call (which a trial's end makes an
// error, never a panic in the handler's goroutine).
func (w *world) sleep(d time.Duration) error {
	a := w.s.running
	if w.calls[a] != nil {
		return a.pause(d)
	}
	a.sleep(d)
	return nil
}

// callerOf is the worker a piece of gateway code runs for: the worker of
// the running call, or the running worker itself (in-process).
func (w *world) callerOf() *worker {
	if wk := w.calls[w.s.running]; wk != nil {
		return wk
	}
	for _, wk := range w.workers {
		if wk.a == w.s.running {
			return wk
		}
	}
	return nil
}

// hopAdapter is a trial gateway's adapter of kind: the drill's simulated
// provider adapters, acting for the worker whose call the gateway handles.
type hopAdapter struct {
	w    *world
	kind string
}

func (a hopAdapter) of() ledger.Adapter {
	wk := a.w.callerOf()
	if a.kind == kindPromote {
		return topologyAdapter{wk}
	}
	return dnsAdapter{wk}
}

func (a hopAdapter) Kind() string { return a.kind }

func (a hopAdapter) Contract() ledger.Contract {
	if a.kind == kindPromote {
		return topologyAdapter{}.Contract()
	}
	return dnsAdapter{}.Contract()
}

func (a hopAdapter) Precondition(ctx context.Context, e ledger.Effect) (ledger.Observation, error) {
	return a.of().Precondition(ctx, e)
}

func (a hopAdapter) Apply(ctx context.Context, call ledger.Call) (ledger.Evidence, error) {
	return a.of().Apply(ctx, call)
}

func (a hopAdapter) Observe(ctx context.Context, rec ledger.Record) (ledger.Outcome, ledger.Evidence, error) {
	return a.of().Observe(ctx, rec)
}

var _ ledger.Adapter = hopAdapter{}

// ownerName is the worker an owner label names: through the gateway a
// worker's owner label is its certificate identity (a SPIFFE ID), which
// the trajectory names by the worker's name, as in-process.
func (w *world) ownerName(owner string) string {
	if w.gw != nil {
		if n, ok := w.gw.h.names[owner]; ok {
			return n
		}
	}
	return owner
}
