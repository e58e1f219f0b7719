package gateway

import (
	"context"
	"sync"
	"time"

	"connectrpc.com/grpchealth"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/ledger"
)

// A provider that does not answer does not stop the gateway: the server
// starts, serves every call that needs no provider (sessions, claims,
// commits, approvals, the ledger's reads), and shows each adapter's
// provider in grpc.health.v1 under AdapterHealthService(kind): SERVING when
// its last probe passed, NOT_SERVING when it failed, UNKNOWN before the
// first. A dispatch to an unreachable provider is decided per effect, as
// always (a Precondition that cannot read is a hold; a call that cannot
// connect is refused with nothing sent). Failing the start instead would
// take the gateway down in the very failover it exists for, when one
// database is gone; what a start does refuse is a configuration that
// cannot work whoever answers (Config.NewAdapters).
const (
	// ProbeInterval is how often Serve probes the providers.
	ProbeInterval = 10 * time.Second
	// probeFresh is how long a probe's answer serves health checks before
	// a check probes again.
	probeFresh = 2 * time.Second
	// probeTimeout bounds one probe.
	probeTimeout = 5 * time.Second
)

// AdapterHealthService is the grpc.health.v1 service name of the adapter
// serving kind: "leasegate.adapter.db.promote".
func AdapterHealthService(kind string) string { return "leasegate.adapter." + kind }

// Prober is an adapter that can tell whether its provider answers and
// takes its credential, changing nothing (the reference adapters do).
type Prober interface {
	Probe(ctx context.Context) error
}

// health is the server's grpc.health.v1 state: the services always
// SERVING, each adapter as its probe last found it.
type health struct {
	checker *grpchealth.StaticChecker
	probes  []*probe
}

// probe is one adapter's health, probed one at a time.
type probe struct {
	kind    string
	p       Prober
	checker *grpchealth.StaticChecker
	lg      *zap.Logger

	mu     sync.Mutex
	probed bool
	at     time.Time
	err    error
}

func newHealth(adapters []ledger.Adapter, lg *zap.Logger, services ...string) *health {
	h := &health{checker: grpchealth.NewStaticChecker(services...)}
	for _, a := range adapters {
		p, ok := a.(Prober)
		if !ok { // an in-memory provider (the dev types): always there
			h.checker.SetStatus(AdapterHealthService(a.Kind()), grpchealth.StatusServing)
			continue
		}
		h.checker.SetStatus(AdapterHealthService(a.Kind()), grpchealth.StatusUnknown)
		h.probes = append(h.probes, &probe{kind: a.Kind(), p: p, checker: h.checker, lg: lg})
	}
	return h
}

// run probes unless the last answer is fresher than fresh, sets the
// adapter's health, and logs a change.
func (p *probe) run(ctx context.Context, fresh time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.probed && time.Since(p.at) < fresh {
		return p.err
	}
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	err := p.p.Probe(cctx)
	cancel()
	if ctx.Err() != nil && err != nil { // the caller went away: no finding
		return err
	}
	changed := !p.probed || (err == nil) != (p.err == nil)
	p.probed, p.at, p.err = true, time.Now(), err
	status := grpchealth.StatusServing
	if err != nil {
		status = grpchealth.StatusNotServing
	}
	p.checker.SetStatus(AdapterHealthService(p.kind), status)
	switch {
	case changed && err != nil:
		p.lg.Warn("provider unreachable: dispatches to it will hold or be refused, nothing sent",
			zap.String("adapter", p.kind), zap.String("health", status.String()), zap.Error(err))
	case changed:
		p.lg.Info("provider reachable", zap.String("adapter", p.kind), zap.String("health", status.String()))
	}
	return err
}

// all probes every adapter at once and returns each one's error by kind
// (nil: answered).
func (h *health) all(ctx context.Context, fresh time.Duration) map[string]error {
	out := make(map[string]error, len(h.probes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range h.probes {
		wg.Go(func() {
			err := p.run(ctx, fresh)
			mu.Lock()
			out[p.kind] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// loop probes at once, then every interval until ctx is done.
func (h *health) loop(ctx context.Context, interval time.Duration) {
	if len(h.probes) == 0 {
		return
	}
	h.all(ctx, 0)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.all(ctx, 0)
		}
	}
}

// healthChecker answers grpc.health.v1: an adapter's service probes first
// when its last answer is stale; the rest is the static state (Watch
// included).
type healthChecker struct {
	*grpchealth.StaticChecker
	h *health
}

func (c healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	for _, p := range c.h.probes {
		if req.Service == AdapterHealthService(p.kind) {
			_ = p.run(ctx, probeFresh)
		}
	}
	return c.StaticChecker.Check(ctx, req)
}

// Probe probes the providers of adapters now, as the health service of a
// server serving them would (concurrently, each bounded), and returns
// what failed by effect kind; an adapter that is not a Prober passes.
// `leasegate serve --check` uses it without a server.
func Probe(ctx context.Context, adapters ...ledger.Adapter) map[string]error {
	return failed(newHealth(adapters, zap.NewNop()).all(ctx, 0))
}

func failed(all map[string]error) map[string]error {
	for k, err := range all {
		if err == nil {
			delete(all, k)
		}
	}
	return all
}

// probeAdapters probes every adapter's provider now (concurrently, each
// bounded) and returns what failed by effect kind; the health service
// shows the same. Serve probes as it starts and every ProbeInterval: an
// unreachable provider is logged at each change and shown NOT_SERVING,
// and the server serves all the same (see AdapterHealthService).
func (s *Server) probeAdapters(ctx context.Context) map[string]error {
	return failed(s.health.all(ctx, 0))
}
