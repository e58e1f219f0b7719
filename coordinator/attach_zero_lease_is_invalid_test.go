package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
)

// Attach of lease 0 (etcd's NoLease, which no grant returns) is
// invalid_input, as a negative lease is: a session over it would put owner
// keys with no lease at all, so they would never expire.
func TestAttachZeroLeaseIsInvalid(t *testing.T) {
	cl := embedtest.NewCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := coordinator.New(ctx, cl.Client(t), coordinator.WithPrefix("/attachzero"))
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range []int64{0, -1} {
		s, err := c.Attach("worker", lease, 10*time.Second, time.Now().Add(5*time.Second))
		if d := coordinator.DispositionOf(err); d != coordinator.InvalidInput || s != nil {
			t.Errorf("Attach(lease %d): session %t, err %v (%s), want no session, invalid_input", lease, s != nil, err, d)
		}
	}
	// And a positive lease is accepted: the refusal is of the value, not of Attach.
	if _, err := c.Attach("worker", 1, 10*time.Second, time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("Attach(lease 1): %v", err)
	}
}
