package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestEvidenceAndParamsAreCheckedBeforeAnyIO: evidence must show
// something — an empty provider id, a whitespace or placeholder detail is
// none — so a
// Resolve to CONFIRMED or FAILED with either is invalid_input; params that
// hold two JSON values are not one set of parameters. Each is refused
// before any I/O, nothing written.
func TestEvidenceAndParamsAreCheckedBeforeAnyIO(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.authorized(e.g, "op", promote("db-b"))
	twoValues := promote("db-c")
	twoValues.Params = json.RawMessage(`{"cluster":"db-c"} {"max_loss_s":500}`)
	for name, f := range map[string]func() error{
		"resolve confirmed, an empty provider id": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, Evidence{ProviderIDs: []string{""}}, "darius", "checked")
			return err
		},
		"resolve confirmed, whitespace detail": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, Evidence{Detail: json.RawMessage(" \n ")}, "darius", "checked")
			return err
		},
		"resolve confirmed, detail null": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, Evidence{Detail: json.RawMessage("null")}, "darius", "checked")
			return err
		},
		"resolve confirmed, detail {}": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Confirmed, Evidence{Detail: json.RawMessage(" { } ")}, "darius", "checked")
			return err
		},
		"resolve failed, detail []": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Failed, Evidence{Detail: json.RawMessage("[]")}, "darius", "checked")
			return err
		},
		"resolve failed, detail \"\"": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Failed, Evidence{Detail: json.RawMessage(`""`)}, "darius", "checked")
			return err
		},
		"resolve failed, no evidence": func() error {
			_, err := e.l.Resolve(e.ctx, e.g, "op", Failed, Evidence{}, "darius", "checked")
			return err
		},
		"propose params of two JSON values": func() error {
			_, err := e.l.Propose(e.ctx, e.g, "op2", twoValues, Observation{Digest: "world-1", At: time.Now()})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, e.c.Client(), e.c.Keys().Prefix(), coordinator.InvalidInput, f)
		})
	}
}

// Records store the effect's and the approval's digests and compare them
// on every later call: the digest of a given effect or approval never
// changes.
func TestStoredDigestsAreUnchanged(t *testing.T) {
	e := Effect{Kind: "dns", Target: "db.example", Params: json.RawMessage(`{"b":1,"a":"x"}`), Policy: "p1"}
	d, err := Digest(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := "b8f55c274a41090ed76e6d51b2e6eb49899a7ac91b82c5941903d675643d831d"; d != want {
		t.Errorf("Digest(%+v) = %s, want %s", e, d, want)
	}
	a := Approval{Approver: "alice", ParamsDigest: "pd", PreconditionDigest: "qd", Policy: "p1",
		At: time.Date(2026, 12, 1, 23, 0, 0, 5, time.UTC), Note: "n"}
	if got, want := a.Digest(), "6b6160b997f56b0d28553804ff70b5d8861601bb58021b5a9fc3fb88a1027150"; got != want {
		t.Errorf("Approval.Digest() = %s, want %s", got, want)
	}
}

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

// TestDigestVectors checks the effect digest against the test vectors a
// client in any language checks its own implementation against
// (api/leasegate/v1/testdata/digest_vectors.json; docs/ledger.md, "The
// effect digest"): the canonical parameters, the bytes hashed, and the
// digest of each. A change to the canonical form or the byte layout — the
// length prefix's width or byte order, the field order, the tag — turns
// it red, as it would break every stored record.
func TestDigestVectors(t *testing.T) {
	b, err := os.ReadFile("../api/leasegate/v1/testdata/digest_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Name            string `json:"name"`
			Kind            string `json:"kind"`
			Target          string `json:"target"`
			ParamsJSON      string `json:"params_json"`
			Policy          string `json:"policy"`
			CanonicalParams string `json:"canonical_params"`
			PreimageHex     string `json:"preimage_hex"`
			Digest          string `json:"digest"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 10 {
		t.Fatalf("%d vectors; the file lost some", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			e := Effect{Kind: v.Kind, Target: v.Target, Params: json.RawMessage(v.ParamsJSON), Policy: v.Policy}
			can, err := CanonicalParams(e.Params)
			if err != nil {
				t.Fatal(err)
			}
			if string(can) != v.CanonicalParams {
				t.Errorf("canonical params %s, the vector says %s", can, v.CanonicalParams)
			}
			pre, err := hex.DecodeString(v.PreimageHex)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(pre); hex.EncodeToString(sum[:]) != v.Digest {
				t.Errorf("the vector's preimage hashes to %x, its digest is %s", sum, v.Digest)
			}
			d, err := Digest(e)
			if err != nil {
				t.Fatal(err)
			}
			if d != v.Digest {
				t.Errorf("Digest = %s, the vector says %s", d, v.Digest)
			}
			// The canonical form is a fixed point: a client may digest the
			// params a record carries as they are.
			e.Params = can
			if d2, _ := Digest(e); d2 != v.Digest {
				t.Errorf("Digest of the canonical params = %s, want %s", d2, v.Digest)
			}
		})
	}
}

// placeholders are details that say nothing: absent, whitespace, or a
// placeholder JSON value.
var placeholders = []string{"null", "{}", `""`, "[]", " { } ", `"  "`, "\n[ ]\n"}

// TestEvidenceThatSaysNothingIsEmpty: no provider id and a placeholder
// detail is no evidence; any id, or a detail with content (a number, a
// boolean, a key even with a null value, a string), is some.
func TestEvidenceThatSaysNothingIsEmpty(t *testing.T) {
	for _, d := range append([]string{"", " \t"}, placeholders...) {
		if ev := (Evidence{Detail: json.RawMessage(d)}); !ev.Empty() {
			t.Errorf("detail %q counts as evidence", d)
		}
		if ev := (Evidence{ProviderIDs: []string{"req-1"}, Detail: json.RawMessage(d)}); ev.Empty() {
			t.Errorf("a provider id with detail %q is no evidence", d)
		}
	}
	for _, d := range []string{"0", "false", `{"applied":null}`, `["x"]`, `"req-1"`, `{"a":{}}`, "nul"} {
		if ev := (Evidence{Detail: json.RawMessage(d)}); ev.Empty() {
			t.Errorf("detail %q is no evidence", d)
		}
	}
}
