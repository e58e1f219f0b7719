package digest_test

import (
	"testing"

	"github.com/leasegate/leasegate/internal/digest"
)

// The fields are length-prefixed: moving a byte from one field to the next
// changes the digest, and the string and byte forms agree.
func TestFieldsAreLengthPrefixed(t *testing.T) {
	if digest.Of("ab", "c") == digest.Of("a", "bc") {
		t.Fatal(`Of("ab", "c") == Of("a", "bc"): the fields are not length-prefixed`)
	}
	if s, b := digest.Of("ab", "c"), digest.Of([]byte("ab"), []byte("c")); s != b {
		t.Fatalf("string form %s, byte form %s", s, b)
	}
}

// A known value: the digest of stored records must never change.
func TestKnownValue(t *testing.T) {
	// sha256(00 00 00 00 00 00 00 01 'a' 00 00 00 00 00 00 00 00), computed
	// with Python's hashlib, independently of this package.
	const want = "6aa98e17c109dd8e2ae23a478ceb48e193c730289ba48d741388a3cc8b38ef4f"
	if got := digest.Of("a", ""); got != want {
		t.Fatalf(`Of("a", "") = %s, want %s`, got, want)
	}
}
