package gateway

import (
	"errors"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus metrics. Labels are bounded: the
// procedure (fixed by the API), the code, the adapter kind (fixed by the
// configuration). No tenant, task, owner or lease label.
type metrics struct {
	requests *prometheus.CounterVec
	inFlight prometheus.Gauge
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasegate_gateway_requests_total",
			Help: "Calls answered by the gateway, by procedure and code.",
		}, []string{"method", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leasegate_gateway_dispatches_in_flight",
			Help: "Provider calls (Apply) under way.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leasegate_gateway_dispatch_duration_seconds",
			Help:    "How long a provider call (Apply) took, by adapter kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"kind"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.inFlight, m.duration} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("the gateway's metrics are already registered on this registerer")
			}
			return nil, err
		}
	}
	return m, nil
}

// codeName is a code's label value: "ok" for success.
func codeName(c connect.Code) string {
	if c == 0 {
		return "ok"
	}
	return c.String()
}

func (m *metrics) request(method string, c connect.Code) {
	m.requests.WithLabelValues(method, codeName(c)).Inc()
}
