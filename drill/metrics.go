package drill

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasegate/leasegate/coordinator"
)

// WithMetrics registers the metrics of the trials' coordinator (see
// coordinator.WithMetrics) on reg.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *config) error {
		if reg == nil {
			return errors.New("nil prometheus registerer")
		}
		c.Metrics = reg
		return nil
	}
}

func metricsOptions(reg prometheus.Registerer) []coordinator.Option {
	if reg == nil {
		return nil
	}
	return []coordinator.Option{coordinator.WithMetrics(reg)}
}
