package fencedtxn_test

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestStoredDataThatCannotBeDecodedIsCorruptRecord: a state, operation or
// receipt record that does not decode (written outside leasegate) is
// corrupt_record — to Get as to Commit, the ledger's answer for the same
// case — and nothing is written: not a conflict, not the raw bytes.
func TestStoredDataThatCannotBeDecodedIsCorruptRecord(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 30*time.Second), "t", "k")
	k, prefix := c.Keys(), c.Keys().Prefix()
	put := func(key, value string) {
		t.Helper()
		if _, err := c.Client().Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}

	put(k.State("t", "k"), "not json")
	lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.CorruptRecord, func() error {
		_, err := fencedtxn.Get(ctx, c, "t", "k")
		return err
	})

	intent := func(op string) fencedtxn.Intent {
		return fencedtxn.Intent{Tenant: "t", Task: "k", Operation: op, Value: []byte("v"), ExpectedVersion: 1}
	}
	put(k.Op("t", "k", "op-1"), "not json")                                                                            // the operation record
	put(k.Op("t", "k", "op-2"), `{"payload_digest":"`+fencedtxn.Digest(intent("op-2"))+`","receipt":"not a receipt"}`) // its receipt
	for _, op := range []string{"op-1", "op-2"} {
		lgtest.RefusedWritingNothing(t, c.Client(), prefix, coordinator.CorruptRecord, func() error {
			_, err := fencedtxn.Commit(ctx, c, g, intent(op))
			return err
		})
	}
}
