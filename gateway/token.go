package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// MinSessionKeyBytes is the shortest session key accepted.
const MinSessionKeyBytes = 32

// sessionClaims is what a session token carries: whose lease it is, and the
// deadline of its last confirmed renewal. It is signed, not secret.
type sessionClaims struct {
	Owner    string `json:"o"`
	Lease    int64  `json:"l"`
	TTL      int64  `json:"t"` // seconds
	Deadline int64  `json:"d"` // unix nanoseconds, the server's clock
}

// tokens signs and checks session tokens with the replicas' shared key, so
// that a lease is bound to the identity it was opened for without any state
// but the key: any replica checks a token any other issued.
type tokens struct{ key []byte }

func (t tokens) sign(c sessionClaims) string {
	payload, _ := json.Marshal(c)
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(t.mac(p))
}

func (t tokens) mac(p string) []byte {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte("leasegate-session-v1\x00"))
	m.Write([]byte(p))
	return m.Sum(nil)
}

// check reads a token of the caller's: a token that is not one of ours is
// invalid_input; one of another identity's sessions permission_denied.
func (t tokens) check(op, token, caller string) (sessionClaims, error) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok || token == "" {
		return sessionClaims{}, store.NewError(store.InvalidInput, op, "", "", "session_token is not a session token (OpenSession returns one)", nil)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, t.mac(p)) {
		return sessionClaims{}, store.NewError(store.InvalidInput, op, "", "", "session_token was not issued by this gateway's session key", nil)
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	var c sessionClaims
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	if err != nil {
		return sessionClaims{}, store.NewError(store.InvalidInput, op, "", "", fmt.Sprintf("session_token: %v", err), nil)
	}
	if c.Owner != caller {
		return sessionClaims{}, refuseCaller(store.NewError(coordinator.PermissionDenied, op, "", "", fmt.Sprintf("the session is %q's; the caller is %q", c.Owner, caller), nil))
	}
	return c, nil
}

func (c sessionClaims) ttl() time.Duration  { return time.Duration(c.TTL) * time.Second }
func (c sessionClaims) deadline() time.Time { return time.Unix(0, c.Deadline) }
func (c sessionClaims) withDeadline(d time.Time) sessionClaims {
	c.Deadline = d.UnixNano()
	return c
}
