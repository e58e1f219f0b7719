package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
)

// How the holder dies.
const (
	// Revoke: the holder's lease is revoked (an operator's forced expiry,
	// or a holder that closes its session). The owner key goes when the
	// revoke applies; the revoke's send time stands for the deletion, so
	// the figure is an upper bound.
	Revoke = "revoke"
	// Expiry: the holder's process dies (its client is closed: no more
	// keepalives, nothing revoked) and etcd expires the lease after its
	// TTL. The deletion time is when a separate watcher saw the delete.
	Expiry = "expiry"
)

// The contenders.
const (
	// Acquire: leasegate's Session.Acquire, which watches the owner key.
	Acquire = "acquire"
	// Poll: claims every PollInterval until granted, as client-go's leader
	// election retries every RetryPeriod.
	Poll = "poll"
	// Campaign: etcd's concurrency.Election.Campaign.
	Campaign = "election"
	// WatchFromBusy is a waiter for the diagnosis only (not run by
	// default): on busy it watches the owner key from the revision the busy
	// answer saw + 1, where Acquire watches from a read after the watch is
	// registered. Such a watch is served
	// from etcd's unsynced set — caught up every 100 ms — whenever etcd's
	// revision moved past that start before the watch was registered; each
	// trial records whether it did (the watch's "created" answer carries
	// etcd's revision after registering).
	WatchFromBusy = "watch-from-busy"
)

// Causes lists every cause. Each of these lists returns a new slice each
// time: the caller may keep or change it.
func Causes() []string { return slices.Clone(causes) }

// Contenders lists the contenders a takeover measures by default.
func Contenders() []string { return slices.Clone(contenders) }

// AllContenders lists every contender: Contenders and the diagnostic one.
func AllContenders() []string { return slices.Clone(allContenders) }

var (
	causes        = []string{Revoke, Expiry}
	contenders    = []string{Acquire, Poll, Campaign}
	allContenders = []string{Acquire, Poll, Campaign, WatchFromBusy}
)

// TakeoverConfig says what Takeover measures.
type TakeoverConfig struct {
	Etcd
	Trials       int            // per cause and contender; default 20
	TTL          time.Duration  // the holder's lease TTL; default 2s
	PollInterval time.Duration  // the polling contender's period; default 2s (client-go's RetryPeriod)
	Causes       []string       // default Causes()
	Contenders   []string       // default Contenders()
	Progress     func(Progress) // optional: the plan, then one per trial (a Line per interleaved round)
	Logger       *zap.Logger
	Prefix       string
}

// TakeoverReport is Takeover's result.
type TakeoverReport struct {
	Etcd    string           `json:"etcd"`
	Fsync   string           `json:"fsync"`
	Machine Machine          `json:"machine"`
	TTLMs   int64            `json:"ttl_ms"`
	PollMs  int64            `json:"poll_ms"`
	Results []TakeoverResult `json:"results"`
	// Interrupted, when set, is why the run stopped early: Results hold
	// the trials finished until then.
	Interrupted string `json:"interrupted,omitempty"`
}

// TakeoverResult is one cause and contender over every trial: the time
// from the owner key's deletion, and from the holder's death, to the
// successor's first committed protected write.
type TakeoverResult struct {
	Cause        string  `json:"cause"`
	Contender    string  `json:"contender"`
	Trials       int     `json:"trials"`
	Failures     int     `json:"failures"`
	FromDeletion Latency `json:"from_deletion"`
	// From the deletion to the grant (Acquire or Claim returned, Campaign
	// won), before the first write.
	ToGrant   Latency `json:"from_deletion_to_grant"`
	FromDeath Latency `json:"from_death"`
	// For expiry only: from the end of the holder's lease's TTL (its last
	// renewal + TTL, as the holder's client saw it) to the write.
	FromTTLEnd *Latency `json:"from_ttl_end,omitempty"`
	// For watch-from-busy only: how many trials' watch started at a
	// revision etcd had already passed (unsynced), and the time from
	// deletion in those trials and in the others.
	WatchStartedPast *int     `json:"watch_started_past,omitempty"`
	FromDeletionPast *Latency `json:"from_deletion_watch_past,omitempty"`
	FromDeletionNow  *Latency `json:"from_deletion_watch_current,omitempty"`
	fromDel          []time.Duration
	toGrant          []time.Duration
	fromDeath        []time.Duration
	fromTTLEnd       []time.Duration
	past, now        []time.Duration
}

// Latency summarizes trials' latencies.
type Latency struct {
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// withDefaults is cfg checked, with every default filled in: a copy with
// slices of its own (the caller's TakeoverConfig and the package's Causes
// and Contenders are never written to).
func (cfg TakeoverConfig) withDefaults() (TakeoverConfig, error) {
	bad := func(format string, args ...any) error {
		return store.NewError(store.InvalidInput, "bench takeover", "", "", fmt.Sprintf(format, args...), nil)
	}
	cfg.Causes, cfg.Contenders = slices.Clone(cfg.Causes), slices.Clone(cfg.Contenders)
	if cfg.Trials == 0 {
		cfg.Trials = 20
	}
	if cfg.Trials < 1 || cfg.Trials > 10000 {
		return TakeoverConfig{}, bad("trials %d out of range 1..10000", cfg.Trials)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 2 * time.Second
	}
	if err := coordinator.CheckTTL(cfg.TTL); err != nil {
		return TakeoverConfig{}, bad("%v", err)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.PollInterval < time.Millisecond {
		return TakeoverConfig{}, bad("poll interval %v below 1ms", cfg.PollInterval)
	}
	if len(cfg.Causes) == 0 {
		cfg.Causes = Causes()
	}
	if len(cfg.Contenders) == 0 {
		cfg.Contenders = Contenders()
	}
	for _, c := range cfg.Causes {
		if !slices.Contains(causes, c) {
			return TakeoverConfig{}, bad("unknown cause %q; the causes are %s", c, strings.Join(causes, ", "))
		}
	}
	for _, c := range cfg.Contenders {
		if !slices.Contains(allContenders, c) {
			return TakeoverConfig{}, bad("unknown contender %q; the contenders are %s", c, strings.Join(allContenders, ", "))
		}
	}
	if err := shared(cfg.Etcd, &cfg.Prefix, &cfg.Logger); err != nil {
		return TakeoverConfig{}, err
	}
	return cfg, nil
}

// Takeover measures how fast a successor completes its first protected
// write after the holder dies, for each cause and contender, the trials
// interleaved.
func Takeover(ctx context.Context, cfg TakeoverConfig) (*TakeoverReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tg, err := cfg.Etcd.open()
	if err != nil {
		return nil, err
	}
	defer tg.close()
	defer cleanup(tg.client, cfg.Prefix)
	rep := &TakeoverReport{Etcd: tg.etcd, Fsync: tg.fsync, TTLMs: cfg.TTL.Milliseconds(), PollMs: cfg.PollInterval.Milliseconds(),
		Machine: newMachine()}

	// The contenders' coordinator signals when Acquire is waiting: it logs
	// each wait on a busy task with the disposition busy (the entry is
	// matched by that field, never by its wording).
	waiting := make(chan struct{}, 1)
	lg := zap.New(zapcore.NewTee(cfg.Logger.Core(),
		&signalCore{key: "disposition", value: string(coordinator.Busy), ch: waiting}))
	c, err := tg.newCoordinator(ctx, tg.client, coordinator.WithPrefix(cfg.Prefix), coordinator.WithLogger(lg))
	if err != nil {
		return nil, err
	}
	s, err := c.NewSession(ctx, "successor", 60*time.Second)
	if err != nil {
		return nil, err
	}
	defer closeSession(ctx, s)
	cs, err := concurrency.NewSession(tg.client, concurrency.WithTTL(60), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("bench takeover: concurrency session: %w", err)
	}
	defer cs.Close()
	tk := &takeover{cfg: cfg, tg: tg, c: c, s: s, cs: cs, waiting: waiting}

	results := map[string]*TakeoverResult{}
	for _, cause := range cfg.Causes {
		for _, who := range cfg.Contenders {
			results[cause+"/"+who] = &TakeoverResult{Cause: cause, Contender: who}
		}
	}
	total, done := cfg.Trials*len(cfg.Causes)*len(cfg.Contenders), 0
	report(cfg.Progress, Progress{Total: total, Expected: cfg.expected(), Line: fmt.Sprintf(
		"bench takeover: %d trials (%d per cause and contender: %s × %s), about %v",
		total, cfg.Trials, strings.Join(cfg.Causes, ","), strings.Join(cfg.Contenders, ","), about(cfg.expected()))})
trials:
	for i := range cfg.Trials {
		var line []string
		for _, cause := range cfg.Causes {
			for j := range cfg.Contenders {
				who := cfg.Contenders[(i+j)%len(cfg.Contenders)]
				if ctx.Err() != nil {
					break trials
				}
				fromDel, fromDeath, fromTTLEnd, err := tk.trial(ctx, fmt.Sprintf("%s-%s-%d", cause, who, i), cause, who)
				if ctx.Err() != nil {
					break trials // cut short: not a result
				}
				r := results[cause+"/"+who]
				r.Trials++
				if err != nil {
					r.Failures++
					cfg.Logger.Warn("takeover trial failed", zap.String("operation", cause+"/"+who), zap.Error(err))
					line = append(line, fmt.Sprintf("%s/%s failed", cause, who))
				} else {
					r.fromDel = append(r.fromDel, fromDel)
					r.toGrant = append(r.toGrant, tk.toGrant)
					r.fromDeath = append(r.fromDeath, fromDeath)
					note := ""
					if cause == Expiry {
						r.fromTTLEnd = append(r.fromTTLEnd, fromTTLEnd)
						note = fmt.Sprintf(" (%.1f ms from the TTL's end)", ms(fromTTLEnd))
					}
					if who == WatchFromBusy {
						note = " (watch from a current revision)"
						if tk.past {
							r.past, note = append(r.past, fromDel), " (watch from a past revision)"
						} else {
							r.now = append(r.now, fromDel)
						}
					}
					line = append(line, fmt.Sprintf("%s/%s %.1f ms (grant %.1f)%s", cause, who, ms(fromDel), ms(tk.toGrant), note))
				}
				done++
				report(cfg.Progress, Progress{Done: done, Total: total})
			}
		}
		report(cfg.Progress, Progress{Done: done, Total: total, Line: fmt.Sprintf("trial %d/%d, from deletion: %s",
			i+1, cfg.Trials, strings.Join(line, ", "))})
	}
	for _, cause := range cfg.Causes {
		for _, who := range cfg.Contenders {
			r := results[cause+"/"+who]
			r.FromDeletion, r.ToGrant, r.FromDeath = latencyOf(r.fromDel), latencyOf(r.toGrant), latencyOf(r.fromDeath)
			if cause == Expiry {
				l := latencyOf(r.fromTTLEnd)
				r.FromTTLEnd = &l
			}
			if who == WatchFromBusy {
				n, past, now := len(r.past), latencyOf(r.past), latencyOf(r.now)
				r.WatchStartedPast, r.FromDeletionPast, r.FromDeletionNow = &n, &past, &now
			}
			rep.Results = append(rep.Results, *r)
		}
	}
	rep.Machine.LoadEnd = loadAvg()
	if ctx.Err() != nil {
		err := interrupted(ctx, done, total, "trials")
		rep.Interrupted = err.Error()
		return rep, err
	}
	return rep, nil
}

// expected is about how long the trials take: each sets a holder up and
// waits for the contender; expiry waits for the TTL and etcd's lessor
// (every 500 ms), a poller about its interval (the holder dies at a random
// moment of the poller's cycle, then the next poll comes), the Election
// etcd's watch resync (every 100 ms).
func (cfg *TakeoverConfig) expected() time.Duration {
	var per time.Duration
	for _, cause := range cfg.Causes {
		for _, who := range cfg.Contenders {
			per += 50 * time.Millisecond
			if cause == Expiry {
				per += cfg.TTL + 250*time.Millisecond
			}
			switch who {
			case Poll: // dies at a random moment of the cycle, then half a cycle more
				per += cfg.PollInterval
			case Campaign, WatchFromBusy:
				per += 50 * time.Millisecond
			}
		}
	}
	return time.Duration(cfg.Trials) * per
}

func latencyOf(ds []time.Duration) Latency {
	slices.Sort(ds)
	if len(ds) == 0 {
		return Latency{}
	}
	return Latency{P50Ms: ms(percentile(ds, 0.5)), P99Ms: ms(percentile(ds, 0.99)), MaxMs: ms(ds[len(ds)-1])}
}

type takeover struct {
	cfg     TakeoverConfig
	tg      *target
	c       *coordinator.Coordinator
	s       *coordinator.Session
	cs      *concurrency.Session
	waiting chan struct{}
	past    bool      // watch-from-busy: the last trial's watch started at a past revision
	grantAt time.Time // when the last trial's contender was granted (Campaign returned)
	toGrant time.Duration
}

// holder is the dying side of one trial.
type holder struct {
	client  *clientv3.Client // its own for Expiry (closed to kill it), the shared one for Revoke
	lease   clientv3.LeaseID
	key     string // the key whose deletion hands over: owner key, or election key
	ttlEnd  func() time.Time
	cleanup func()
}

// trial runs one takeover of task: a holder, a contender waiting (or
// polling), the holder's death, the contender's first protected write.
func (tk *takeover) trial(ctx context.Context, task, cause, who string) (fromDel, fromDeath, fromTTLEnd time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*tk.cfg.TTL+2*tk.cfg.PollInterval+30*time.Second)
	defer cancel()
	h, err := tk.newHolder(ctx, task, cause, who)
	if err != nil {
		return 0, 0, 0, err
	}
	defer h.cleanup()

	// The watcher that times the deletion, from the current revision.
	wresp, err := tk.tg.client.Get(ctx, h.key)
	if err != nil {
		return 0, 0, 0, err
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	deleted := make(chan time.Time, 1)
	wch := tk.tg.client.Watch(wctx, h.key, clientv3.WithRev(wresp.Header.Revision+1), clientv3.WithFilterPut())
	go func() {
		for resp := range wch {
			if len(resp.Events) > 0 {
				deleted <- time.Now()
				return
			}
		}
	}()

	// The contender, started and known to be waiting before the death.
	ready := make(chan struct{})
	type result struct {
		at  time.Time
		err error
	}
	out := make(chan result, 1)
	go func() {
		err := tk.contend(ctx, task, who, ready)
		out <- result{time.Now(), err}
	}()
	select {
	case <-ready:
	case r := <-out:
		return 0, 0, 0, fmt.Errorf("contender returned before the holder died: %v", r.err)
	}
	if who == Poll {
		// The holder dies at a random moment of the poller's cycle, not
		// just after a poll (its worst case).
		select {
		case <-time.After(rand.N(tk.cfg.PollInterval)):
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		}
	}

	died := time.Now()
	switch cause {
	case Revoke:
		if _, err := tk.tg.client.Revoke(ctx, h.lease); err != nil {
			return 0, 0, 0, fmt.Errorf("revoke: %w", err)
		}
	case Expiry:
		_ = h.client.Close()
	}
	var ttlEnd time.Time
	if cause == Expiry {
		ttlEnd = h.ttlEnd() // no renewal comes after the close
	}
	r := <-out
	if r.err != nil {
		return 0, 0, 0, r.err
	}
	var delAt time.Time
	select {
	case delAt = <-deleted:
	case <-ctx.Done():
		return 0, 0, 0, fmt.Errorf("the deletion was never seen: %w", ctx.Err())
	}
	if cause == Revoke {
		delAt = died // the revoke's send time: the deletion came later
	}
	tk.toGrant = tk.grantAt.Sub(delAt) // the contender's goroutine wrote grantAt before sending on out
	if cause == Revoke {
		return r.at.Sub(delAt), r.at.Sub(died), 0, nil
	}
	return r.at.Sub(delAt), r.at.Sub(died), r.at.Sub(ttlEnd), nil
}

// newHolder makes the task held: by a leasegate session for the Acquire
// and Poll contenders, by an Election leader for Campaign.
func (tk *takeover) newHolder(ctx context.Context, task, cause, who string) (*holder, error) {
	cli := tk.tg.client
	closeCli := func() {}
	if cause == Expiry {
		var err error
		if cli, err = tk.tg.dial(); err != nil {
			return nil, err
		}
		closeCli = func() { _ = cli.Close() }
	}
	ttl := int(tk.cfg.TTL / time.Second)
	if who == Campaign {
		rn := &renewals{Lease: cli.Lease, ttl: tk.cfg.TTL}
		if cause == Expiry {
			cli.Lease = rn // the holder's own client
		}
		hs, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
		if err != nil {
			closeCli()
			return nil, err
		}
		e := concurrency.NewElection(hs, tk.electionPrefix(task))
		if err := e.Campaign(ctx, "holder"); err != nil {
			_ = hs.Close()
			closeCli()
			return nil, err
		}
		return &holder{client: cli, lease: hs.Lease(), key: string(e.Key()), ttlEnd: rn.ttlEnd, cleanup: func() {
			hs.Orphan()
			closeCli()
		}}, nil
	}
	hc, err := tk.tg.newCoordinator(ctx, cli, coordinator.WithPrefix(tk.cfg.Prefix))
	if err != nil {
		closeCli()
		return nil, err
	}
	const margin = 100 * time.Millisecond // its Deadline is the last renewal's send + TTL - margin
	hs, err := hc.NewSession(ctx, "holder", tk.cfg.TTL, coordinator.WithMargin(margin))
	if err != nil {
		closeCli()
		return nil, err
	}
	if _, err := hs.Claim(ctx, tenant, task); err != nil {
		closeSession(ctx, hs)
		closeCli()
		return nil, err
	}
	ttlEnd := func() time.Time { return hs.Deadline().Add(margin) }
	return &holder{client: cli, lease: clientv3.LeaseID(hs.Lease()), key: tk.c.Keys().Owner(tenant, task), ttlEnd: ttlEnd, cleanup: func() {
		closeCli()
		closeSession(ctx, hs) // after the client is closed, only stops the keepalive
	}}, nil
}

// renewals is an Election holder's lease client that records when its
// lease was last renewed: the answer's arrival, the latest the renewal can
// have applied, so that its + TTL is the latest the TTL can end.
type renewals struct {
	clientv3.Lease
	ttl  time.Duration
	mu   sync.Mutex
	last time.Time
}

func (r *renewals) renewed() {
	r.mu.Lock()
	r.last = time.Now()
	r.mu.Unlock()
}

func (r *renewals) ttlEnd() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last.Add(r.ttl)
}

func (r *renewals) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	resp, err := r.Lease.Grant(ctx, ttl)
	if err == nil {
		r.renewed()
	}
	return resp, err
}

func (r *renewals) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ch, err := r.Lease.KeepAlive(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make(chan *clientv3.LeaseKeepAliveResponse)
	go func() {
		defer close(out)
		for resp := range ch {
			r.renewed()
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (tk *takeover) electionPrefix(task string) string {
	return tk.cfg.Prefix + "-plain/election/" + task
}

// contend takes the task over and completes its first protected write;
// ready closes once it is waiting (or has polled once and found it busy).
func (tk *takeover) contend(ctx context.Context, task, who string, ready chan struct{}) error {
	switch who {
	case Campaign:
		e := concurrency.NewElection(tk.cs, tk.electionPrefix(task))
		go tk.campaignWaiting(ctx, task, ready)
		if err := e.Campaign(ctx, "successor"); err != nil {
			return err
		}
		tk.grantAt = time.Now()
		defer func() { _ = e.Resign(context.WithoutCancel(ctx)) }()
		// The first write fenced as an election allows: on the leader key.
		resp, err := tk.tg.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(e.Key())), "=", e.Rev())).
			Then(clientv3.OpPut(tk.c.Keys().State(tenant, task), string(benchValue))).Commit()
		if err == nil && !resp.Succeeded {
			err = errors.New("the new leader's write was refused")
		}
		return err
	case Acquire:
		select { // a stale signal from an earlier trial
		case <-tk.waiting:
		default:
		}
		go func() {
			select {
			case <-tk.waiting:
				close(ready)
			case <-ctx.Done():
			}
		}()
		g, err := tk.s.Acquire(ctx, tenant, task)
		if err != nil {
			return err
		}
		return tk.firstWrite(ctx, g)
	case WatchFromBusy:
		return tk.watchFromBusy(ctx, task, ready)
	default: // Poll
		for first := true; ; first = false {
			g, err := tk.s.Claim(ctx, tenant, task)
			if err == nil {
				return tk.firstWrite(ctx, g)
			}
			if coordinator.DispositionOf(err) != coordinator.Busy {
				return err
			}
			if first {
				close(ready)
			}
			select {
			case <-time.After(tk.cfg.PollInterval):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// watchFromBusy claims and, on busy, watches the owner key
// for its deletion from the revision etcd had when it said busy, + 1 (here
// the revision of a read just after the busy claim), then claims again.
// ready closes where Acquire logged its wait: before the watch.
func (tk *takeover) watchFromBusy(ctx context.Context, task string, ready chan struct{}) error {
	owner := tk.c.Keys().Owner(tenant, task)
	for first := true; ; first = false {
		g, err := tk.s.Claim(ctx, tenant, task)
		if err == nil {
			return tk.firstWrite(ctx, g)
		}
		if coordinator.DispositionOf(err) != coordinator.Busy {
			return err
		}
		resp, err := tk.tg.client.Get(ctx, owner, clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if first {
			close(ready)
		}
		start := resp.Header.Revision + 1
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := tk.tg.client.Watch(wctx, owner, clientv3.WithRev(start), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
		for wr := range wch {
			if wr.Created {
				// etcd read this revision after registering the watch: at
				// or past the start, the watch was registered unsynced
				// (or a write came just after it: rare, and counted past).
				tk.past = wr.Header.Revision >= start
			}
			if wr.Err() != nil || len(wr.Events) > 0 {
				break
			}
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// campaignWaiting closes ready once the contender's election key exists
// (Campaign has written it and waits on the holder's).
func (tk *takeover) campaignWaiting(ctx context.Context, task string, ready chan struct{}) {
	prefix := tk.electionPrefix(task) + "/"
	for {
		resp, err := tk.tg.client.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return
		}
		for _, kv := range resp.Kvs {
			if clientv3.LeaseID(kv.Lease) == tk.cs.Lease() {
				close(ready)
				return
			}
		}
		// Wait for the next put under the prefix, then look again.
		wctx, cancel := context.WithCancel(ctx)
		wch := tk.tg.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		select {
		case <-wch:
		case <-ctx.Done():
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

// firstWrite is the successor's first protected write, then its release.
func (tk *takeover) firstWrite(ctx context.Context, g coordinator.Grant) error {
	tk.grantAt = time.Now()
	_, err := fencedtxn.Commit(ctx, tk.c, g, fencedtxn.Intent{Tenant: g.Tenant, Task: g.Task, Operation: "takeover",
		Value: benchValue, ExpectedVersion: 0})
	_ = tk.c.Release(context.WithoutCancel(ctx), g)
	return err
}

func closeSession(ctx context.Context, s *coordinator.Session) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = s.Close(cctx)
}

// signalCore is a zap core that sends on ch whenever an entry is logged,
// at any level, with the string field key equal to value (in the entry's
// own fields or the logger's).
type signalCore struct {
	key, value string
	ch         chan struct{}
	has        bool // the logger's fields (With) hold it
}

func (c *signalCore) Enabled(zapcore.Level) bool { return true }
func (c *signalCore) With(fs []zapcore.Field) zapcore.Core {
	d := *c
	d.has = c.has || c.holds(fs)
	return &d
}
func (c *signalCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (c *signalCore) Write(_ zapcore.Entry, fs []zapcore.Field) error {
	if c.has || c.holds(fs) {
		select {
		case c.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (c *signalCore) holds(fs []zapcore.Field) bool {
	for _, f := range fs {
		if f.Key == c.key && f.Type == zapcore.StringType && f.String == c.value {
			return true
		}
	}
	return false
}
func (c *signalCore) Sync() error { return nil }
