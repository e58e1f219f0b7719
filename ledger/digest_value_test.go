package ledger_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasegate/leasegate/ledger"
)

// Records store the effect's and the approval's digests and compare them
// on every later call: the digest of a given effect or approval never
// changes.
func TestStoredDigestsAreUnchanged(t *testing.T) {
	e := ledger.Effect{Kind: "dns", Target: "db.example", Params: json.RawMessage(`{"b":1,"a":"x"}`), Policy: "p1"}
	d, err := ledger.Digest(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := "b8f55c274a41090ed76e6d51b2e6eb49899a7ac91b82c5941903d675643d831d"; d != want {
		t.Errorf("Digest(%+v) = %s, want %s", e, d, want)
	}
	a := ledger.Approval{Approver: "alice", ParamsDigest: "pd", PreconditionDigest: "qd", Policy: "p1",
		At: time.Date(2026, 12, 1, 23, 0, 0, 5, time.UTC), Note: "n"}
	if got, want := a.Digest(), "6b6160b997f56b0d28553804ff70b5d8861601bb58021b5a9fc3fb88a1027150"; got != want {
		t.Errorf("Approval.Digest() = %s, want %s", got, want)
	}
}
