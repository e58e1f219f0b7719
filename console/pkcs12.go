package console

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// DevPKCS12Password is the password of the PKCS#12 files serve --dev
// writes: browsers import a certificate with its key from such a file and
// most refuse one without a password. The keys are throwaway.
const DevPKCS12Password = "leasegate-dev"

// WritePKCS12 writes the certificate and key of certFile and keyFile (PEM),
// with the CA of caFile, to out as a PKCS#12 file under password: what a
// browser imports to present the certificate.
func WritePKCS12(out, certFile, keyFile, caFile, password string) error {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("console: pkcs12: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("console: pkcs12: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("console: pkcs12: %w", err)
	}
	var cas []*x509.Certificate
	for rest := caPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		ca, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("console: pkcs12: CA: %w", err)
		}
		cas = append(cas, ca)
	}
	der, err := pkcs12.Modern.WithRand(rand.Reader).Encode(pair.PrivateKey, leaf, cas, password)
	if err != nil {
		return fmt.Errorf("console: pkcs12: %w", err)
	}
	if err := os.WriteFile(out, der, 0o600); err != nil {
		return fmt.Errorf("console: pkcs12: %w", err)
	}
	return nil
}
