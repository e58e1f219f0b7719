package fencedtxn_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestGetState(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "k")

	st, err := fencedtxn.Get(ctx, c, "t", "k")
	lgtest.Holds(t, fmt.Sprintf("never committed: %+v %v", st, err), lgtest.Is("no error", err == nil),
		lgtest.Is("not committed", !st.Committed()), lgtest.Is("version 0", st.Version == 0),
		lgtest.Is("no value", st.Value == nil), lgtest.Is("revision 0", st.Revision == 0))
	value := []byte{0, 0xff, '\n', 'x'} // not UTF-8: must come back byte for byte
	var last fencedtxn.Receipt
	for i, op := range []string{"first", "second"} {
		in := fencedtxn.Intent{Tenant: "t", Task: "k", Operation: op, Value: append([]byte(op), value...), ExpectedVersion: int64(i)}
		if last, err = fencedtxn.Commit(ctx, c, g, in); err != nil {
			t.Fatal(err)
		}
	}
	st, err = fencedtxn.Get(ctx, c, "t", "k")
	if err != nil || !st.Committed() || st.Version != 2 || !bytes.Equal(st.Value, append([]byte("second"), value...)) ||
		st.Operation != "second" || st.Epoch != g.Epoch || st.Revision != last.Revision || st.Tenant != "t" || st.Task != "k" {
		t.Fatalf("state %+v %v; want version 2 of operation second at revision %d", st, err, last.Revision)
	}
	_, err = fencedtxn.Get(ctx, c, "t", "")
	lgtest.Want(t, err, coordinator.InvalidInput)
	_, err = fencedtxn.Get(ctx, nil, "t", "k")
	lgtest.Want(t, err, coordinator.InvalidInput)
}

// TestGetWithItsAnswerLostIsAHold: Get only reads, so a Get that reached
// etcd and lost its answer is authority_unavailable, never
// outcome_unknown.
func TestGetWithItsAnswerLostIsAHold(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	c := lgtest.CoordinatorOf(t, cp.Client(t))
	ctx := lgtest.Ctx(t)
	if _, err := fencedtxn.Get(ctx, c, "t", "k"); err != nil { // the connection is up
		t.Fatal(err)
	}
	cp.DropAnswers() // the request arrives, its answer never comes back
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := fencedtxn.Get(rctx, c, "t", "k")
	lgtest.Want(t, err, coordinator.AuthorityUnavailable)
}
