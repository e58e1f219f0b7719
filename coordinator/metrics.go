package coordinator

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasegate/leasegate/internal/store"
)

// metrics are leasegate's Prometheus metrics, registered on the caller's
// prometheus.Registerer by WithMetrics (nothing is registered anywhere by
// default). Labels are bounded: operation (a name fixed in code: claim,
// commit, release, renew, keepalive), disposition (the Dispositions list).
// No metric carries a tenant, task, owner or lease label. The ledger owns
// its metrics (ledger.WithMetrics).
//
// A nil *metrics (a coordinator without WithMetrics) records nothing and
// costs nothing; every method is safe on nil. The requests' outcomes and
// the Txns' latency are recorded by the store (store.Metrics), where
// fencedtxn counts its commits too.
type metrics struct {
	store      store.Metrics
	kaFailures *prometheus.CounterVec

	reg        prometheus.Registerer
	collectors []prometheus.Collector

	mu       sync.Mutex
	sessions map[*Session]time.Time // live sessions and the send time of their last confirmed grant or renewal
	now      func() time.Time
}

// txnBuckets span a loopback Txn without fsync (~100 µs) to a slow disk or
// a leader election (seconds).
var txnBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		store: store.Metrics{
			Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: "leasegate", Name: "requests_total",
				Help: "Claims, commits, releases, renewals and keepalives by outcome (disposition).",
			}, []string{"operation", "disposition"}),
			TxnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Namespace: "leasegate", Name: "txn_duration_seconds",
				Help:    "Latency of the etcd Txns leasegate sends, by operation, including failed ones.",
				Buckets: txnBuckets,
			}, []string{"operation"}),
		},
		kaFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "leasegate", Name: "keepalive_failures_total",
			Help: "Session keepalives that did not confirm a renewal: unreachable (retried until the local deadline), lease_lost, deadline.",
		}, []string{"reason"}),
		sessions: make(map[*Session]time.Time),
		now:      time.Now,
	}
	live := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "leasegate", Name: "sessions",
		Help: "Sessions of this process that can still act (lease not lost, local deadline not passed, not closed).",
	}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return float64(len(m.sessions))
	})
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "leasegate", Name: "session_renewal_age_seconds",
		Help: "Longest time, over this process's live sessions, since the send time of the last confirmed grant or renewal of the lease; 0 with no session.",
	}, m.renewalAge)
	m.reg = reg
	for _, c := range []prometheus.Collector{m.store.Requests, m.store.TxnSeconds, m.kaFailures, live, age} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, fmt.Errorf("register metrics: %w", err)
		}
		m.collectors = append(m.collectors, c)
	}
	return m, nil
}

// unregister takes back what newMetrics registered (New failed).
func (m *metrics) unregister() {
	if m == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
	m.collectors = nil
}

// WithMetrics registers leasegate's metrics (see Metrics) on reg. A
// registerer that already holds them (a second coordinator on the same
// registry) is refused as invalid_input before any I/O: to put several
// coordinators on one registry, give each its own constant label with
// prometheus.WrapRegistererWith.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(o *options) error {
		if reg == nil {
			return errors.New("nil prometheus registerer")
		}
		o.registerer = reg
		return nil
	}
}

// count counts one finished request of operation by its disposition
// (store.Metrics.Count).
func (m *metrics) count(operation string, d Disposition) {
	if m == nil {
		return
	}
	m.store.Count(operation, d)
}

// storeMetrics is what the store records into: nil without metrics.
func (m *metrics) storeMetrics() *store.Metrics {
	if m == nil {
		return nil
	}
	return &m.store
}

// outcome counts a request that succeeds with done.
func (m *metrics) outcome(operation string, done Disposition, err error) {
	if m == nil {
		return
	}
	if err != nil {
		done = DispositionOf(err)
	}
	m.count(operation, done)
}

// sessionRenewed records a live session's confirmed grant or renewal, sent
// at sent.
func (m *metrics) sessionRenewed(s *Session, sent time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.sessions[s] = sent
	m.mu.Unlock()
}

// sessionEnded forgets a session that can no longer act; reason is set
// when its keepalive failed for good (lease_lost, deadline).
func (m *metrics) sessionEnded(s *Session, reason string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	delete(m.sessions, s)
	m.mu.Unlock()
	if reason != "" {
		m.kaFailures.WithLabelValues(reason).Inc()
	}
}

// keepAliveFailed counts one keepalive that etcd did not answer.
func (m *metrics) keepAliveFailed() {
	if m == nil {
		return
	}
	m.kaFailures.WithLabelValues("unreachable").Inc()
}

func (m *metrics) renewalAge() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var oldest time.Duration
	for _, sent := range m.sessions {
		oldest = max(oldest, now.Sub(sent))
	}
	return oldest.Seconds()
}
