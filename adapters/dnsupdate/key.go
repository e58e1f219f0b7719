package dnsupdate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/miekg/dns"

	"github.com/leasegate/leasegate/adapters/internal/config"
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
	if err := config.CheckPrivate("TSIG key file", path); err != nil {
		return tsigKey{}, err
	}
	s := string(b)
	n, a, sec := keyName.FindStringSubmatch(s), keyAlg.FindStringSubmatch(s), keySecret.FindStringSubmatch(s)
	if n == nil || a == nil || sec == nil {
		return tsigKey{}, fmt.Errorf("TSIG key file %s: want key \"name\" { algorithm ...; secret \"...\"; };", path)
	}
	alg, ok := algorithms[strings.ToLower(a[1])]
	if !ok {
		return tsigKey{}, fmt.Errorf("TSIG key file %s: algorithm %q: %s", path, a[1], algorithmNames)
	}
	if err := checkSecret(sec[1]); err != nil {
		return tsigKey{}, fmt.Errorf("TSIG key file %s: %w", path, err)
	}
	return tsigKey{name: dns.CanonicalName(n[1]), algorithm: alg, secret: sec[1]}, nil
}

const algorithmNames = "one of hmac-sha1, -sha224, -sha256, -sha384, -sha512"

func checkSecret(s string) error {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) < 16 {
		return errors.New("the secret must be base64 of at least 16 bytes")
	}
	return nil
}

// secretKey is k with its secret read from k.SecretFile (one line of
// base64). Its errors never quote the secret.
func secretKey(k Key) (tsigKey, error) {
	s, err := config.ReadSecret("TSIG secret file", k.SecretFile)
	if err != nil {
		return tsigKey{}, err
	}
	if err := checkSecret(s); err != nil {
		return tsigKey{}, fmt.Errorf("TSIG secret file %s: %w", k.SecretFile, err)
	}
	return tsigKey{name: dns.CanonicalName(k.Name), algorithm: algorithms[strings.ToLower(k.Algorithm)], secret: s}, nil
}
