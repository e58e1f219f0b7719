package console

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A token is good for the certificate it was made for, until its expiry;
// not for another certificate, not after, not altered, not under another
// key.
func TestActionTokenIsBoundToTheCertificateAndExpires(t *testing.T) {
	a, b := &x509.Certificate{Raw: []byte("certificate a")}, &x509.Certificate{Raw: []byte("certificate b")}
	tk := csrfTokens{key: []byte("0123456789abcdef0123456789abcdef")}
	now := time.Unix(1_800_000_000, 0)
	tok := tk.make(a, now)
	other := csrfTokens{key: []byte("fedcba9876543210fedcba9876543210")}
	for _, c := range []struct {
		name  string
		tk    csrfTokens
		token string
		cert  *x509.Certificate
		at    time.Time
		want  error
	}{
		{"its certificate", tk, tok, a, now, nil},
		{"just before expiry", tk, tok, a, now.Add(tokenValidity), nil},
		{"after expiry", tk, tok, a, now.Add(tokenValidity + time.Second), errExpiredToken},
		{"another certificate", tk, tok, b, now, errBadToken},
		{"another key", other, tok, a, now, errBadToken},
		{"expiry altered", tk, "9" + tok, a, now, errBadToken},
		{"MAC's unused bits altered", tk, unusedBitsFlipped(tok), a, now, errBadToken},
		{"none", tk, "", a, now, errNoToken},
		{"malformed", tk, "abc", a, now, errBadToken},
		{"no MAC", tk, strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + ".", a, now, errBadToken},
		{"MAC not base64", tk, strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + ".%%%", a, now, errBadToken},
		// An expiry that does not parse, with the MAC of what a parser that
		// ignored the error would take it for.
		{"expiry not a number", tk, "x." + base64.RawURLEncoding.EncodeToString(tk.mac(a, 0)), a, now, errBadToken},
		{"expiry out of range", tk, "99999999999999999999." + base64.RawURLEncoding.EncodeToString(tk.mac(a, math.MaxInt64)), a, now, errBadToken},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.tk.check(c.token, c.cert, c.at); !errors.Is(err, c.want) {
				t.Errorf("check: %v, want %v", err, c.want)
			}
		})
	}
}

// A page's token is good for twelve hours from the page's load (what
// docs/console.md says), and not a second more.
func TestActionTokenIsGoodForTwelveHours(t *testing.T) {
	a := &x509.Certificate{Raw: []byte("certificate a")}
	tk := csrfTokens{key: []byte("0123456789abcdef0123456789abcdef")}
	now := time.Unix(1_800_000_000, 0)
	tok := tk.make(a, now)
	if err := tk.check(tok, a, now.Add(12*time.Hour)); err != nil {
		t.Errorf("12 h after the page's load: %v", err)
	}
	if err := tk.check(tok, a, now.Add(12*time.Hour+time.Second)); !errors.Is(err, errExpiredToken) {
		t.Errorf("12 h and a second after the page's load: %v, want expired", err)
	}
}

// unusedBitsFlipped is tok with the lowest bit of its last character's
// value flipped: of a 32-byte MAC in 43 base64 characters, a bit that
// encodes nothing.
func unusedBitsFlipped(tok string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	return tok[:len(tok)-1] + string(alphabet[last^1])
}
