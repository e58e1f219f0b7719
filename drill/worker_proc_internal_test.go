package drill

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasegate/leasegate/embedtest"
)

// TestAnswerDroppedOnTheHop: a worker's request through its hop (the
// loopback proxy in front of the gateway's listener) is served to its
// end — the handler ran — but when the drill drops its answer, the worker
// gets no byte of it: its connection ends with no answer. The next
// request through the same hop is answered (the hop cut the connections
// of that moment, not the path), and an answer not dropped arrives whole.
func TestAnswerDroppedOnTheHop(t *testing.T) {
	var served atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hop *embedtest.Proxy
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		buf := &bufferedResponse{h: http.Header{"Content-Type": {"application/json"}}, code: http.StatusOK}
		_, _ = buf.Write([]byte(`{"record":{"state":"CONFIRMED"}}`))
		answerThrough(w, buf, hop, r.URL.Path == "/drop")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	if hop, err = embedtest.NewProxy(ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hop.Close)

	// A POST, as a worker's call is: the client sends it once; a
	// connection each (the cut ends every connection of its moment, an
	// idle one too: a worker's next call on one is a call not answered).
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (string, error) {
		resp, err := c.Post("http://"+hop.Addr()+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("/keep"); err != nil || body != `{"record":{"state":"CONFIRMED"}}` {
		t.Fatalf("an answer not dropped: %q, %v", body, err)
	}
	start := time.Now()
	body, err := get("/drop")
	if err == nil || body != "" {
		t.Fatalf("a dropped answer reached the worker: %q, %v", body, err)
	}
	if served.Load() != 2 {
		t.Fatalf("the gateway served %d requests, want 2: the dropped one ran to its end", served.Load())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the worker learned of the lost answer after %v: the hop held the connection instead of cutting it", d)
	}
	if body, err := get("/keep"); err != nil || body != `{"record":{"state":"CONFIRMED"}}` {
		t.Fatalf("the hop after a dropped answer: %q, %v", body, err)
	}
}

// TestWorkerTrialsRunLongestFirst: a worker drill starts the trials whose
// plans draw the slowest faults first — every trial once, slowness never
// rising along the order — so that the run does not end waiting on one
// long trial started last.
func TestWorkerTrialsRunLongestFirst(t *testing.T) {
	pr := &procRun{r: &runner{cfg: config{Seed: 2026}}}
	trials := make([]int, 64)
	for i := range trials {
		trials[i] = i
	}
	pr.order(trials)
	seen := map[int]bool{}
	for i, tr := range trials {
		if seen[tr] || tr < 0 || tr >= 64 {
			t.Fatalf("order %v: not each trial once", trials)
		}
		seen[tr] = true
		if i > 0 {
			prev, cur := newProcPlan(trialRNG(2026, trials[i-1])).slowness(), newProcPlan(trialRNG(2026, tr)).slowness()
			if cur > prev {
				t.Fatalf("trial %d (slowness %v) after trial %d (%v): not longest first", tr, cur, trials[i-1], prev)
			}
		}
	}
	first, last := newProcPlan(trialRNG(2026, trials[0])), newProcPlan(trialRNG(2026, trials[63]))
	if first.slowness() <= last.slowness() || !first.dnsLong && first.lookupOutage == 0 && !first.operatorEdit && first.lagBack == 0 {
		t.Fatalf("first %+v, last %+v: the slow faults do not lead", first, last)
	}
}
