package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
)

// FuzzParseGrant: what --grant accepts is a valid grant, and the CLI reads
// back, bare or wrapped in claim's output, what it writes.
func FuzzParseGrant(f *testing.F) {
	f.Add([]byte(`{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":"694d7b1f3c2a0b11"}`))
	f.Add([]byte(`{"disposition":"granted","grant":{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":12}}`))
	f.Add([]byte(`{"disposition":"busy","grant":{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":12}}`))
	f.Add([]byte(`{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":12,"extra":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseGrant(data)
		if err != nil {
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("parseGrant(%q) accepted an invalid grant %+v: %v", data, g, err)
		}
		bare, _ := json.Marshal(g)
		wrapped, _ := json.Marshal(grantOutput{Disposition: coordinator.Granted, Grant: g})
		for _, raw := range [][]byte{bare, wrapped} {
			if back, err := parseGrant(raw); err != nil || back != g {
				t.Fatalf("parseGrant(%s) = %+v, %v; want %+v", raw, back, err, g)
			}
		}
	})
}

// FuzzTTL: a TTL the CLI accepts is a whole number of seconds, positive and
// at most the maximum, which is what etcd can grant.
func FuzzTTL(f *testing.F) {
	for _, s := range []string{"10s", "1s", "0s", "-5s", "1.5s", "10", "1h", "999999h", "1s500ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := time.ParseDuration(s)
		if err != nil || coordinator.CheckTTL(d) != nil {
			return
		}
		if d < time.Second || d%time.Second != 0 || d > coordinator.MaxTTL {
			t.Fatalf("ttl %q = %v accepted", s, d)
		}
	})
}
