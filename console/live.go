package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
)

// liveBeat is how often the live stream sends a comment when nothing
// changes, so that a proxy between browser and gateway keeps it open. It
// touches no etcd: the stream's changes come from the watch alone.
const liveBeat = 20 * time.Second

// liveRetry is how long the browser waits before it opens the live stream
// again after the stream ended because none of its watches runs any more
// (refused — the identity holds its limit of watch streams — or ended by
// the API): the stream does not stay open carrying nothing, and the page
// tries again at this pace, never in a tight loop.
const liveRetry = 15 * time.Second

// liveEvent is one change of the live task list, as the page's script
// reads it.
type liveEvent struct {
	Type     string `json:"type"` // owned, claimed, vacated; synced once every watch is established
	Tenant   string `json:"tenant,omitempty"`
	Task     string `json:"task,omitempty"`
	Owner    string `json:"owner,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
	Lease    string `json:"lease,omitempty"`
	TTLLeft  int64  `json:"ttl_left_seconds"`
	Stale    bool   `json:"stale,omitempty"`
	Fence    int64  `json:"fence_epoch,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	Error    string `json:"error,omitempty"`
}

// live streams the caller's ownership changes as server-sent events: one
// API watch (WatchOwnership) per tenant scope of the caller, for as long
// as the page is open. A claimed task's time left is read once, when the
// claim is seen (the watch carries no TTL); nothing is polled.
func (c *Console) live(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.whoIs(w, r)
	if !ok {
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	ss := scopes(cl.id)
	events := make(chan liveEvent, 64)
	synced := make(chan struct{}, len(ss))
	// The request ends after its watches, which end with it (however it
	// ends: the browser gone, a write failed, no watch left): their calls
	// end before it does.
	var watches sync.WaitGroup
	defer watches.Wait()
	ctx, cancel := context.WithCancel(cl.ctx)
	defer cancel()
	cl.ctx = ctx
	for _, s := range ss {
		watches.Add(1)
		go func() {
			defer watches.Done()
			err := cl.api.Watch(cl.ctx, s, func(ev coordinator.OwnershipEvent) error {
				le := liveOf(ev)
				if ev.Type == coordinator.EventClaimed {
					if o, err := cl.api.Owner(cl.ctx, ev.Ownership.Tenant, ev.Ownership.Task); err == nil && o.Owned() && o.Epoch == ev.Ownership.Epoch {
						le.TTLLeft = o.TTLLeft
					}
				}
				select {
				case events <- le:
					return nil
				case <-cl.ctx.Done():
					return cl.ctx.Err()
				}
			}, client.WithSynced(func() { synced <- struct{}{} }))
			if cl.ctx.Err() == nil {
				if err == nil {
					err = errors.New("the watch ended")
				}
				c.lg.Info("console live watch ended", zap.String("identity", cl.id.ID), zap.String("tenant", s), zap.Error(err))
				select {
				case events <- liveEvent{Type: "error", Tenant: s, Error: refusalOf(err).Detail}:
				case <-cl.ctx.Done():
				}
			}
		}()
	}
	beat := time.NewTicker(liveBeat)
	defer beat.Stop()
	waiting, running := len(ss), len(ss)
	for {
		var le liveEvent
		select {
		case <-cl.ctx.Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": beat\n\n"); err != nil {
				return
			}
			fl.Flush()
			continue
		case <-synced:
			if waiting--; waiting > 0 {
				continue
			}
			le = liveEvent{Type: "synced", TTLLeft: -1}
		case le = <-events:
			if le.Type == "error" {
				running--
			}
		}
		b, _ := json.Marshal(le)
		retry := ""
		if running == 0 {
			retry = fmt.Sprintf("retry: %d\n", liveRetry.Milliseconds())
		}
		if _, err := fmt.Fprintf(w, "%sdata: %s\n\n", retry, b); err != nil {
			return
		}
		fl.Flush()
		if running == 0 {
			return // no watch left: end the stream, the browser opens it again after liveRetry
		}
	}
}

func liveOf(ev coordinator.OwnershipEvent) liveEvent {
	o := ev.Ownership
	le := liveEvent{Type: string(ev.Type), Tenant: o.Tenant, Task: o.Task, Owner: o.Owner, Epoch: o.Epoch, TTLLeft: o.TTLLeft,
		Stale: o.Stale, Fence: o.Fence, Revision: o.Revision}
	if o.Lease != 0 {
		le.Lease = coordinator.FormatLeaseID(o.Lease)
	}
	return le
}
