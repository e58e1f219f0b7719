package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestCredentialsRefused: a wrong password, an unknown user and a TLS
// handshake that fails on a certificate are unauthenticated (exit 6:
// fix the configuration), never a hold; the one stderr line carries the
// handshake's reason (not "context deadline exceeded"); nothing is
// written. TLS against a plain port is a hold, with its reason.
func TestCredentialsRefused(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithTLS(), embedtest.WithAuth("root-pw"))
	f := cl.TLSFiles()
	cl.AddPrefixUser(t, "worker", "worker-pw", coordinator.DefaultPrefix+"/")
	dir := t.TempDir()
	other := newTestCA(t, dir, "another CA")
	now := time.Now()
	otherClient, otherKey := other.issue(t, dir, "other-client", now.Add(-time.Hour), now.Add(time.Hour))
	clusterCA := loadTestCA(t, f.CA, f.CAKey)
	expired, expiredKey := clusterCA.issue(t, dir, "expired-client", now.Add(-48*time.Hour), now.Add(-24*time.Hour))

	eps := strings.Join(cl.Endpoints(), ",")
	root := cl.Client(t)
	lgtest.CoordinatorOf(t, root) // a keyspace, so that a success would be ok
	password := []string{"--user", "worker", "--password", "worker-pw"}
	// The group returns when its parallel subtests are done.
	lgtest.WritesNothing(t, root, "", "refused credentials", func() {
		t.Run("group", func(t *testing.T) {
			for _, tc := range []struct {
				name  string
				flags []string
				code  int
				d     coordinator.Disposition
				says  string
			}{
				{"a wrong password", []string{"--cacert", f.CA, "--cert", f.ClientCert, "--key", f.ClientKey, "--user", "worker", "--password", "nope"},
					cli.ExitDenied, coordinator.Unauthenticated, "invalid user ID or password"},
				{"an unknown user", []string{"--cacert", f.CA, "--cert", f.ClientCert, "--key", f.ClientKey, "--user", "ghost", "--password", "nope"},
					cli.ExitDenied, coordinator.Unauthenticated, "invalid user ID or password"},
				{"etcd's CA unknown to the client", append([]string{"--cacert", other.cert, "--cert", f.ClientCert, "--key", f.ClientKey}, password...),
					cli.ExitDenied, coordinator.Unauthenticated, "certificate signed by unknown authority"},
				{"a client certificate of another CA", append([]string{"--cacert", f.CA, "--cert", otherClient, "--key", otherKey}, password...),
					cli.ExitDenied, coordinator.Unauthenticated, "etcd refused the client certificate"},
				{"an expired client certificate", append([]string{"--cacert", f.CA, "--cert", expired, "--key", expiredKey}, password...),
					cli.ExitDenied, coordinator.Unauthenticated, "etcd refused the client certificate"},
				{"no client certificate", append([]string{"--cacert", f.CA}, password...),
					cli.ExitDenied, coordinator.Unauthenticated, "certificate required"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					for _, cmd := range [][]string{{"list"}, {"claim", "--tenant", "t", "--task", "k", "--owner", "o", "--ttl", "10s"}} {
						args := append(append([]string{"--endpoints", eps, "-o", "json", "--dial-timeout", "1s"}, tc.flags...), cmd...)
						r := execApp(t, call{}, args...)
						want(t, r, tc.code, tc.d)
						t.Log(r.stderr)
						if !strings.Contains(r.stderr, tc.says) || strings.Contains(r.stderr, "context deadline exceeded") {
							t.Fatalf("%v: stderr %q does not say %q (or says only that time ran out)", cmd, r.stderr, tc.says)
						}
					}
				})
			}
			t.Run("TLS against a plain port: a hold, with the reason", func(t *testing.T) {
				t.Parallel()
				plain := strings.ReplaceAll(strings.Join(shared.Endpoints(), ","), "http://", "https://")
				r := execApp(t, call{}, "--endpoints", plain, "--cacert", f.CA, "-o", "json", "--dial-timeout", "1s", "list")
				want(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
				if !strings.Contains(r.stderr, "does not speak TLS") {
					t.Fatalf("stderr %q does not say the endpoint does not speak TLS", r.stderr)
				}
			})
			t.Run("plain against a TLS port: a hold, with the reason", func(t *testing.T) {
				t.Parallel()
				r := execApp(t, call{}, append([]string{"--endpoints", strings.ReplaceAll(eps, "https://", "http://"), "-o", "json",
					"--dial-timeout", "1s"}, append(password, "list")...)...)
				want(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
				if !strings.Contains(r.stderr, "it may serve TLS only") {
					t.Fatalf("stderr %q does not say the endpoint may serve TLS only", r.stderr)
				}
			})
		})
	})
}

// testCA is a certificate authority a test issues certificates with.
type testCA struct {
	cert string // PEM file
	x509 *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newTestCA makes a CA of its own, its certificate written under dir.
func newTestCA(t *testing.T, dir, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".pem")
	writePEMFile(t, path, "CERTIFICATE", der)
	return testCA{cert: path, x509: cert, key: key}
}

// loadTestCA reads a CA's certificate and key (PKCS #8) from PEM files.
func loadTestCA(t *testing.T, certFile, keyFile string) testCA {
	t.Helper()
	cert, err := x509.ParseCertificate(readPEM(t, certFile))
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParsePKCS8PrivateKey(readPEM(t, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: certFile, x509: cert, key: key.(*ecdsa.PrivateKey)}
}

// issue writes a client certificate and key for cn, valid from notBefore
// to notAfter, and returns their files.
func (ca testCA) issue(t *testing.T, dir, cn string, notBefore, notAfter time.Time) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.x509, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
	writePEMFile(t, certFile, "CERTIFICATE", der)
	writePEMFile(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEMFile(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readPEM(t *testing.T, path string) []byte {
	t.Helper()
	b, _ := pem.Decode([]byte(readFile(t, path)))
	if b == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	return b.Bytes
}
