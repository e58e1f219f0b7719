package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A certificate's identity is its one SPIFFE ID, else its CN; a
// certificate that is ambiguous, or whose CN poses as a SPIFFE ID, names
// none.
func TestCertIdentity(t *testing.T) {
	for _, c := range []struct {
		name string
		cn   string
		uris []string
		want string // "" with says: no identity
		says string
	}{
		{"a SPIFFE ID and a CN", "w", []string{"spiffe://td/w"}, "spiffe://td/w", ""},
		{"a trust domain's own ID", "", []string{"spiffe://td"}, "spiffe://td", ""},
		{"a CN", "worker-a", nil, "worker-a", ""},
		{"a CN and a URI that is no SPIFFE ID", "w", []string{"https://td/w"}, "w", ""},
		{"two SPIFFE IDs", "w", []string{"spiffe://td/operator", "spiffe://td/w"}, "", "exactly one"},
		{"a SPIFFE ID and another URI", "w", []string{"https://td/x", "spiffe://td/w"}, "", "exactly one"},
		{"a SPIFFE URI without a trust domain", "operator", []string{"spiffe:/operator"}, "", "not a SPIFFE ID"},
		{"a SPIFFE URI with a port", "w", []string{"spiffe://td:8443/w"}, "", "not a SPIFFE ID"},
		{"a SPIFFE URI with a user", "w", []string{"spiffe://u@td/w"}, "", "not a SPIFFE ID"},
		{"a SPIFFE URI with a query", "w", []string{"spiffe://td/w?x=1"}, "", "not a SPIFFE ID"},
		{"a SPIFFE URI with a fragment", "w", []string{"spiffe://td/w#x"}, "", "not a SPIFFE ID"},
		{"a CN in SPIFFE form", "spiffe://td/operator", nil, "", "URI SAN only"},
		{"a CN in SPIFFE form, in capitals", "SPIFFE://td/operator", nil, "", "URI SAN only"},
		{"nothing", "", nil, "", "neither"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cert := &x509.Certificate{Subject: pkix.Name{CommonName: c.cn}}
			for _, u := range c.uris {
				cert.URIs = append(cert.URIs, mustURL(t, u))
			}
			got, err := gateway.CertIdentity(cert)
			switch {
			case c.says == "" && (err != nil || got != c.want):
				t.Fatalf("CertIdentity: %q, %v; want %q", got, err, c.want)
			case c.says != "" && (err == nil || got != "" || !strings.Contains(err.Error(), c.says)):
				t.Fatalf("CertIdentity: %q, %v; want no identity, saying %q", got, err, c.says)
			}
		})
	}
}

// testCA is a CA of the test's own, whose client certificates carry what a
// test puts in them.
type testCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its PEM
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.file = ca.write("ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(name, typ string, der []byte) string {
	ca.t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// issue is a client certificate of CN cn and URI SANs uris, as files.
func (ca *testCA) issue(name, cn string, uris ...*url.URL) gateway.ClientFiles {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: n, Subject: pkix.Name{CommonName: cn}, URIs: uris,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return gateway.ClientFiles{Cert: ca.write(name+".pem", "CERTIFICATE", der), Key: ca.write(name+"-key.pem", "EC PRIVATE KEY", kb)}
}

// A certificate from the trusted CA that names the operator only by a CN
// in SPIFFE form, or that carries the operator's SPIFFE ID beside another,
// does not act as the operator: unauthenticated, nothing written. The
// operator's own certificate of that CA does.
func TestACertificateNamingNoIdentityIsUnauthenticated(t *testing.T) {
	w := newWorld(t)
	ca := newTestCA(t)
	w.clientCA = ca.file
	r := w.replica()
	operator := mustURL(t, w.certs.IDs["operator"])
	as := func(f gateway.ClientFiles) *client.Client {
		t.Helper()
		cfg, err := client.TLSConfig(w.certs.CA, f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(r.ts.URL, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	rotate := func(c *client.Client) error {
		_, err := c.RotateRealm(lgtest.Ctx(t))
		return err
	}
	for _, c := range []struct {
		name string
		cert gateway.ClientFiles
	}{
		{"a CN in SPIFFE form", ca.issue("cn", w.certs.IDs["operator"])},
		{"two SPIFFE IDs", ca.issue("two", "x", operator, mustURL(t, w.certs.IDs["stranger"]))},
	} {
		t.Run(c.name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, w.etcd, coordinator.DefaultPrefix, coordinator.Unauthenticated, func() error {
				return rotate(as(c.cert))
			})
		})
	}
	if err := rotate(as(ca.issue("operator", "operator", operator))); err != nil {
		t.Fatalf("the operator's own certificate: %v", err)
	}
}
