package ledger

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func TestTransitionsAreCounted(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	p := newProvider("db-promote")
	l, err := New(c, WithAdapters(p), WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	// A second ledger of the process on the same registry counts with the first.
	second, err := New(c, WithAdapters(p), WithMetrics(reg))
	if err != nil {
		t.Fatalf("a second ledger on one registry: %v", err)
	}
	e := &env{t: t, cl: cl, c: c, l: l, p: p, ctx: lgtest.Ctx(t)}
	e.s = lgtest.Session(t, c, "worker-a", 10*time.Second)
	e.g = lgtest.Claim(t, e.s, tenant, task)
	e.authorized(e.g, "op", promote("db-b"))
	if _, err := l.Dispatch(e.ctx, e.g, "op"); err != nil {
		t.Fatal(err)
	}
	_, err = l.Dispatch(e.ctx, e.g, "op")
	lgtest.Want(t, err, coordinator.IllegalTransition)
	e.authorized(e.g, "lost", promote("db-b"))
	p.set(func(p *provider) { p.dropResponse = true })
	if rec, err := l.Dispatch(e.ctx, e.g, "lost"); err != nil || rec.State != Unknown {
		t.Fatalf("dispatch: state %s, %v", rec.State, err)
	}
	if _, err := second.Reconcile(e.ctx, e.g); err != nil {
		t.Fatal(err)
	}
	if _, err := l.List(e.ctx, "", "", ""); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leasegate_ledger_transitions_total", map[string]string{"state": "CONFIRMED", "disposition": "ok"}, 2},
		{"leasegate_ledger_transitions_total", map[string]string{"state": "DISPATCHING", "disposition": "illegal_transition"}, 1},
		{"leasegate_ledger_records", map[string]string{"state": "CONFIRMED"}, 2},
		{"leasegate_reconciler_actions_total", map[string]string{"action": "confirmed"}, 1},
		{"leasegate_ledger_records", map[string]string{"state": "UNKNOWN"}, 0},
	} {
		if got := metricValue(t, reg, m.name, m.labels); got != m.want {
			t.Fatalf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}
