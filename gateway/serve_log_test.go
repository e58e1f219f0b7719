package gateway_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

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
