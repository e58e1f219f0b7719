package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// FormatLeaseID writes a lease ID as etcdctl does: 16 hex digits
// ("694d7b1f3c2a0b11"). leasegate's JSON carries lease IDs in this form, as
// strings: an ID above 2^53 as a JSON number is rounded by jq and
// JavaScript, and the mangled grant then names another lease.
func FormatLeaseID(id int64) string { return fmt.Sprintf("%016x", uint64(id)) }

// ParseLeaseID reads a lease ID written in hex, as etcdctl and leasegate's
// JSON show it ("694d7b1f3c2a0b11", "0x694d7b1f3c2a0b11"), or in decimal.
// A string of exactly 16 digits is read as hex (etcdctl's %016x form); a
// decimal ID is any other run of digits. The ID must be positive.
func ParseLeaseID(s string) (int64, error) {
	t := strings.TrimSpace(s)
	base := 10
	switch {
	case strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X"):
		t, base = t[2:], 16
	case len(t) == 16 || strings.ContainsAny(t, "abcdefABCDEF"):
		base = 16
	}
	if t == "" {
		return 0, fmt.Errorf("lease ID %q is empty", s)
	}
	u, err := strconv.ParseUint(t, base, 64)
	if err != nil {
		return 0, fmt.Errorf("lease ID %q is neither hex (as etcdctl prints it, e.g. 694d7b1f3c2a0b11) nor decimal", s)
	}
	if u == 0 || u > 1<<63-1 {
		return 0, fmt.Errorf("lease ID %q is out of range: it must be positive and fit in 63 bits", s)
	}
	return int64(u), nil
}

// LeaseJSON is a lease ID in JSON: written as a hex string (FormatLeaseID),
// "" for no lease; read from a hex string or a JSON number.
type LeaseJSON int64

func (l LeaseJSON) MarshalJSON() ([]byte, error) {
	if l == 0 {
		return []byte(`""`), nil
	}
	return json.Marshal(FormatLeaseID(int64(l)))
}

func (l *LeaseJSON) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*l = 0
			return nil
		}
		if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
			s = s[2:]
		}
		u, err := strconv.ParseUint(s, 16, 64)
		if err != nil || u > 1<<63-1 {
			return fmt.Errorf("lease %q is not a hex lease ID (as etcdctl prints it, e.g. 694d7b1f3c2a0b11)", s)
		}
		*l = LeaseJSON(u)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("lease %s is neither a hex string nor an integer", b)
	}
	*l = LeaseJSON(n)
	return nil
}
