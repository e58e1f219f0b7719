// Package config holds the checks the reference adapters make of their
// configuration when they are constructed: one-line credential files (a
// database password, a bearer token; read at construction to check them,
// and again at every connection so that a rotated file takes effect; errors
// name the file, never its content) and hosts that must resolve.
package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

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

// ReadSecret returns the one line of the file at path; what names the
// credential in errors ("password file", "token file").
func ReadSecret(what, path string) (string, error) {
	if path == "" {
		return "", errors.New("no " + what)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("%s %s must hold one non-empty line", what, path)
	}
	return s, nil
}
