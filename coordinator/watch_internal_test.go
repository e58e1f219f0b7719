package coordinator

import (
	"context"
	"testing"

	"go.uber.org/zap"
)

// TestWatchNeverReportsAnOlderEvent pins the watch's last line of defence:
// whatever etcd or a listing hands it, an event not newer than the last
// one reported for its task (a lower epoch, an earlier or the same
// revision) is not reported; a listing's vacating of one epoch and owner of
// a later one, at one revision, both are.
func TestWatchNeverReportsAnOlderEvent(t *testing.T) {
	out := make(chan OwnershipEvent, 16)
	w := &ownershipWatch{c: &Coordinator{lg: zap.NewNop()}, ctx: context.Background(), out: out, last: map[string]OwnershipEvent{}}
	ev := func(typ EventType, rev, epoch int64) OwnershipEvent {
		return OwnershipEvent{Type: typ, Ownership: Ownership{Task: "k", Revision: rev, Epoch: epoch}}
	}
	for _, tc := range []struct {
		ev   OwnershipEvent
		want bool
	}{
		{ev(EventClaimed, 10, 10), true},
		{ev(EventClaimed, 10, 10), false}, // the same again
		{ev(EventVacated, 12, 10), true},
		{ev(EventClaimed, 5, 5), false},   // replayed history
		{ev(EventClaimed, 11, 11), false}, // between two reported ones
		{ev(EventVacated, 20, 10), true},  // a listing's, at its revision
		{ev(EventOwned, 20, 10), false},   // the owner just vacated, at the same revision
		{ev(EventOwned, 20, 15), true},    // the later owner the listing found, at the same revision
		{ev(EventOwned, 20, 15), false},   // the same again
		{ev(EventVacated, 30, 9), false},  // a lower epoch
	} {
		if !w.send("k", tc.ev) {
			t.Fatal("send: context done")
		}
		select {
		case got := <-out:
			if !tc.want {
				t.Fatalf("reported %s rev %d epoch %d after %+v", got.Type, got.Ownership.Revision, got.Ownership.Epoch, w.last["k"])
			}
		default:
			if tc.want {
				t.Fatalf("dropped %s rev %d epoch %d", tc.ev.Type, tc.ev.Ownership.Revision, tc.ev.Ownership.Epoch)
			}
		}
	}
}
