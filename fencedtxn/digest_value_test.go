package fencedtxn_test

import (
	"testing"

	"github.com/leasegate/leasegate/fencedtxn"
)

// A stored operation record carries its intent's digest, and a retry is
// recognised by it: the digest of a given intent never changes.
func TestIntentDigestIsUnchanged(t *testing.T) {
	in := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op-1", Value: []byte("v"), ExpectedVersion: 3}
	const want = "53f5e6b667ca66ca56ab7f00725f9deed7e52c0dfeeff7c0f54476a6b90022b3"
	if got := fencedtxn.Digest(in); got != want {
		t.Fatalf("Digest(%+v) = %s, want %s (stored records would no longer match)", in, got, want)
	}
}
