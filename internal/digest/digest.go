// Package digest is leasegate's one canonical digest: SHA-256 over
// length-prefixed fields (each field's length as 8 bytes big-endian, then
// its bytes), hex-encoded. The length prefix makes the encoding injective,
// so two different field lists never share a digest. fencedtxn's payload
// digest and the ledger's effect and approval digests are all this
// function; their stored values must never change, so its bytes are fixed
// (digest_test.go pins known values).
package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Of is the hex SHA-256 of fields, each prefixed by its length.
func Of[T ~string | ~[]byte](fields ...T) string {
	h := sha256.New()
	for _, f := range fields {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}
