package fencedtxn

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// The hand-written encodings must be byte for byte encoding/json's: stored
// records are decoded with encoding/json, and a receipt comes back as
// stored.
func checkEncodings(t *testing.T, label string, value []byte, n int64) {
	t.Helper()
	r := Receipt{Disposition: coordinator.Committed, Tenant: label, Task: label + "x", Operation: "op" + label,
		CommittedVersion: n, Epoch: n * 7, Revision: -n}
	stored, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(store.OpRecord{PayloadDigest: label, Receipt: stored, Epoch: n, Owner: label})
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeOpRecord(label, r, n, label); !bytes.Equal(got, want) {
		t.Fatalf("op record of %q:\n got %s\nwant %s", label, got, want)
	}
	st := store.StateRecord{Version: n, Value: value, Operation: label, Epoch: -n}
	if want, _ = json.Marshal(st); !bytes.Equal(encodeState(st), want) {
		t.Fatalf("state of %q %q:\n got %s\nwant %s", label, value, encodeState(st), want)
	}
}

func TestEncodingsAreEncodingJSONs(t *testing.T) {
	var every []byte
	for c := byte(33); c <= 126; c++ {
		every = append(every, c)
		checkEncodings(t, string([]byte{c}), []byte{c}, int64(c))
		checkEncodings(t, "a"+string([]byte{c, c})+"z", nil, -int64(c))
	}
	checkEncodings(t, string(every), every, 1<<62)
	checkEncodings(t, "", []byte{}, 0)
	checkEncodings(t, "tab\there\x00é\u2028", []byte{0, 255}, 9) // not labels: encoding/json's own path
}

func FuzzEncodings(f *testing.F) {
	f.Add("tenant-a", []byte("value"), int64(3))
	f.Add(`<&>"\`, []byte{}, int64(-1))
	f.Fuzz(func(t *testing.T, label string, value []byte, n int64) {
		checkEncodings(t, label, value, n)
	})
}
