package dnsupdate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/miekg/dns"
)

// tsigKey is a TSIG key as BIND's key files (and nsupdate -k) write it:
//
//	key "name" { algorithm hmac-sha256; secret "base64"; };
type tsigKey struct {
	name, algorithm, secret string
}

var (
	keyName   = regexp.MustCompile(`(?s)key\s+"?([A-Za-z0-9._-]+)"?\s*\{`)
	keyAlg    = regexp.MustCompile(`algorithm\s+"?([A-Za-z0-9-]+)"?\s*;`)
	keySecret = regexp.MustCompile(`secret\s+"([A-Za-z0-9+/=]+)"\s*;`)
)

// algorithms are the TSIG algorithms the adapter signs with.
var algorithms = map[string]string{
	"hmac-sha1":   dns.HmacSHA1,
	"hmac-sha224": dns.HmacSHA224,
	"hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384,
	"hmac-sha512": dns.HmacSHA512,
}

// readKey reads a key file. Its errors never quote the secret.
func readKey(path string) (tsigKey, error) {
	if path == "" {
		return tsigKey{}, errors.New("no TSIG key file")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return tsigKey{}, fmt.Errorf("TSIG key file: %w", err)
	}
	s := string(b)
	n, a, sec := keyName.FindStringSubmatch(s), keyAlg.FindStringSubmatch(s), keySecret.FindStringSubmatch(s)
	if n == nil || a == nil || sec == nil {
		return tsigKey{}, fmt.Errorf("TSIG key file %s: want key \"name\" { algorithm ...; secret \"...\"; };", path)
	}
	alg, ok := algorithms[strings.ToLower(a[1])]
	if !ok {
		return tsigKey{}, fmt.Errorf("TSIG key file %s: algorithm %q: one of hmac-sha1, -sha224, -sha256, -sha384, -sha512", path, a[1])
	}
	raw, err := base64.StdEncoding.DecodeString(sec[1])
	if err != nil || len(raw) < 16 {
		return tsigKey{}, fmt.Errorf("TSIG key file %s: the secret must be base64 of at least 16 bytes", path)
	}
	return tsigKey{name: dns.CanonicalName(n[1]), algorithm: alg, secret: sec[1]}, nil
}
