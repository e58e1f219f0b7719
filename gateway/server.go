package gateway

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/ledger"
)

// DefaultMaxMessageBytes is the largest request message accepted: a
// commit's value limit (fencedtxn.DefaultMaxValueBytes) with room for the
// rest of the request.
const DefaultMaxMessageBytes = 512 << 10

// compressMinBytes is the smallest answer the gateway gzips (when the
// caller accepts gzip).
const compressMinBytes = 64 << 10

// DefaultMargin is the default margin of a session's deadline before its
// lease's expiry: the larger of a tenth of the TTL and this.
const DefaultMargin = 100 * time.Millisecond

// Server serves the API. It holds the coordinator (so the etcd client) and
// the ledger with its adapters, and nothing else between calls.
type Server struct {
	c          *coordinator.Coordinator
	led        *ledger.Ledger
	adapters   map[string]ledger.Adapter // by kind, as the ledger calls them (ObservePrecondition)
	identities map[string]Identity
	tokens     tokens
	metrics    *metrics
	tracer     trace.Tracer
	lg         *zap.Logger
	opts       options
	health     *health
	dispatch   *dispatchLease // this replica's lease: its dispatch claims' and its watch streams' units

	idleTimeout time.Duration // Serve's, when not IdleTimeout (tests)

	mounts map[string]http.Handler // Mount's, beside the API
}

type options struct {
	lg              *zap.Logger
	identities      []Identity
	sessionKey      []byte
	adapters        []ledger.Adapter
	ledgerOpts      []ledger.Option
	maxMessageBytes int
	reg             prometheus.Registerer
	gatherer        prometheus.Gatherer
	tp              trace.TracerProvider
	callTimeout     time.Duration
	dispatchTTL     time.Duration
	policy          *Policy
	limits          Limits
	noLimits        bool // count nothing: only the benchmark's baseline sets it (export_test.go)
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

// WithIdentities sets the callers the server knows, with their roles and
// tenants.
func WithIdentities(ids ...Identity) Option {
	return func(o *options) error {
		if err := checkIdentities(ids); err != nil {
			return err
		}
		o.identities = append(o.identities, ids...)
		return nil
	}
}

// WithSessionKey sets the key that signs session tokens (at least
// MinSessionKeyBytes); every replica of one deployment needs the same.
func WithSessionKey(key []byte) Option {
	return func(o *options) error {
		if len(key) < MinSessionKeyBytes {
			return fmt.Errorf("session key of %d bytes: at least %d", len(key), MinSessionKeyBytes)
		}
		o.sessionKey = key
		return nil
	}
}

// WithAdapters sets the provider adapters the gateway dispatches to.
func WithAdapters(adapters ...ledger.Adapter) Option {
	return func(o *options) error {
		o.adapters = append(o.adapters, adapters...)
		return nil
	}
}

// WithLedgerOptions passes options to the ledger (timeouts, polling).
func WithLedgerOptions(opts ...ledger.Option) Option {
	return func(o *options) error {
		o.ledgerOpts = append(o.ledgerOpts, opts...)
		return nil
	}
}

// WithMaxMessageBytes sets the largest request message accepted (default
// DefaultMaxMessageBytes).
func WithMaxMessageBytes(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("max message bytes %d must be positive", n)
		}
		o.maxMessageBytes = n
		return nil
	}
}

// DefaultCallTimeout bounds a unary call's work at the gateway.
const DefaultCallTimeout = 10 * time.Second

// WithCallTimeout bounds the work of every unary call but Dispatch (default
// DefaultCallTimeout), whatever deadline the caller sent: the gateway
// answers a hold (or outcome_unknown) in time for a caller with a longer
// deadline to read it. Dispatch is bounded step by step instead (the
// coordinator's request timeout, the ledger's call and record timeouts).
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("call timeout %v must be positive", d)
		}
		o.callTimeout = d
		return nil
	}
}

// WithDispatchLeaseTTL sets the TTL of this replica's dispatch lease
// (default DefaultDispatchLeaseTTL; whole seconds, at least 2 s): a
// dispatch claimed by a replica that then dies is settled by its owner
// once this long has passed without the replica.
func WithDispatchLeaseTTL(d time.Duration) Option {
	return func(o *options) error {
		if d < 2*time.Second || d%time.Second != 0 {
			return fmt.Errorf("dispatch lease TTL %v: whole seconds, at least 2s", d)
		}
		o.dispatchTTL = d
		return nil
	}
}

// WithMetrics registers the gateway's metrics on reg and serves /metrics
// from g.
func WithMetrics(reg prometheus.Registerer, g prometheus.Gatherer) Option {
	return func(o *options) error {
		if reg == nil || g == nil {
			return fmt.Errorf("nil registerer or gatherer")
		}
		o.reg, o.gatherer = reg, g
		return nil
	}
}

// WithTracerProvider sets where spans go (default: none are recorded, but
// the caller's W3C trace context is still carried to etcd and the adapters).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		if tp == nil {
			return fmt.Errorf("nil tracer provider")
		}
		o.tp = tp
		return nil
	}
}

// New is a server acting on c's keyspace.
func New(c *coordinator.Coordinator, opts ...Option) (*Server, error) {
	if c == nil {
		return nil, store.NewError(store.InvalidInput, "serve", "", "", "nil coordinator", nil)
	}
	o := options{lg: zap.NewNop(), maxMessageBytes: DefaultMaxMessageBytes, tp: noop.NewTracerProvider(), callTimeout: DefaultCallTimeout,
		dispatchTTL: DefaultDispatchLeaseTTL}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, store.NewError(store.InvalidInput, "serve", "", "", fmt.Sprintf("%v", err), nil)
		}
	}
	if o.sessionKey == nil {
		return nil, store.NewError(store.InvalidInput, "serve", "", "", "a session key is required (WithSessionKey)", nil)
	}
	s := &Server{c: c, tokens: tokens{key: o.sessionKey}, identities: map[string]Identity{}, lg: o.lg.Named("gateway"),
		tracer: o.tp.Tracer("github.com/leasegate/leasegate/gateway"), opts: o}
	for _, id := range o.identities {
		if _, dup := s.identities[id.ID]; dup {
			return nil, store.NewError(store.InvalidInput, "serve", "", "", fmt.Sprintf("identity %q twice", id.ID), nil)
		}
		s.identities[id.ID] = id
	}
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, store.NewError(store.InvalidInput, "serve", "", "", fmt.Sprintf("%v", err), nil)
	}
	s.metrics = m
	s.health = newHealth(o.adapters, s.lg, leasegatev1connect.WorkerServiceName, leasegatev1connect.ApproverServiceName, leasegatev1connect.OperatorServiceName)
	adapters := make([]ledger.Adapter, 0, len(o.adapters))
	s.adapters = make(map[string]ledger.Adapter, len(o.adapters))
	for _, a := range o.adapters {
		adapters = append(adapters, instrumented{Adapter: a, s: s})
		s.adapters[a.Kind()] = adapters[len(adapters)-1]
	}
	dl := &dispatchLease{cli: c.Client(), ttl: o.dispatchTTL, lg: s.lg}
	s.dispatch = dl
	ledOpts := []ledger.Option{ledger.WithAdapters(adapters...), ledger.WithLogger(s.lg), ledger.WithDispatchLease(dl.get)}
	if o.policy != nil {
		p := o.policy
		p.lg = s.lg.Named("policy")
		ledOpts = append(ledOpts, ledger.WithPolicy(func(context.Context, ledger.Effect) (string, error) { return p.Current(), nil }))
	}
	if o.reg != nil {
		ledOpts = append(ledOpts, ledger.WithMetrics(o.reg)) // the ledger's own metrics, beside the gateway's
	}
	led, err := ledger.New(c, append(ledOpts, o.ledgerOpts...)...)
	if err != nil {
		return nil, err
	}
	s.led = led
	return s, nil
}

// Handler is the server's HTTP handler: the three services, gRPC health
// (grpc.health.v1) and server reflection, and /metrics when WithMetrics
// was given. Serve it over TLS with TLSConfig (HTTP/2 for gRPC).
func (s *Server) Handler() http.Handler {
	// The message limit, for every service: health and reflection need no
	// certificate, and without it a caller with none could make the server
	// read a message of any size into memory (or gunzip one).
	limits := []connect.HandlerOption{
		connect.WithReadMaxBytes(s.opts.maxMessageBytes),
		// gzip as connect's, its decompressed size held to the limit
		// (limit.go).
		connect.WithCompression("gzip", s.newDecompressor, func() connect.Compressor { return gzip.NewWriter(io.Discard) }),
	}
	hopts := append([]connect.HandlerOption{
		connect.WithInterceptors(s.interceptor()),
		connect.WithCodec(jsonCodec{}),
		// Answers are small: compressing them costs more CPU than it saves
		// on loopback or a LAN (gzip was a tenth of a commit's CPU).
		connect.WithCompressMinBytes(compressMinBytes),
	}, limits...)
	mux := http.NewServeMux()
	mux.Handle(leasegatev1connect.NewWorkerServiceHandler(workers{s}, hopts...))
	mux.Handle(leasegatev1connect.NewApproverServiceHandler(approvers{s}, hopts...))
	mux.Handle(leasegatev1connect.NewOperatorServiceHandler(operators{s}, hopts...))
	services := []string{leasegatev1connect.WorkerServiceName, leasegatev1connect.ApproverServiceName, leasegatev1connect.OperatorServiceName}
	mux.Handle(grpchealth.NewHandler(healthChecker{s.health.checker, s.health}, limits...))
	reflector := grpcreflect.NewStaticReflector(services...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, limits...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, limits...))
	if s.opts.gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.opts.gatherer, promhttp.HandlerOpts{}))
	}
	for pattern, h := range s.mounts {
		mux.Handle(pattern, h)
	}
	return s.authenticate(mux)
}

// Mount serves h at pattern (a path such as "/console/", outside the API's
// services) on the server's port and TLS, beside the API: the console. It
// is no API path, so authenticate passes its requests through untouched;
// h knows its caller by Identify and acts through the API. Call it before
// Handler or Serve.
func (s *Server) Mount(pattern string, h http.Handler) {
	if s.mounts == nil {
		s.mounts = map[string]http.Handler{}
	}
	s.mounts[pattern] = h
}

// TLSConfig is the server's TLS: its certificate, and client certificates
// verified against clientCA when given (a call without one is answered
// unauthenticated, so that health checks need none).
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("gateway: server certificate: %w", err)
	}
	pem, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("gateway: client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("gateway: client CA %s holds no certificate", clientCAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}
