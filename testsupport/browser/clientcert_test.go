package browser_test

import (
	"crypto/rand"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/testsupport/browser"
)

// A page behind TLS answers with the client certificate's CN: Chromium,
// given ClientCertificate's options, presents the one imported, with no
// dialog (without the profile's setting it waits for a choice no one makes
// and the page never loads).
func TestClientCertificateIsPresentedHeadless(t *testing.T) {
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(dir, "test.example", "approver")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.TLSConfig(certs.ServerCert, certs.ServerKey, certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: cfg, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := "no certificate"
		if len(r.TLS.VerifiedChains) > 0 {
			who = "certificate of " + r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
		_, _ = w.Write([]byte("<!doctype html><p id=who>" + who + "</p>"))
	})}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	origin := "https://" + ln.Addr().String()

	pair, err := tls.LoadX509KeyPair(certs.Clients["approver"].Cert, certs.Clients["approver"].Key)
	if err != nil {
		t.Fatal(err)
	}
	der, err := pkcs12.Modern.WithRand(rand.Reader).Encode(pair.PrivateKey, pair.Leaf, nil, "pw")
	if err != nil {
		t.Fatal(err)
	}
	p12 := filepath.Join(dir, "approver.p12")
	if err := os.WriteFile(p12, der, 0o600); err != nil {
		t.Fatal(err)
	}
	b := browser.Start(t, browser.ClientCertificate(t, p12, "pw", certs.CA, origin)...)
	p := b.NewPage(t, 400, 200)
	p.Navigate(t, origin+"/")
	text, err := chromedp.Run(p.Context(), chromedp.Text("#who"))
	if err != nil {
		t.Fatal(err)
	}
	if text != "certificate of approver" {
		t.Errorf("the page says %q, want the approver's certificate presented", text)
	}
}
