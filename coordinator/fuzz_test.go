package coordinator

import (
	"encoding/json"
	"testing"

	"github.com/leasegate/leasegate/internal/store"
)

// The fuzz targets' seeds are in testdata/fuzz/<target>/ and in f.Add; plain
// `go test` runs them, `make fuzz` explores for FUZZTIME each.

var fuzzKeys = Keyspace{store.NewKeys("/lg")}

// FuzzTaskKeys: decoding inverts encoding, and no two distinct label tuples
// share a key of any kind.
func FuzzTaskKeys(f *testing.F) {
	f.Add("a/b", "c", "op", "a", "b/c", "op")
	f.Add("a%2Fb", "c", "x", "a/b", "c", "x")
	f.Add("t", "k", "o/p", "t", "k/o", "p")
	f.Add("%", "%25", "%%", "%25", "%", "%2F")
	f.Fuzz(func(t *testing.T, t1, k1, o1, t2, k2, o2 string) {
		if CheckTask(t1, k1) != nil || CheckTask(t2, k2) != nil ||
			CheckLabel("operation", o1) != nil || CheckLabel("operation", o2) != nil {
			return
		}
		for _, kind := range []Kind{KindFence, KindOwner, KindState} {
			key := taskKey(kind, t1, k1)
			gotKind, gotT, gotK, ok := fuzzKeys.ParseTask(key)
			if !ok || gotKind != kind || gotT != t1 || gotK != k1 {
				t.Fatalf("ParseTask(%q) = %q %q %q %v; want %s %q %q", key, gotKind, gotT, gotK, ok, kind, t1, k1)
			}
			if (t1 != t2 || k1 != k2) && key == taskKey(kind, t2, k2) {
				t.Fatalf("tasks %q/%q and %q/%q share key %q", t1, k1, t2, k2, key)
			}
		}
		op := fuzzKeys.Op(t1, k1, o1)
		gotT, gotK, gotO, ok := fuzzKeys.ParseOp(op)
		if !ok || gotT != t1 || gotK != k1 || gotO != o1 {
			t.Fatalf("ParseOp(%q) = %q %q %q %v", op, gotT, gotK, gotO, ok)
		}
		if (t1 != t2 || k1 != k2 || o1 != o2) && (op == fuzzKeys.Op(t2, k2, o2) || fuzzKeys.k.Effect(t1, k1, o1) == fuzzKeys.k.Effect(t2, k2, o2)) {
			t.Fatalf("operations %q/%q/%q and %q/%q/%q share a key", t1, k1, o1, t2, k2, o2)
		}
	})
}

func taskKey(kind Kind, tenant, task string) string {
	switch kind {
	case KindFence:
		return fuzzKeys.Fence(tenant, task)
	case KindOwner:
		return fuzzKeys.Owner(tenant, task)
	}
	return fuzzKeys.State(tenant, task)
}

// FuzzParseKey: a key that parses is exactly the key its parts encode to,
// so two keys never decode to one task (or operation).
func FuzzParseKey(f *testing.F) {
	f.Add("/lg/fence/a%2Fb/c")
	f.Add("/lg/owner/a/%41")
	f.Add("/lg/ops/t/k/o%2f")
	f.Add("/lg/state/%2/x")
	f.Fuzz(func(t *testing.T, key string) {
		if kind, tenant, task, ok := fuzzKeys.ParseTask(key); ok {
			if kind != KindFence && kind != KindOwner && kind != KindState {
				return // ParseTask names the kind; the caller checks it
			}
			if again := taskKey(kind, tenant, task); again != key {
				t.Fatalf("ParseTask(%q) = %s %q %q, which encode to %q", key, kind, tenant, task, again)
			}
		}
		if tenant, task, op, ok := fuzzKeys.ParseOp(key); ok {
			if again := fuzzKeys.Op(tenant, task, op); again != key {
				t.Fatalf("ParseOp(%q) = %q %q %q, which encode to %q", key, tenant, task, op, again)
			}
		}
	})
}

// FuzzLeaseID: what ParseLeaseID accepts is a positive ID, and it reads
// back what FormatLeaseID writes.
func FuzzLeaseID(f *testing.F) {
	for _, s := range []string{"694d7b1f3c2a0b11", "0x694d7b1f3c2a0b11", "7587883720139372801", "0", "-1", "ffffffffffffffff", " 12 ", "0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseLeaseID(s)
		if err != nil {
			return
		}
		if id <= 0 {
			t.Fatalf("ParseLeaseID(%q) = %d, not positive", s, id)
		}
		if back, err := ParseLeaseID(FormatLeaseID(id)); err != nil || back != id {
			t.Fatalf("ParseLeaseID(FormatLeaseID(%d)) = %d, %v", id, back, err)
		}
	})
}

// FuzzGrantJSON: a grant that parses and validates survives a JSON round
// trip unchanged (the lease as a hex string, or a number on input).
func FuzzGrantJSON(f *testing.F) {
	f.Add([]byte(`{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":"694d7b1f3c2a0b11"}`))
	f.Add([]byte(`{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":7587883720139372801}`))
	f.Add([]byte(`{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":"0x1"}`))
	f.Add([]byte(`{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":-1}`))
	f.Add([]byte(`{"realm":"r","tenant":"t","task":"k","owner":"o","epoch":5,"lease":1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var g Grant
		if json.Unmarshal(data, &g) != nil || g.Validate() != nil {
			return
		}
		raw, err := json.Marshal(g)
		if err != nil {
			t.Fatalf("marshal %+v: %v", g, err)
		}
		var back Grant
		if err := json.Unmarshal(raw, &back); err != nil || back != g {
			t.Fatalf("round trip of %s: %+v %v; want %+v", data, back, err, g)
		}
	})
}

// FuzzLabel: an accepted label is 1–80 bytes of printable ASCII 33–126, the
// only bytes the key encoding and the CLI's flags are built for.
func FuzzLabel(f *testing.F) {
	for _, s := range []string{"worker-1", "a/b%c", "", " x", "x\x7f", "é", string(make([]byte, 81))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckLabel("task", s) != nil {
			return
		}
		if len(s) < 1 || len(s) > MaxLabelLen {
			t.Fatalf("label of %d bytes accepted", len(s))
		}
		for i := 0; i < len(s); i++ {
			if s[i] < 33 || s[i] > 126 {
				t.Fatalf("label %q with byte 0x%02x accepted", s, s[i])
			}
		}
	})
}
