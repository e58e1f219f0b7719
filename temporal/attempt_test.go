package temporal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	lgtemporal "github.com/leasegate/leasegate/temporal"
	"github.com/leasegate/leasegate/temporal/incident"
)

func world(t *testing.T) (*incident.World, func(identity string) *client.Client) {
	t.Helper()
	w, err := incident.StartWorld(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, func(identity string) *client.Client {
		c, err := w.Client(identity)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
}

// Heartbeat is the lease's only renewal: an attempt that heartbeats keeps
// the task (the next attempt stays busy), one that stops loses it at its
// TTL, and the next attempt claims with a newer epoch, after which the
// older attempt's effects are refused with stale_owner.
func TestAnAttemptHoldsTheTaskExactlyWhileItHeartbeats(t *testing.T) {
	_, clientOf := world(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl, poll = time.Second, 50 * time.Millisecond
	a, err := lgtemporal.Begin(ctx, clientOf("worker-a"), incident.Tenant, "recovery-1", ttl, poll)
	if err != nil {
		t.Fatal(err)
	}

	// A heartbeats for 3 TTLs: B stays busy all along.
	stop := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				_ = a.Heartbeat(ctx)
			}
		}
	}()
	bctx, bcancel := context.WithTimeout(ctx, 3*ttl)
	_, err = lgtemporal.Begin(bctx, clientOf("worker-b"), incident.Tenant, "recovery-1", ttl, poll)
	bcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B while A heartbeat: %v; want B still waiting (busy) when its context ended", err)
	}
	close(stop)
	<-beating

	// A stops heartbeating (its process runs on): B acquires.
	start := time.Now()
	b, err := lgtemporal.Begin(ctx, clientOf("worker-b"), incident.Tenant, "recovery-1", ttl, poll)
	if err != nil {
		t.Fatalf("B after A stopped heartbeating: %v", err)
	}
	if b.Grant().Epoch <= a.Grant().Epoch {
		t.Fatalf("B's epoch %d is not newer than A's %d", b.Grant().Epoch, a.Grant().Epoch)
	}
	t.Logf("B acquired %v after A's last heartbeat (TTL %v)", time.Since(start).Round(time.Millisecond), ttl)
	if err := a.End(ctx); coordinator.DispositionOf(err) != coordinator.StaleOwner && coordinator.DispositionOf(err) != coordinator.ExpiredOwner {
		t.Fatalf("A's release after B claimed: %v; want stale_owner or expired_owner", err)
	}
	e := ledger.Effect{Kind: devprovider.KindPromote, Target: "db-2", Params: []byte(`{"target":"db-2"}`), Policy: "v1"}
	if _, err := a.Client().Propose(ctx, a.Grant(), "recovery-1/promote", e, ledger.Observation{Digest: devprovider.Digest("db-1"), At: time.Now()}); coordinator.DispositionOf(err) != coordinator.StaleOwner {
		t.Fatalf("A's proposal after B claimed: %v; want stale_owner", err)
	}
	if err := b.End(ctx); err != nil {
		t.Fatalf("B's release: %v", err)
	}
}
