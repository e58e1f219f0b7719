package gateway_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/gateway"
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
