package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// A connection that never became ready says only "context deadline
// exceeded": gRPC keeps the TLS handshake's reason to itself, and the etcd
// client replaces gRPC's error with its context's. handshakeReason asks
// each endpoint again, with one TLS handshake (or plain HTTP/2 preface) of
// its own made as the etcd client makes it, and names what went wrong.
//
// It decides, over every endpoint:
//
//   - every endpoint refused the client's certificate, or presented one the
//     client does not trust (unknown CA, expired, wrong name):
//     unauthenticated — the same files get the same answer;
//   - some endpoint showed such a reason, or spoke the other protocol (TLS
//     against a plain port, plain against a TLS port): authority_unavailable,
//     with every endpoint's reason in the detail;
//   - no endpoint showed a reason (unreachable, or the handshake went
//     through): nil — the caller keeps its own error.

// handshakeTimeout bounds the reading of a server's first answer once the
// handshake is done: a server that accepted the client's certificate sends
// its HTTP/2 settings at once.
const handshakeTimeout = time.Second

// http2Preface is what a gRPC client sends first: the connection preface
// and an empty SETTINGS frame.
var http2Preface = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)

// endpointFinding is what the handshake with one endpoint showed.
type endpointFinding struct {
	endpoint string
	reason   string // "" when nothing is wrong with TLS (or the endpoint is unreachable)
	refused  bool   // a certificate refused by either side: a configuration to fix
}

// handshakeReason probes g's endpoints within timeout; see the file comment.
func handshakeReason(ctx context.Context, g *globals, op string, timeout time.Duration) *coordinator.Error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	findings := make([]endpointFinding, len(g.endpoints))
	var wg sync.WaitGroup
	for i, e := range g.endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			findings[i] = probeEndpoint(ctx, e, g.tls)
		}()
	}
	wg.Wait()
	// One reason once, with every endpoint that gave it.
	var reasons []string
	byReason := map[string][]string{}
	refused := 0
	for _, f := range findings {
		if f.reason == "" {
			continue
		}
		if _, seen := byReason[f.reason]; !seen {
			reasons = append(reasons, f.reason)
		}
		byReason[f.reason] = append(byReason[f.reason], f.endpoint)
		if f.refused {
			refused++
		}
	}
	for i, r := range reasons {
		reasons[i] = strings.Join(byReason[r], ", ") + ": " + r
	}
	switch {
	case len(reasons) == 0:
		return nil
	case refused == len(findings):
		return store.NewError(coordinator.Unauthenticated, op, "", "", "TLS handshake failed: "+strings.Join(reasons, "; "), nil)
	}
	return store.NewError(coordinator.AuthorityUnavailable, op, "", "", "no connection to etcd: "+strings.Join(reasons, "; "), nil)
}

// probeEndpoint dials one endpoint as the etcd client would: TLS for
// https:// and unixs://, and for host:port when TLS files are given.
func probeEndpoint(ctx context.Context, endpoint string, cfg *tls.Config) endpointFinding {
	f := endpointFinding{endpoint: endpoint}
	network, addr, host, secure := dialTarget(endpoint, cfg != nil)
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return f // unreachable: the caller's own error says so
	}
	defer conn.Close()
	deadline := time.Now().Add(handshakeTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if !secure {
		if _, err := conn.Write(http2Preface); err != nil {
			return f
		}
		var b [1]byte
		if _, err := conn.Read(b[:]); err != nil && !isTimeout(err) {
			f.reason = fmt.Sprintf("closed the connection on a plain HTTP/2 preface (%v): it may serve TLS only; use https:// and --cacert", err)
		}
		return f
	}
	c := &tls.Config{}
	if cfg != nil {
		c = cfg.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	c.NextProtos = []string{"h2"}
	tc := tls.Client(conn, c)
	if err := tc.HandshakeContext(ctx); err != nil {
		f.reason, f.refused = tlsReason(err)
		return f
	}
	// With TLS 1.3 the server checks the client's certificate after the
	// client's side of the handshake is done: its refusal is the first read.
	if _, err := tc.Write(http2Preface); err != nil {
		f.reason, f.refused = tlsReason(err)
		return f
	}
	var b [1]byte
	if _, err := tc.Read(b[:]); err != nil && !isTimeout(err) {
		f.reason, f.refused = tlsReason(err)
	}
	return f
}

// dialTarget is the network and address an endpoint names, the host to
// verify its certificate for, and whether the etcd client speaks TLS to it.
func dialTarget(endpoint string, tlsGiven bool) (network, addr, host string, secure bool) {
	if !strings.Contains(endpoint, "://") {
		h, _, _ := net.SplitHostPort(endpoint)
		return "tcp", endpoint, h, tlsGiven
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "tcp", endpoint, "", tlsGiven
	}
	switch u.Scheme {
	case "unix", "unixs":
		return "unix", u.Host + u.Path, "", u.Scheme == "unixs"
	}
	return "tcp", u.Host, u.Hostname(), u.Scheme == "https"
}

// tlsReason says why a handshake failed, and whether a certificate was
// refused (by this client or by the server) rather than the protocol spoken.
func tlsReason(err error) (string, bool) {
	var (
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		remote    *net.OpError
		record    tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknownCA):
		return fmt.Sprintf("etcd's certificate is not signed by a CA this client trusts (check --cacert): %v", err), true
	case errors.As(err, &invalid), errors.As(err, &hostname):
		return fmt.Sprintf("etcd's certificate is not valid here: %v", err), true
	case errors.As(err, &remote) && remote.Op == "remote error":
		return fmt.Sprintf("etcd refused the client certificate (check --cert and --key, and that their CA is etcd's --trusted-ca-file): %v", err), true
	case errors.As(err, &record), errors.Is(err, io.EOF):
		return fmt.Sprintf("does not speak TLS (%v): use http://, or the member's TLS port", err), false
	}
	if isTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return "", false
	}
	return fmt.Sprintf("TLS handshake failed: %v", err), false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
