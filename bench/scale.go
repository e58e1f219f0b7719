package bench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
)

// ScaleConfig says what Scale measures.
type ScaleConfig struct {
	Etcd
	Sizes   []int         // grants held by one session; default 1000, 10000, 100000
	Workers int           // concurrent claimers; default 16
	Commits int           // commits timed at each size, one at a time; default 300
	TTL     time.Duration // the session's lease TTL; default 5s
	// PerLock is how many single-key leases (a lock per task, as with one
	// concurrency.Session per lock) expire together for comparison;
	// default the largest size; negative skips it.
	PerLock    int
	PerLockTTL time.Duration  // their TTL; default 60s
	Progress   func(Progress) // optional: the plan, then one per step (claims, commits, expiry of each size; per-lock expiry)
	Logger     *zap.Logger
	Prefix     string
}

// ScaleReport is Scale's result.
type ScaleReport struct {
	Etcd    string      `json:"etcd"`
	Fsync   string      `json:"fsync"`
	Machine Machine     `json:"machine"`
	TTLMs   int64       `json:"ttl_ms"`
	Workers int         `json:"workers"`
	Sizes   []ScaleSize `json:"sizes"`
	PerLock *MassExpiry `json:"per_lock,omitempty"`
	// Interrupted, when set, is why the run stopped early: Sizes hold the
	// sizes finished until then.
	Interrupted string `json:"interrupted,omitempty"`
}

// ScaleSize is one session holding Grants grants.
type ScaleSize struct {
	Grants        int        `json:"grants"`
	ClaimsPerSec  float64    `json:"claims_per_sec"`
	CommitP50Ms   float64    `json:"commit_p50_ms"`
	CommitP99Ms   float64    `json:"commit_p99_ms"`
	HeapPerGrantB float64    `json:"heap_bytes_per_grant"` // growth of this process's heap per grant held (with an embedded etcd, its index too)
	Leases        int        `json:"leases"`               // leases the grants live on
	Keepalives    float64    `json:"keepalives"`           // keepalive requests the session sent while the grants were held
	HeldSeconds   float64    `json:"held_seconds"`
	Expiry        MassExpiry `json:"expiry"` // the session's death: every owner key gone
}

// MassExpiry is how long after their leases' expiry the keys were gone.
type MassExpiry struct {
	Keys     int     `json:"keys"`
	Leases   int     `json:"leases"`
	LagP50Ms float64 `json:"lag_p50_ms"` // a key's deletion, seen by a watcher, after its lease's TTL ran out
	LagP99Ms float64 `json:"lag_p99_ms"`
	LagMaxMs float64 `json:"lag_max_ms"` // when the last key was gone
	SetupS   float64 `json:"setup_s,omitempty"`
}

// withDefaults is cfg checked, with every default filled in: a copy with
// slices of its own, the caller's ScaleConfig left as it is.
func (cfg ScaleConfig) withDefaults() (ScaleConfig, error) {
	bad := func(format string, args ...any) error {
		return store.NewError(store.InvalidInput, "bench scale", "", "", fmt.Sprintf(format, args...), nil)
	}
	cfg.Sizes = slices.Clone(cfg.Sizes)
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{1000, 10000, 100000}
	}
	for _, n := range cfg.Sizes {
		if n < 1 || n > 10_000_000 {
			return ScaleConfig{}, bad("size %d out of range 1..10000000", n)
		}
	}
	if cfg.Workers == 0 {
		cfg.Workers = 16
	}
	if cfg.Commits == 0 {
		cfg.Commits = 300
	}
	if cfg.Workers < 1 || cfg.Workers > 1024 || cfg.Commits < 1 {
		return ScaleConfig{}, bad("workers %d (1..1024) and commits %d must be positive", cfg.Workers, cfg.Commits)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 5 * time.Second
	}
	if cfg.PerLockTTL == 0 {
		cfg.PerLockTTL = 60 * time.Second
	}
	for _, ttl := range []time.Duration{cfg.TTL, cfg.PerLockTTL} {
		if err := coordinator.CheckTTL(ttl); err != nil {
			return ScaleConfig{}, bad("%v", err)
		}
	}
	if cfg.PerLock == 0 {
		cfg.PerLock = slices.Max(cfg.Sizes)
	}
	if err := shared(cfg.Etcd, &cfg.Prefix, &cfg.Logger); err != nil {
		return ScaleConfig{}, err
	}
	return cfg, nil
}

// Scale measures one session holding each of cfg.Sizes grants — claim
// rate, commit latency, heap per grant, keepalives, and how fast every
// owner key goes when the session dies — and, for comparison, as many
// single-key leases expiring together.
func Scale(ctx context.Context, cfg ScaleConfig) (out *ScaleReport, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	tg, err := cfg.Etcd.open()
	if err != nil {
		return nil, err
	}
	defer tg.close()
	defer cleanup(tg.client, cfg.Prefix)
	rep := &ScaleReport{Etcd: tg.etcd, Fsync: tg.fsync, TTLMs: cfg.TTL.Milliseconds(), Workers: cfg.Workers,
		Machine: newMachine()}
	steps, done := 3*len(cfg.Sizes), 0
	if cfg.PerLock > 0 {
		steps++
	}
	step := func(line string) {
		done++
		report(cfg.Progress, Progress{Done: done, Total: steps, Line: line})
	}
	report(cfg.Progress, Progress{Total: steps, Expected: cfg.expected(), Line: fmt.Sprintf(
		"bench scale: sizes %v, then %d per-lock leases: about %v", cfg.Sizes, max(cfg.PerLock, 0), about(cfg.expected()))})
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = interrupted(ctx, done, steps, "steps")
			rep.Interrupted = err.Error()
			rep.Machine.LoadEnd = loadAvg()
			out = rep
		}
	}()
	for i, n := range cfg.Sizes {
		sz, err := scaleSize(ctx, cfg, tg, fmt.Sprintf("size-%d", i), n, step)
		if err != nil {
			return nil, fmt.Errorf("bench scale: %d grants: %w", n, err)
		}
		rep.Sizes = append(rep.Sizes, *sz)
	}
	if cfg.PerLock > 0 {
		ex, err := perLockExpiry(ctx, cfg, tg)
		if err != nil {
			return nil, fmt.Errorf("bench scale: %d per-lock leases: %w", cfg.PerLock, err)
		}
		rep.PerLock = ex
		step(fmt.Sprintf("%d per-lock leases (set up in %.1f s): keys gone after their TTL p50 %.0f ms, p99 %.0f ms, all %.0f ms",
			ex.Leases, ex.SetupS, ex.LagP50Ms, ex.LagP99Ms, ex.LagMaxMs))
	}
	rep.Machine.LoadEnd = loadAvg()
	return rep, nil
}

// expected is about how long Scale takes: claims at a few thousand a
// second, the commits, each session's TTL running out, and the per-lock
// leases' set-up, TTL and revocation (etcd revokes 1000 a second).
func (cfg *ScaleConfig) expected() time.Duration {
	var d time.Duration
	for _, n := range cfg.Sizes {
		d += time.Duration(n)*200*time.Microsecond + time.Duration(cfg.Commits)*time.Millisecond + cfg.TTL + time.Second
	}
	if cfg.PerLock > 0 {
		d += time.Duration(cfg.PerLock)*(500*time.Microsecond+time.Millisecond) + cfg.PerLockTTL
	}
	return d
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// scaleSize is one session with n grants, from its start to its death.
func scaleSize(ctx context.Context, cfg ScaleConfig, tg *target, name string, n int, step func(line string)) (*ScaleSize, error) {
	// The session on a client of its own, so that closing the client
	// kills it: no keepalive, no revoke.
	cli, err := tg.dial()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	reg := prometheus.NewRegistry()
	c, err := tg.newCoordinator(ctx, cli, coordinator.WithPrefix(cfg.Prefix), coordinator.WithMetrics(reg))
	if err != nil {
		return nil, err
	}
	margin := 100 * time.Millisecond
	s, err := c.NewSession(ctx, "scale-"+name, cfg.TTL, coordinator.WithMargin(margin))
	if err != nil {
		return nil, err
	}
	defer closeSession(ctx, s)
	sz := &ScaleSize{Grants: n, Leases: 1}

	before := heap()
	grants := make([]coordinator.Grant, n)
	start := time.Now()
	if err := parallel(n, cfg.Workers, func(i int) (err error) {
		grants[i], err = s.Claim(ctx, name, fmt.Sprintf("task-%07d", i))
		return err
	}); err != nil {
		return nil, err
	}
	sz.ClaimsPerSec = round3(float64(n) / time.Since(start).Seconds())
	sz.HeapPerGrantB = round3(float64(int64(heap())-int64(before)) / float64(n))
	step(fmt.Sprintf("%d grants: claimed at %.0f/s, heap %.0f B/grant", n, sz.ClaimsPerSec, sz.HeapPerGrantB))

	lat := make([]time.Duration, 0, cfg.Commits)
	for i := range cfg.Commits {
		g := grants[rand.IntN(n)]
		in := fencedtxn.Intent{Tenant: g.Tenant, Task: g.Task, Operation: fmt.Sprintf("op-%d", i), Value: benchValue,
			ExpectedVersion: stateVersion(ctx, cli, c, g)}
		t0 := time.Now()
		_, err := fencedtxn.Commit(ctx, c, g, in)
		el := time.Since(t0)
		if err != nil {
			return nil, err
		}
		lat = append(lat, el)
	}
	slices.Sort(lat)
	sz.CommitP50Ms, sz.CommitP99Ms = ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99))
	sz.Keepalives = counter(reg, "leasegate_requests_total", "operation", "keepalive")
	sz.HeldSeconds = round3(time.Since(start).Seconds())
	step(fmt.Sprintf("%d grants: commit p50 %.2f ms, p99 %.2f ms", n, sz.CommitP50Ms, sz.CommitP99Ms))

	// The session dies: its client closes, the lease runs out, etcd deletes
	// every owner key on it.
	ownerPrefix := c.Keys().TaskPrefix(coordinator.KindOwner, name)
	w, err := newDeleteWatch(ctx, tg.client, ownerPrefix)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	expires := s.Deadline().Add(margin) // last confirmed renewal's send time + TTL
	_ = cli.Close()
	deleted, err := w.wait(ctx, n, cfg.TTL+time.Minute+time.Duration(n)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	sz.Expiry = lagOf(deleted, func(string) time.Time { return expires })
	sz.Expiry.Leases = 1
	step(fmt.Sprintf("%d grants: owner keys gone after the session's expiry p50 %.0f ms, p99 %.0f ms, all %.0f ms",
		n, sz.Expiry.LagP50Ms, sz.Expiry.LagP99Ms, sz.Expiry.LagMaxMs))
	return sz, nil
}

// stateVersion is the task's state version (0 before its first commit).
func stateVersion(ctx context.Context, cli *clientv3.Client, c *coordinator.Coordinator, g coordinator.Grant) int64 {
	resp, err := cli.Get(ctx, c.Keys().State(g.Tenant, g.Task))
	if err != nil || len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].Version
}

// perLockExpiry puts cfg.PerLock keys, each on a lease of its own granted
// without keepalive, and times how long after each lease's TTL its key is
// gone.
func perLockExpiry(ctx context.Context, cfg ScaleConfig, tg *target) (*MassExpiry, error) {
	n := cfg.PerLock
	prefix := cfg.Prefix + "-plain/lock/"
	w, err := newDeleteWatch(ctx, tg.client, prefix)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	expires := make(map[string]time.Time, n)
	var mu sync.Mutex
	start := time.Now()
	if err := parallel(n, cfg.Workers, func(i int) error {
		key := fmt.Sprintf("%s%07d", prefix, i)
		sent := time.Now()
		l, err := tg.client.Grant(ctx, int64(cfg.PerLockTTL/time.Second))
		if err == nil {
			_, err = tg.client.Put(ctx, key, "holder", clientv3.WithLease(l.ID))
		}
		mu.Lock()
		expires[key] = sent.Add(cfg.PerLockTTL)
		mu.Unlock()
		return err
	}); err != nil {
		return nil, err
	}
	setup := time.Since(start)
	deleted, err := w.wait(ctx, n, cfg.PerLockTTL+time.Minute+time.Duration(n)*5*time.Millisecond)
	if err != nil {
		return nil, err
	}
	ex := lagOf(deleted, func(k string) time.Time { return expires[k] })
	ex.Leases, ex.SetupS = n, round3(setup.Seconds())
	return &ex, nil
}

// deleteWatch records when each key under a prefix was seen deleted.
type deleteWatch struct {
	cancel  context.CancelFunc
	mu      sync.Mutex
	deleted map[string]time.Time
	changed chan struct{}
	cut     chan struct{} // signalled each time etcd cancels the watch
	done    chan struct{}
}

// newDeleteWatch watches deletions under prefix from now on. A watch etcd
// cancels (on a cluster with auth, a member that does not know the
// client's token cancels it with "invalid auth token" after the client
// moved to it; a member without a leader cancels it too) is resumed from the revision after the last one delivered,
// so no deletion is lost; one delivered by the resumed watch is timed at
// its delivery, late by the gap.
func newDeleteWatch(ctx context.Context, cli *clientv3.Client, prefix string) (*deleteWatch, error) {
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &deleteWatch{cancel: cancel, deleted: map[string]time.Time{}, changed: make(chan struct{}, 1),
		cut: make(chan struct{}, 1), done: make(chan struct{})}
	next := resp.Header.Revision + 1
	go func() {
		defer close(w.done)
		for wctx.Err() == nil {
			next = w.watchFrom(wctx, cli, prefix, next)
			select {
			case <-wctx.Done():
			case <-time.After(50 * time.Millisecond): // a cancelled watch is not retried in a spin
			}
		}
	}()
	return w, nil
}

// watchFrom records deletions under prefix from revision rev until etcd
// cuts the watch or ctx ends, and returns the revision to resume from.
func (w *deleteWatch) watchFrom(ctx context.Context, cli *clientv3.Client, prefix string, rev int64) int64 {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithFilterPut()) {
		if resp.Err() != nil {
			select {
			case w.cut <- struct{}{}:
			default:
			}
			return rev
		}
		at := time.Now()
		w.mu.Lock()
		for _, ev := range resp.Events {
			w.deleted[string(ev.Kv.Key)] = at
			rev = max(rev, ev.Kv.ModRevision+1)
		}
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	return rev
}

// wait returns the deletions once n keys are gone, or an error after
// timeout.
func (w *deleteWatch) wait(ctx context.Context, n int, timeout time.Duration) (map[string]time.Time, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		w.mu.Lock()
		got := len(w.deleted)
		w.mu.Unlock()
		if got >= n {
			w.mu.Lock()
			defer w.mu.Unlock()
			return maps.Clone(w.deleted), nil
		}
		select {
		case <-w.changed:
		case <-t.C:
			return nil, fmt.Errorf("only %d of %d keys gone after %v", got, n, timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (w *deleteWatch) stop() {
	w.cancel()
	<-w.done
}

func lagOf(deleted map[string]time.Time, expiry func(key string) time.Time) MassExpiry {
	lags := make([]time.Duration, 0, len(deleted))
	for k, at := range deleted {
		lags = append(lags, at.Sub(expiry(k)))
	}
	slices.Sort(lags)
	ex := MassExpiry{Keys: len(deleted)}
	if len(lags) > 0 {
		ex.LagP50Ms, ex.LagP99Ms, ex.LagMaxMs = ms(percentile(lags, 0.5)), ms(percentile(lags, 0.99)), ms(lags[len(lags)-1])
	}
	return ex
}

// counter is the value of a counter series in reg, 0 if absent.
func counter(reg *prometheus.Registry, name, label, value string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}
	return 0
}

// parallel runs f(i) for every i in [0, n) on workers goroutines and
// returns the first error; after an error no new i is started.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // stop everyone
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
