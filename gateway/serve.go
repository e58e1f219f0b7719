package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/coordinator"
)

// IdleTimeout is how long Serve keeps a connection open with no call on
// it. It is longer than the Go client's own idle limit, so that the client,
// not the server, closes an idle connection: a server closing one just as a
// call is written on it would leave that call's outcome unknown.
const IdleTimeout = 5 * time.Minute

// Serve serves the handler over TLS on ln until ctx is done, then stops
// taking calls and waits up to grace for those under way (a dispatch in
// flight finishes and is recorded). Meanwhile it probes the adapters'
// providers at once and every ProbeInterval (AdapterHealthService).
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config, grace time.Duration) error {
	// A connection idle between calls is closed after IdleTimeout (without
	// it, net/http keeps one for ever: any caller could hold as many as it
	// opens); the Go client drops its idle ones sooner (client.go).
	idle := s.idleTimeout
	if idle == 0 {
		idle = IdleTimeout
	}
	// net/http's own errors (a caller's failed TLS handshake: a certificate
	// of another CA, a plain-HTTP client) go to the server's log, with its
	// fields and format, not to the standard library's logger on stderr.
	// The calls in flight, waited for after Shutdown: Shutdown waits for
	// connections, not for the handler of an HTTP/2 stream its caller
	// reset (a watch that frees its limit unit as it ends), which may still
	// run when its connection has closed.
	var inflight sync.WaitGroup
	h := s.Handler()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		h.ServeHTTP(w, r)
	}), TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle, ErrorLog: zap.NewStdLog(s.lg.Named("http"))}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	pctx, stopProbes := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() { defer close(probed); s.health.loop(pctx, ProbeInterval) }()
	defer func() { stopProbes(); <-probed }()
	select {
	case err := <-errc:
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err == nil { // every connection closed: no call starts any more
		handled := make(chan struct{})
		go func() { inflight.Wait(); close(handled) }()
		select {
		case <-handled:
		case <-sctx.Done():
			err = fmt.Errorf("calls still running after %v: %w", grace, sctx.Err())
		}
	}
	if err != nil {
		return fmt.Errorf("gateway: shutdown: %w", err)
	}
	return nil
}

// TracerProvider is where the server's spans go: OTLP over gRPC to
// endpoint, or nowhere when endpoint is "" (the W3C trace context is
// carried all the same). shutdown flushes and stops the exporter.
func TracerProvider(ctx context.Context, endpoint string, insecure bool) (trace.TracerProvider, func(context.Context) error, error) {
	if endpoint == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(endpoint)}
	if insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: otlp exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	return tp, tp.Shutdown, nil
}

// EtcdDialOptions are the dial options of the server's etcd client:
// coordinator.DialOptions (so a hold and an unknown outcome stay apart)
// and TraceDialOption.
func EtcdDialOptions(tp trace.TracerProvider) []grpc.DialOption {
	return append(coordinator.DialOptions(), TraceDialOption(tp))
}

// TraceDialOption carries the caller's trace context on every etcd request
// of the client, each a span of tp.
func TraceDialOption(tp trace.TracerProvider) grpc.DialOption {
	return grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{})))
}
