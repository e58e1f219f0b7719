package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// DevCerts are the PEM files of a throwaway CA (leasegate serve --dev, and
// tests): the CA, the server's certificate for 127.0.0.1, ::1 and
// localhost, and one client certificate per name, each carrying the SPIFFE
// ID spiffe://<trust domain>/<name> as its URI SAN and name as its CN.
type DevCerts struct {
	Dir        string
	CA         string
	ServerCert string
	ServerKey  string
	// Clients maps a name to its certificate and key files.
	Clients map[string]ClientFiles
	// IDs maps a name to its SPIFFE ID.
	IDs map[string]string
}

// ClientFiles are one client's certificate and key.
type ClientFiles struct{ Cert, Key string }

// WriteDevCerts writes a new CA, a server certificate and one client
// certificate for each name into dir, valid for a day. The keys are
// throwaway: never use them for anything but a local try.
func WriteDevCerts(dir, trustDomain string, names ...string) (DevCerts, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DevCerts{}, fmt.Errorf("gateway: dev certs: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return DevCerts{}, fmt.Errorf("gateway: dev certs: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "leasegate dev CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return DevCerts{}, fmt.Errorf("gateway: dev certs: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	out := DevCerts{Dir: dir, CA: filepath.Join(dir, "ca.pem"), Clients: map[string]ClientFiles{}, IDs: map[string]string{}}
	if err := writePEM(out.CA, "CERTIFICATE", caDER); err != nil {
		return DevCerts{}, err
	}
	issue := func(name string, tmpl *x509.Certificate) (ClientFiles, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return ClientFiles{}, fmt.Errorf("gateway: dev certs: %w", err)
		}
		tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial(), now.Add(-time.Hour), now.Add(24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return ClientFiles{}, fmt.Errorf("gateway: dev certs: %w", err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return ClientFiles{}, fmt.Errorf("gateway: dev certs: %w", err)
		}
		f := ClientFiles{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
		if err := writePEM(f.Cert, "CERTIFICATE", der); err != nil {
			return ClientFiles{}, err
		}
		return f, writePEM(f.Key, "EC PRIVATE KEY", kb)
	}
	srv, err := issue("server", &x509.Certificate{Subject: pkix.Name{CommonName: "leasegate-gateway"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return DevCerts{}, err
	}
	out.ServerCert, out.ServerKey = srv.Cert, srv.Key
	for _, name := range names {
		id := &url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/" + name}
		f, err := issue(name, &x509.Certificate{Subject: pkix.Name{CommonName: name}, URIs: []*url.URL{id},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			return DevCerts{}, err
		}
		out.Clients[name], out.IDs[name] = f, id.String()
	}
	return out, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("gateway: dev certs: %w", err)
	}
	return nil
}

// ReadDevCerts reads the dev certificates WriteDevCerts left in dir, if
// they are all there and still usable: the CA, the server's certificate
// and one client certificate for each name carrying the SPIFFE ID
// spiffe://<trust domain>/<name>, each signed by the CA and valid for at
// least another hour. ok is false, with no error, when any of them is
// missing or unusable: the caller writes new ones.
func ReadDevCerts(dir, trustDomain string, names ...string) (certs DevCerts, ok bool) {
	certs = DevCerts{Dir: dir, CA: filepath.Join(dir, "ca.pem"), Clients: map[string]ClientFiles{}, IDs: map[string]string{}}
	caPEM, err := os.ReadFile(certs.CA)
	if err != nil {
		return DevCerts{}, false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return DevCerts{}, false
	}
	soon := time.Now().Add(time.Hour)
	usable := func(f ClientFiles, usage x509.ExtKeyUsage, id string) bool {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return false
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil || c.NotAfter.Before(soon) {
			return false
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return false
		}
		return id == "" || (len(c.URIs) == 1 && c.URIs[0].String() == id)
	}
	srv := ClientFiles{Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")}
	if !usable(srv, x509.ExtKeyUsageServerAuth, "") {
		return DevCerts{}, false
	}
	certs.ServerCert, certs.ServerKey = srv.Cert, srv.Key
	for _, name := range names {
		id := (&url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/" + name}).String()
		f := ClientFiles{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
		if !usable(f, x509.ExtKeyUsageClientAuth, id) {
			return DevCerts{}, false
		}
		certs.Clients[name], certs.IDs[name] = f, id
	}
	return certs, true
}
