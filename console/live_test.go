package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// liveEvent is one event of the live stream, as the page's script reads it.
type liveEvent struct {
	Type   string `json:"type"`
	Tenant string `json:"tenant"`
	Task   string `json:"task"`
	Owner  string `json:"owner"`
	Epoch  int64  `json:"epoch"`
	Error  string `json:"error"`
}

// stream is an open /console/live of one identity: its events, in order.
type stream struct {
	caller string
	events chan liveEvent
	ended  chan error
}

// openLive opens caller's live stream, as the Now page does, and waits
// until it says it is synced (every watch of the identity established).
func (w *world) openLive(t *testing.T, caller string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxOf(t))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url+"/console/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.httpAs(caller).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{caller: caller, events: make(chan liveEvent, 100), ended: make(chan error, 1)}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s's live stream: HTTP %d %s", caller, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev liveEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				s.ended <- err
				return
			}
			select {
			case s.events <- ev:
			case <-ctx.Done():
				return
			}
		}
		s.ended <- sc.Err()
	}()
	s.until(t, "the stream synced", func(ev liveEvent) bool { return ev.Type == "synced" })
	return s
}

// until reads s's events until one matches, and answers those before it.
// An error event fails the test: the identity's own watch was refused.
func (s *stream) until(t *testing.T, what string, match func(liveEvent) bool) []liveEvent {
	t.Helper()
	var seen []liveEvent
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		select {
		case ev := <-s.events:
			if ev.Type == "error" {
				t.Fatalf("%s's live stream: error event %+v (after %+v)", s.caller, ev, seen)
			}
			if match(ev) {
				return seen
			}
			seen = append(seen, ev)
		case err := <-s.ended:
			t.Fatalf("%s's live stream ended waiting for %s: %v (after %+v)", s.caller, what, err, seen)
		case <-deadline.C:
			t.Fatalf("%s's live stream: no %s within a minute (after %+v)", s.caller, what, seen)
		}
	}
}

// The live stream of an identity of tenant-a carries tenant-a's changes
// and nothing of tenant-ab's (a tenant whose name begins with tenant-a's):
// a claim in tenant-ab made before one in tenant-a, while the stream is
// open, never reaches it. An approver of both tenants sees both claims.
func TestLiveStreamCarriesOnlyTheIdentitysTenants(t *testing.T) {
	w := newWorld(t)
	ctx := ctxOf(t)
	worker := w.openLive(t, "worker")
	both := w.openLive(t, "approver-ab")

	g, err := w.session(w.client("worker-ab")).Claim(ctx, tenantAB, "db")
	if err != nil {
		t.Fatal(err)
	}
	ga, err := w.session(w.client("worker")).Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	claimOf := func(g struct{ tenant, owner string }) func(liveEvent) bool {
		return func(ev liveEvent) bool {
			return ev.Type == "claimed" && ev.Tenant == g.tenant && ev.Task == "db" && ev.Owner == g.owner
		}
	}
	a, ab := struct{ tenant, owner string }{tenant, ga.Owner}, struct{ tenant, owner string }{tenantAB, g.Owner}
	// One watch, in revision order: tenant-ab's claim, were it carried,
	// would come before tenant-a's.
	if before := worker.until(t, "tenant-a's claim", claimOf(a)); len(before) > 0 {
		t.Errorf("the tenant-a worker's live stream carried, before tenant-a's claim: %+v", before)
	}
	// Two watches, one per tenant: either claim may come first.
	seen := map[string]bool{}
	both.until(t, "both tenants' claims", func(ev liveEvent) bool {
		for _, want := range []struct{ tenant, owner string }{a, ab} {
			seen[want.tenant] = seen[want.tenant] || claimOf(want)(ev)
		}
		return seen[tenant] && seen[tenantAB]
	})
}
