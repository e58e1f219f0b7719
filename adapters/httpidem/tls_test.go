package httpidem_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/leasegate/leasegate/adapters/httpidem"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// A service that wants mTLS: the adapter verifies it against WithCAFile's
// roots and presents WithClientCertificate's pair, read again at each
// handshake (a rotated pair is what the next connection presents); the
// token goes as a bearer. Probe passes only with all three, and fails on a
// refused credential.
func TestClientCertificateAndCA(t *testing.T) {
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "pki"), "test.example", "leasegate", "other")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	var mu sync.Mutex
	var seen []string // the client certificates' SPIFFE IDs, one per request
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].URIs[0].String())
		mu.Unlock()
		w.Header().Set("Connection", "close") // each request a new handshake
		if r.Header.Get("Authorization") != "Bearer tok-1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNotFound) // a collection's root: the service is there
	}))
	server, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	ts.StartTLS()
	defer ts.Close()
	base := ts.URL + "/v1/records"
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	use := func(name string) {
		for from, to := range map[string]string{certs.Clients[name].Cert: certFile, certs.Clients[name].Key: keyFile} {
			b, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	use("leasegate")
	ctx := lgtest.Ctx(t)

	ad, err := httpidem.New(base, httpidem.WithCAFile(certs.CA), httpidem.WithClientCertificate(certFile, keyFile), httpidem.WithTokenFile(token))
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.Probe(ctx); err != nil {
		t.Fatalf("Probe with CA, certificate and token: %v", err)
	}
	use("other") // rotated: the same adapter's next handshake presents the new pair
	if err := ad.Probe(ctx); err != nil {
		t.Fatalf("Probe after rotation: %v", err)
	}
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if len(got) != 2 || got[0] != certs.IDs["leasegate"] || got[1] != certs.IDs["other"] {
		t.Fatalf("the service saw certificates %v, want %s then %s", got, certs.IDs["leasegate"], certs.IDs["other"])
	}

	noCert, err := httpidem.New(base, httpidem.WithCAFile(certs.CA), httpidem.WithTokenFile(token))
	if err != nil {
		t.Fatal(err)
	}
	if err := noCert.Probe(ctx); err == nil {
		t.Fatal("Probe without a client certificate passed; the service requires one")
	}
	noRoots, err := httpidem.New(base, httpidem.WithClientCertificate(certFile, keyFile), httpidem.WithTokenFile(token))
	if err != nil {
		t.Fatal(err)
	}
	if err := noRoots.Probe(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Probe without the service's CA: %v, want the certificate refused", err)
	}
	noToken, err := httpidem.New(base, httpidem.WithCAFile(certs.CA), httpidem.WithClientCertificate(certFile, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := noToken.Probe(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Probe without the token: %v, want 401", err)
	}
	if _, err := httpidem.New(base, httpidem.WithHTTPClient(http.DefaultClient), httpidem.WithCAFile(certs.CA)); err == nil {
		t.Fatal("WithHTTPClient with WithCAFile accepted: one of them would be ignored")
	}
}
