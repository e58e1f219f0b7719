package fencedtxn_test

import (
	"bytes"
	"testing"

	"github.com/leasegate/leasegate/fencedtxn"
)

// FuzzDigest: two intents share a digest exactly when they are the same
// intent (a field's bytes moved into its neighbour make another digest).
func FuzzDigest(f *testing.F) {
	f.Add("t", "k", "op", []byte("v"), int64(1), "tk", "", "op", []byte("v"), int64(1))
	f.Add("t", "k", "o", []byte("pv"), int64(0), "t", "k", "op", []byte("v"), int64(0))
	f.Add("t", "k", "op", []byte("v\x00"), int64(1), "t", "k", "op", []byte("v"), int64(1))
	f.Add("t", "k", "op", []byte{}, int64(-1), "t", "k", "op", []byte(nil), int64(-1))
	f.Fuzz(func(t *testing.T, t1, k1, o1 string, v1 []byte, e1 int64, t2, k2, o2 string, v2 []byte, e2 int64) {
		a := fencedtxn.Intent{Tenant: t1, Task: k1, Operation: o1, Value: v1, ExpectedVersion: e1}
		b := fencedtxn.Intent{Tenant: t2, Task: k2, Operation: o2, Value: v2, ExpectedVersion: e2}
		same := t1 == t2 && k1 == k2 && o1 == o2 && bytes.Equal(v1, v2) && e1 == e2
		if (fencedtxn.Digest(a) == fencedtxn.Digest(b)) != same {
			t.Fatalf("intents %+v and %+v: same %v, digests %s %s", a, b, same, fencedtxn.Digest(a), fencedtxn.Digest(b))
		}
	})
}
