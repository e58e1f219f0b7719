// Package config holds the checks the reference adapters make of their
// configuration when they are constructed: one-line credential files (a
// database password, a bearer token, a TSIG secret; read at construction
// to check them, and again at every connection so that a rotated file
// takes effect; errors name the file, never its content; refused when
// anyone but the owner and the group may read them), TLS files, and hosts
// that must resolve. A constructor's error names the setting at fault
// (Invalid), as `leasegate serve`'s configuration spells it, so that the
// server's start can say which field of its file is wrong.
package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/secretfile"
	"github.com/leasegate/leasegate/internal/store"
)

// FieldError is a constructor's invalid_input with the setting at fault:
// Field is its name in the adapter's settings of `leasegate serve`'s
// configuration ("password_file", "nodes[1].conn"). Its message is the
// coordinator error's; errors.Is and errors.As see through it.
type FieldError struct {
	field string
	err   *coordinator.Error
}

// Invalid is op's invalid_input about field.
func Invalid(op, field string, format string, args ...any) error {
	return &FieldError{field: field, err: store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf(format, args...), nil)}
}

// Field is the setting at fault.
func (e *FieldError) Field() string { return e.field }

func (e *FieldError) Error() string { return e.err.Error() }

// Unwrap is the coordinator error (invalid_input).
func (e *FieldError) Unwrap() error { return e.err }

// Resolvable checks that host is a Unix socket directory, an IP address
// or a name that resolves now.
func Resolvable(host string) error {
	if strings.HasPrefix(host, "/") || net.ParseIP(host) != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		return fmt.Errorf("host %q does not resolve: %w", host, err)
	}
	return nil
}

// CheckPrivate refuses a credential file that others may read
// (secretfile.CheckPrivate).
func CheckPrivate(what, path string) error { return secretfile.CheckPrivate(what, path) }

// ReadSecret returns the one line of the private file at path; what names
// the credential in errors ("password file", "token file").
func ReadSecret(what, path string) (string, error) { return secretfile.Line(what, path) }

// KeyPair loads a client certificate and its key (PEM); the key file must
// be private (CheckPrivate).
func KeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, errors.New("a client certificate needs both its certificate and its key file")
	}
	if err := CheckPrivate("client key file", keyFile); err != nil {
		return tls.Certificate{}, err
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate %s / key %s: %w", certFile, keyFile, err)
	}
	return c, nil
}

// CertPool reads the PEM certificates of caFile.
func CertPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	return p, nil
}
