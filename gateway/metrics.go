package gateway

import (
	"errors"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/reflect/protoreflect"

	leasegatev1 "github.com/leasegate/leasegate/api/leasegate/v1"
)

// metrics are the gateway's Prometheus metrics. Labels are bounded: the
// procedure (fixed by the API; OtherMethod for any other path), the code, the adapter kind (fixed by the
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

// OtherMethod is the method label of a call refused before it reached a
// procedure of the API (a path under a service's prefix that names none):
// the label's values are the API's procedures and this, whatever paths
// callers send — a caller without a certificate must not grow the
// server's metrics by sending new paths.
const OtherMethod = "other"

// procedures are the method label values: every procedure of the API's
// services, as "leasegate.v1.WorkerService/Commit".
var procedures = func() map[string]bool {
	out := map[string]bool{}
	svcs := leasegatev1.File_leasegate_v1_leasegate_proto.Services()
	for i := range svcs.Len() {
		ms := svcs.Get(i).Methods()
		for j := range ms.Len() {
			out[procedureName(svcs.Get(i), ms.Get(j))] = true
		}
	}
	return out
}()

func procedureName(s protoreflect.ServiceDescriptor, m protoreflect.MethodDescriptor) string {
	return string(s.FullName()) + "/" + string(m.Name())
}

func (m *metrics) request(method string, c connect.Code) {
	if !procedures[method] {
		method = OtherMethod
	}
	m.requests.WithLabelValues(method, codeName(c)).Inc()
}
