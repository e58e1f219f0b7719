package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// WatchOwnership with mark_synced sends its marker once the watch is
// established, before anything else: a claim made at once after the
// marker is streamed (what run through the gateway relies on not to miss
// the loss of a grant it has just claimed).
func TestWatchMarksSynced(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	wa := w.client(r, "worker-a")
	s := w.session(wa, 10*time.Second)
	owned := claim(t, s, tenant, "before")
	ctx, cancel := context.WithTimeout(lgtest.Ctx(t), 10*time.Second)
	defer cancel()
	var seen []coordinator.OwnershipEvent
	var after coordinator.Grant // claimed when the marker comes, in the watch's goroutine
	err := wa.Watch(ctx, tenant, func(ev coordinator.OwnershipEvent) error {
		if after.Epoch == 0 {
			t.Errorf("an event before the marker: %+v", ev)
		}
		seen = append(seen, ev)
		if ev.Type == coordinator.EventClaimed && ev.Ownership.Task == "after" && ev.Ownership.Epoch == after.Epoch {
			cancel()
		}
		return nil
	}, client.WithSynced(func() {
		var err error
		if after, err = s.Claim(lgtest.Ctx(t), tenant, "after"); err != nil {
			t.Errorf("Claim: %v", err)
		}
	}))
	if err != nil || ctx.Err() != context.Canceled {
		t.Fatalf("watch: %v, %v; events %+v", err, ctx.Err(), seen)
	}
	if len(seen) != 2 || seen[0].Type != coordinator.EventOwned || seen[0].Ownership.Epoch != owned.Epoch {
		t.Fatalf("events %+v: want the current owner, then the claim made after the marker", seen)
	}
}
