package fencedtxn

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/leasegate/leasegate/internal/store"
)

// The records a commit stores, encoded without reflection. The bytes are
// exactly encoding/json's (encode_test.go compares them on every printable
// label and fuzzes the rest): other readers decode them with
// encoding/json, and a stored receipt is returned as is on a retry.

// appendString appends s as encoding/json encodes a string. Labels are
// printable ASCII (checked before any encoding); anything else goes
// through encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch s[i] {
		case '"':
			esc = `\"`
		case '\\':
			esc = `\\`
		case '<':
			esc = `\u003c`
		case '>':
			esc = `\u003e`
		case '&':
			esc = `\u0026`
		default:
			continue
		}
		b = append(append(b, s[start:i]...), esc...)
		start = i + 1
	}
	return append(append(b, s[start:]...), '"')
}

func appendInt(b []byte, key string, n int64) []byte {
	return strconv.AppendInt(append(b, key...), n, 10)
}

// appendReceipt appends r as encoding/json encodes a Receipt.
func appendReceipt(b []byte, r Receipt) []byte {
	b = appendString(append(b, `{"disposition":`...), string(r.Disposition))
	b = appendString(append(b, `,"tenant":`...), r.Tenant)
	b = appendString(append(b, `,"task":`...), r.Task)
	b = appendString(append(b, `,"operation":`...), r.Operation)
	b = appendInt(b, `,"committed_version":`, r.CommittedVersion)
	b = appendInt(b, `,"epoch":`, r.Epoch)
	b = appendInt(b, `,"revision":`, r.Revision)
	return append(b, '}')
}

// encodeOpRecord is encoding/json's encoding of the operation record that
// carries receipt r.
func encodeOpRecord(digest string, r Receipt, epoch int64, owner string) []byte {
	b := make([]byte, 0, 256)
	b = appendString(append(b, `{"payload_digest":`...), digest)
	b = appendReceipt(append(b, `,"receipt":`...), r)
	b = appendInt(b, `,"epoch":`, epoch)
	b = appendString(append(b, `,"owner":`...), owner)
	return append(b, '}')
}

// encodeState is encoding/json's encoding of a store.StateRecord.
func encodeState(st store.StateRecord) []byte {
	b := make([]byte, 0, 96+base64.StdEncoding.EncodedLen(len(st.Value)))
	b = appendInt(b, `{"version":`, st.Version)
	if st.Value == nil {
		b = append(b, `,"value":null`...)
	} else {
		b = append(b, `,"value":"`...)
		b = base64.StdEncoding.AppendEncode(b, st.Value)
		b = append(b, '"')
	}
	b = appendString(append(b, `,"operation":`...), st.Operation)
	b = appendInt(b, `,"epoch":`, st.Epoch)
	return append(b, '}')
}
