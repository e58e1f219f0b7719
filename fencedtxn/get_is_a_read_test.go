package fencedtxn_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestGetWithItsAnswerLostIsAHold: Get only reads, so a Get that reached
// etcd and lost its answer is authority_unavailable, never
// outcome_unknown (pinned for indep/get/not-read-only).
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
