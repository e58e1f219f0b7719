package store

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the two of a coordinator's metrics (coordinator/metrics.go,
// which registers them) that every request records: its outcome and, for
// a Txn, its latency. A nil *Metrics (a coordinator without WithMetrics)
// records nothing and costs nothing.
type Metrics struct {
	Requests   *prometheus.CounterVec   // leasegate_requests_total{operation, disposition}
	TxnSeconds *prometheus.HistogramVec // leasegate_txn_duration_seconds{operation}
}

// Count counts one finished request of operation by its disposition: the
// receipt's or grant's on success, DispositionOf(err) otherwise.
func (m *Metrics) Count(operation string, d Disposition) {
	if m == nil {
		return
	}
	m.Requests.WithLabelValues(operation, dispositionLabel(d)).Inc()
}

// dispositionLabel is d as a label value: "unknown" for a disposition of no
// class (the zero value, which means "don't know", or a name the table does
// not have), so the label's values stay the table's.
func dispositionLabel(d Disposition) string {
	if d.Class() == ClassUnknown {
		return "unknown"
	}
	return string(d)
}

// Txn records the latency of one Txn of operation, failed ones too.
func (m *Metrics) Txn(operation string, d time.Duration) {
	if m == nil {
		return
	}
	m.TxnSeconds.WithLabelValues(operation).Observe(d.Seconds())
}
