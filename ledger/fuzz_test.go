package ledger

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// FuzzCanonical: the canonical form of parameters is a fixed point (the
// digest of canonical params is the digest of the params), and equal JSON
// written with other spacing or key order has the same digest.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"d":null,"c":"x"}]}`, ` { "a" : 1.50 } `, `"<&>"`, `1e3`, `[]`, `{"a":1}{"b":2}`, ``, `{"a":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := canonical(raw)
		if err != nil {
			return
		}
		again, err := canonical(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("canonical(%q) = %q, whose canonical form is %q (%v)", raw, c, again, err)
		}
		var v any
		if json.Unmarshal(c, &v) != nil {
			t.Fatalf("canonical form %q is not JSON", c)
		}
		d1, err1 := Digest(Effect{Kind: "k", Target: "t", Params: raw})
		d2, err2 := Digest(Effect{Kind: "k", Target: "t", Params: c})
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Fatalf("digests of %q and its canonical form differ: %s %v, %s %v", raw, d1, err1, d2, err2)
		}
	})
}

// FuzzDecodeRecord: any stored bytes decode to a record or an error, never
// a panic, and what decodes writes back to a form that decodes to itself.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{
		`{"tenant":"t","task":"k","operation":"op","state":"PROPOSED","effect":{"kind":"dns","target":"x","params":{"a":1}},"seq":1}`,
		`{"state":"DISPATCHING","epoch":7,"owner":"w","attempts":1,"dispatched_at":"2026-01-01T00:00:00Z","evidence":{"provider_ids":["c-1"]}}`,
		`{"state":"BOGUS"}`, `null`, `{"seq":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		rec, ok, err := decodeRecord([]*mvccpb.KeyValue{{Key: []byte("/p/effects/t/k/op"), Value: value, ModRevision: 9}})
		if err != nil {
			return
		}
		if !ok || rec.Revision != 9 {
			t.Fatalf("decoded %q: ok %v revision %d", value, ok, rec.Revision)
		}
		first, err := json.Marshal(rec)
		if err != nil {
			return // a value json cannot write back (an invalid RawMessage): the record is refused on write
		}
		back, _, err := decodeRecord([]*mvccpb.KeyValue{{Key: []byte("k"), Value: first, ModRevision: 9}})
		if err != nil {
			t.Fatalf("a written record does not decode: %q: %v", first, err)
		}
		second, _ := json.Marshal(back)
		if !bytes.Equal(first, second) {
			t.Fatalf("record does not survive a round trip:\n%s\n%s", first, second)
		}
	})
}
