package ledger

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasegate/leasegate/coordinator"
)

// metrics are the ledger's own Prometheus metrics (WithMetrics). Labels are
// bounded: state (the ledger's states), disposition (coordinator's list;
// "ok" for a transition that applied) and action (Reconcile's fixed names).
// A nil *metrics records nothing.
type metrics struct {
	transitions *prometheus.CounterVec
	records     *prometheus.GaugeVec
	actions     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "leasegate", Name: "ledger_transitions_total",
			Help: "Effect ledger transitions requested, by target state and disposition (ok: applied).",
		}, []string{"state", "disposition"}),
		records: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "leasegate", Name: "ledger_records",
			Help: "Effect ledger records by state, as this process last listed the whole ledger.",
		}, []string{"state"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "leasegate", Name: "reconciler_actions_total",
			Help: "Reconciler decisions on DISPATCHING and UNKNOWN effects, by action.",
		}, []string{"action"}),
	}
	var err error
	if m.transitions, err = register(reg, m.transitions); err != nil {
		return nil, err
	}
	if m.records, err = register(reg, m.records); err != nil {
		return nil, err
	}
	if m.actions, err = register(reg, m.actions); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c on reg, or shares the collector another ledger of
// this process registered there already: ledgers on one registry count
// together.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &are):
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register ledger metrics: %w", err)
}

func (m *metrics) transition(to State, d coordinator.Disposition) {
	if m != nil {
		m.transitions.WithLabelValues(string(to), string(d)).Inc()
	}
}

func (m *metrics) recordsIn(state State, n int) {
	if m != nil {
		m.records.WithLabelValues(string(state)).Set(float64(n))
	}
}

func (m *metrics) action(a string) {
	if m != nil {
		m.actions.WithLabelValues(a).Inc()
	}
}
