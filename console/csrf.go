package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// tokenValidity is how long a page's action token stays good: an approver
// may read evidence for a long time before approving.
const tokenValidity = 12 * time.Hour

// csrfTokens makes and checks the token every state-changing request
// carries. The browser sends its client certificate with any request to
// the console, a cross-site one included (ambient authority, like a
// cookie), so the certificate alone proves nothing about who wrote the
// request. The token is an HMAC, under a key only the server holds, of
// the presenting certificate's SHA-256 and an expiry: a page of the
// console shows it in its forms, another site cannot read it, and it is
// good only with the certificate it was made for.
type csrfTokens struct{ key []byte }

func certHash(cert *x509.Certificate) [32]byte { return sha256.Sum256(cert.Raw) }

func (c csrfTokens) mac(cert *x509.Certificate, expiry int64) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte("leasegate-console-action-v1\x00"))
	sum := certHash(cert)
	h.Write(sum[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(expiry))
	h.Write(b[:])
	return h.Sum(nil)
}

// make is a token for cert, good until now+tokenValidity.
func (c csrfTokens) make(cert *x509.Certificate, now time.Time) string {
	exp := now.Add(tokenValidity).Unix()
	return strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(c.mac(cert, exp))
}

var (
	errNoToken       = errors.New("the request carries no action token: a console page's form sends one; a request from elsewhere is refused")
	errBadToken      = errors.New("the action token was not made for this certificate (or is malformed): reload the page and act again")
	errExpiredToken  = errors.New("the action token has expired: reload the page and act again")
	errCrossSiteForm = errors.New("the request came from another site (Origin or Sec-Fetch-Site): refused")
)

// check refuses a token that is missing, malformed, expired or not made
// for cert.
func (c csrfTokens) check(token string, cert *x509.Certificate, now time.Time) error {
	if token == "" {
		return errNoToken
	}
	exp, mac, ok := strings.Cut(token, ".")
	if !ok {
		return errBadToken
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return errBadToken
	}
	// Strict: a MAC's last character carries two bits that are no part of
	// it, which a lenient decoder ignores; a token altered there is another
	// token, and refused.
	got, err := base64.RawURLEncoding.Strict().DecodeString(mac)
	if err != nil || !hmac.Equal(got, c.mac(cert, e)) {
		return errBadToken
	}
	if now.Unix() > e {
		return errExpiredToken
	}
	return nil
}

// sameOrigin refuses a request a browser says came from another site. It
// is a second line only: a browser may send neither header, and the token
// is what a cross-site request cannot have.
func sameOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && o != "https://"+r.Host {
		return errCrossSiteForm
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return errCrossSiteForm
	}
	return nil
}
