package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasegate/leasegate/console"
)

// consoleViewer is the identity whose console page a run with
// Config.Console holds open: a reader of the bench's tenant.
const consoleViewer = "console-viewer"

// ConsoleLive is the console page a run held open: its load, and what its
// live stream received while the run went on.
type ConsoleLive struct {
	PageMs int64 `json:"page_ms"` // the Now page's load, as the viewer's browser would fetch it
	// Events are the live stream's messages (the synced marker and every
	// ownership change of the tenant) received until the run ended.
	Events int64 `json:"events"`
	events atomic.Int64
}

// openConsole loads the console's Now page as consoleViewer and opens its
// live stream (server-sent events, the gateway's ownership watch), read
// until stop. It returns once the stream has said it is live (synced).
func (h *hop) openConsole(ctx context.Context) (*ConsoleLive, func(), error) {
	tlsCfg, err := h.tlsOf(consoleViewer)
	if err != nil {
		return nil, nil, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}}
	live := &ConsoleLive{}
	start := time.Now()
	resp, err := hc.Get(h.url + console.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: console page: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("bench: console page: %s", resp.Status)
	}
	live.PageMs = time.Since(start).Milliseconds()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, h.url+console.Path+"live", nil)
	resp, err = hc.Do(req)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("bench: console live stream: %w", err)
	}
	synced, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		first := true
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			live.events.Add(1)
			if first && strings.Contains(line, `"type":"synced"`) {
				first = false
				close(synced)
			}
		}
	}()
	stop := func() {
		cancel()
		<-done
		live.Events = live.events.Load()
		hc.CloseIdleConnections()
	}
	select {
	case <-synced:
		return live, stop, nil
	case <-done:
		stop()
		return nil, nil, fmt.Errorf("bench: the console's live stream ended before it was live")
	case <-time.After(30 * time.Second):
		stop()
		return nil, nil, fmt.Errorf("bench: the console's live stream was not live within 30 s")
	}
}
