package fencedtxn_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestConcurrentCommitsKeepTheirOwnCompares: commits under one grant run
// at once — a new operation at the current version beside a retry of an
// operation already committed — each carry their own compares: the retry
// is always historical_retry, never applied a second time over the new
// one's state (pinned for indep/guardcache/shared-slice, where the cached
// compares were shared and one commit's appends overwrote the other's).
func TestConcurrentCommitsKeepTheirOwnCompares(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 30*time.Second), "t", "concurrent")
	old := fencedtxn.Intent{Tenant: "t", Task: "concurrent", Operation: "old", Value: []byte("old"), ExpectedVersion: 0}
	if _, err := fencedtxn.Commit(ctx, c, g, old); err != nil {
		t.Fatal(err)
	}
	const rounds, retries = 300, 3
	for v := int64(1); v <= rounds; v++ {
		var wg sync.WaitGroup
		var newErr error
		retry := make([]fencedtxn.Receipt, retries)
		retryErr := make([]error, retries)
		wg.Add(1 + retries)
		go func() {
			defer wg.Done()
			_, newErr = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "concurrent",
				Operation: fmt.Sprintf("new-%d", v), Value: []byte("new"), ExpectedVersion: v})
		}()
		for i := range retries {
			go func() {
				defer wg.Done()
				retry[i], retryErr[i] = fencedtxn.Commit(ctx, c, g, old)
			}()
		}
		wg.Wait()
		if newErr != nil {
			t.Fatalf("round %d: the new operation: %v", v, newErr)
		}
		for i := range retries {
			if retryErr[i] != nil || retry[i].Disposition != coordinator.HistoricalRetry {
				t.Fatalf("round %d: a retry of a committed operation: %+v %v; want historical_retry", v, retry[i], retryErr[i])
			}
		}
	}
	if st, err := fencedtxn.Get(ctx, c, "t", "concurrent"); err != nil || st.Version != rounds+1 || string(st.Value) != "new" {
		t.Fatalf("state after the rounds: %+v %v; want version rounds+1 of a new operation", st, err)
	}
}
