package client

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSplitTransport: a request with a known-length body (a Connect unary
// call) goes over HTTP/1.1, one whose body streams (a bidi stream) over
// HTTP/2, both with the caller's TLS configuration; without the split (the
// gRPC protocol) everything goes over HTTP/2.
func TestSplitTransport(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, r.Proto)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	split := splitTransport{h1: newTransport(cfg, false), h2: newTransport(cfg, true)}
	defer split.CloseIdleConnections()
	for _, tc := range []struct {
		name      string
		rt        http.RoundTripper
		streaming bool
		want      string
	}{
		{"unary", split, false, "HTTP/1.1"},
		{"stream", split, true, "HTTP/2.0"},
		{"stream of unknown length", split, true, "HTTP/2.0"},
		{"grpc", split.h2, false, "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader([]byte("message"))
			if tc.streaming {
				body = io.MultiReader(body) // no known length
			}
			req, err := http.NewRequest(http.MethodPost, ts.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.streaming != (req.ContentLength == 0) {
				t.Fatalf("ContentLength %d", req.ContentLength)
			}
			if tc.name == "stream" {
				req.ContentLength = -1 // as connect sends a client or bidi stream
			}
			resp, err := tc.rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if string(got) != tc.want {
				t.Errorf("served over %s, want %s", got, tc.want)
			}
		})
	}
}
