package gateway_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestServeClosesAnIdleConnection: a connection with no call on it for the
// idle timeout is closed by the server, so no caller holds connections
// open for ever by opening them and saying nothing more.
func TestServeClosesAnIdleConnection(t *testing.T) {
	w := newWorld(t)
	srv, err := gateway.New(lgtest.CoordinatorOf(t, w.etcd), gateway.WithSessionKey(w.key), gateway.WithIdentities(w.ids...))
	if err != nil {
		t.Fatal(err)
	}
	gateway.SetIdleTimeout(srv, 200*time.Millisecond)
	addr := serveOnLoopback(t, w, srv)

	cfg, err := client.TLSConfig(w.certs.CA, w.certs.Clients["worker-a"].Cert, w.certs.Clients["worker-a"].Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg.NextProtos = []string{"http/1.1"}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// One call, answered and kept alive: the connection is then idle.
	if _, err := io.WriteString(conn, "GET /no-such-path HTTP/1.1\r\nHost: gateway\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed the connection after its answer, not for being idle")
	}
	_ = conn.SetReadDeadline(time.Now().Add(lgtest.Timeout))
	_, err = br.ReadByte()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an idle connection was still open after %v", lgtest.Timeout)
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read on the idle connection: %v, want the server's close (EOF)", err)
	}
}

// TestServeLogsAFailedHandshake: a caller whose certificate the server's CA
// did not sign fails its TLS handshake, and Serve reports that in the
// server's own log (logger "http", with the caller's address), not on the
// standard library's logger.
func TestServeLogsAFailedHandshake(t *testing.T) {
	w := newWorld(t)
	core, logs := observer.New(zapcore.InfoLevel)
	logged := make(chan zapcore.Entry, 16)
	lg := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		select {
		case logged <- e:
		default:
		}
		return nil
	}))
	srv, err := gateway.New(lgtest.CoordinatorOf(t, w.etcd), gateway.WithSessionKey(w.key),
		gateway.WithIdentities(w.ids...), gateway.WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOnLoopback(t, w, srv)

	// A certificate of another CA: the server refuses it in the handshake.
	other, err := gateway.WriteDevCerts(t.TempDir(), trustDomain, "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := client.TLSConfig(w.certs.CA, other.Clients["worker-a"].Cert, other.Clients["worker-a"].Key)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err == nil {
		// TLS 1.3: the client's side completes first; the server's refusal
		// arrives on the first read.
		_ = conn.SetReadDeadline(time.Now().Add(lgtest.Timeout))
		_, err = conn.Read(make([]byte, 1))
		_ = conn.Close()
	}
	if err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}
	local := conn.LocalAddr().String()
	timeout := time.After(lgtest.Timeout)
	for {
		select {
		case e := <-logged:
			if strings.HasSuffix(e.LoggerName, ".http") && strings.Contains(e.Message, "TLS handshake error from "+local) {
				return
			}
		case <-timeout:
			t.Fatalf("no handshake error from %s in the server's log; it has: %v", local, logs.All())
		}
	}
}

// serveOnLoopback runs srv.Serve on a loopback port with w's server
// certificate until the test ends, and returns the port's address.
func serveOnLoopback(t *testing.T, w *world, srv *gateway.Server) string {
	t.Helper()
	tlsCfg, err := gateway.TLSConfig(w.certs.ServerCert, w.certs.ServerKey, w.certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, tlsCfg, time.Second) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// One trace joins the worker's span, the gateway's call, the etcd Txns it
// made and the provider call: the W3C trace context travels worker →
// gateway → etcd and adapter.
func TestTheTraceContextJoinsWorkerGatewayEtcdAndProvider(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(lgtest.Ctx(t)) })
	w := newWorld(t)
	w.etcdDial = []grpc.DialOption{gateway.TraceDialOption(tp)}
	r := w.replica(gateway.WithTracerProvider(tp))
	g := authorized(t, w, r, "task-1", "op-1")

	// The worker's own tracer (another process in real life).
	worker := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := worker.Tracer("worker").Start(lgtest.Ctx(t), "worker.dispatch")
	out, err := w.client(r, "worker-a").Dispatch(ctx, g, "op-1")
	span.End()
	if err != nil || out.State != ledger.Confirmed {
		t.Fatalf("Dispatch: %v, %s", err, out.State)
	}
	var call, etcdTxn, apply bool
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != span.SpanContext().TraceID() {
			continue
		}
		switch {
		case s.Name() == "leasegate.v1.WorkerService/Dispatch":
			call = s.Parent().SpanID() == span.SpanContext().SpanID()
		case strings.HasSuffix(s.Name(), "KV/Txn"):
			etcdTxn = true
		case s.Name() == "adapter.Apply":
			apply = true
		}
	}
	if !call || !etcdTxn || !apply {
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name()+"@"+s.SpanContext().TraceID().String()[:8])
		}
		t.Fatalf("in the worker's trace: gateway call under the worker's span %v, an etcd Txn %v, the adapter call %v; spans: %v",
			call, etcdTxn, apply, names)
	}
}

// Serve returns only once every call's handler has: a stream whose caller
// reset it and then closed the connection (as a browser leaving the
// console's live page does) leaves its handler running after the
// connection is gone (a watch frees its limit unit through etcd as it
// ends), and Serve waits for it before its caller closes the etcd client
// that handler still uses.
func TestServeWaitsForTheHandlerOfAStreamItsCallerReset(t *testing.T) {
	finished := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // a failed test does not leave the handler blocked
	served := serveAStreamItsCallerResets(t, lgtest.Timeout, func() {
		<-release // what a handler does after: free what it held
		close(finished)
	})
	// Serve must not return while the handler runs. Its early return is
	// what this waits for; the handler is released after that wait.
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) while a call's handler was still running", err)
	case <-time.After(time.Second):
	}
	free()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	select {
	case <-finished:
	default:
		t.Error("Serve returned before the call's handler did")
	}
}

// Serve waits for a reset stream's handler only up to its grace: one that
// is still running then makes Serve return an error saying so, rather
// than hold its caller for as long as the handler runs.
func TestServeGivesUpOnAHandlerStillRunningAfterTheGrace(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // the handler ends with the test
	const grace = 300 * time.Millisecond
	served := serveAStreamItsCallerResets(t, grace, func() {
		<-release // a handler that does not end within the grace
	})
	select {
	case err := <-served:
		if err == nil || !strings.Contains(err.Error(), "calls still running after") {
			t.Fatalf("Serve: %v, want the call still running after the grace named", err)
		}
	case <-time.After(lgtest.Timeout):
		t.Fatalf("Serve had not returned %v after its grace of %v, its call's handler still running", lgtest.Timeout, grace)
	}
}

// serveAStreamItsCallerResets serves a gateway with grace, makes one
// HTTP/2 call to a mounted handler that runs after (once it has seen its
// stream reset), resets that stream, closes the caller's connection and
// stops serving: Shutdown has no connection left to wait for, only the
// handler. It answers what Serve returns.
func serveAStreamItsCallerResets(t *testing.T, grace time.Duration, after func()) <-chan error {
	t.Helper()
	w := newWorld(t)
	srv, err := gateway.New(lgtest.CoordinatorOf(t, w.etcd), gateway.WithSessionKey(w.key), gateway.WithIdentities(w.ids...))
	if err != nil {
		t.Fatal(err)
	}
	reset := make(chan struct{})
	srv.Mount("/held/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.WriteHeader(http.StatusOK)
		rw.(http.Flusher).Flush()
		<-r.Context().Done() // the caller reset the stream
		close(reset)
		after()
	}))
	tlsCfg, err := gateway.TLSConfig(w.certs.ServerCert, w.certs.ServerKey, w.certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, tlsCfg, grace) }()

	cfg, err := client.TLSConfig(w.certs.CA, w.certs.Clients["worker-a"].Cert, w.certs.Clients["worker-a"].Key)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	rctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "https://"+ln.Addr().String()+"/held/", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("the call went over HTTP/%d, want HTTP/2", resp.ProtoMajor)
	}
	cancel()
	_ = resp.Body.Close()
	lgtest.Wait(t, reset, "the handler to see its stream reset")
	hc.CloseIdleConnections() // the caller gone
	stop()
	return served
}
