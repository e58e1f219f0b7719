package coordinator_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// scrape reads the metrics over real HTTP and parses them with the
// Prometheus text parser; it also lints them with promlint.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d, %v", resp.StatusCode, err)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	return mfs
}

// value is the value of the series of family name with exactly labels (a
// counter's, gauge's or histogram's sample count), or -1 if there is none.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i, l := range m.GetLabel() {
			if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// series counts leasegate's series, leaving out the keepalive's, which
// appear when the first keepalive happens to run.
func series(mfs map[string]*dto.MetricFamily) int {
	n := 0
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "leasegate_") {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "keepalive" {
					continue next
				}
			}
			n++
		}
	}
	return n
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	ctx := lgtest.Ctx(t)
	reg := prometheus.NewRegistry()
	c := lgtest.Coordinator(t, cl, coordinator.WithMetrics(reg))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	mfs := scrape(t, srv.URL)
	if got := value(mfs, "leasegate_txn_duration_seconds", "operation", "new"); got < 1 {
		t.Errorf("txn histogram of New's realm Txns: %v samples, want some", got)
	}
	if got := value(mfs, "leasegate_sessions"); got != 0 {
		t.Errorf("sessions before any: %v, want 0", got)
	}

	a := lgtest.Session(t, c, "a", 10*time.Second)
	b := lgtest.Session(t, c, "b", 10*time.Second)
	g := lgtest.Claim(t, a, "tenant-x", "task-x")
	_, err := b.Claim(ctx, "tenant-x", "task-x")
	lgtest.Want(t, err, coordinator.Busy)
	if _, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "tenant-x", Task: "task-x", Operation: "op", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if _, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "tenant-x", Task: "task-x", Operation: "op", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	_, err = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "tenant-x", Task: "task-x", Operation: "op2", Value: []byte("v")})
	lgtest.Want(t, err, coordinator.VersionConflict)
	if err := c.Renew(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	lgtest.Want(t, c.Release(ctx, g), coordinator.ExpiredOwner)

	mfs = scrape(t, srv.URL)
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"leasegate_requests_total", []string{"disposition", "granted", "operation", "claim"}, 1},
		{"leasegate_requests_total", []string{"disposition", "busy", "operation", "claim"}, 1},
		{"leasegate_requests_total", []string{"disposition", "committed", "operation", "commit"}, 1},
		{"leasegate_requests_total", []string{"disposition", "historical_retry", "operation", "commit"}, 1},
		{"leasegate_requests_total", []string{"disposition", "version_conflict", "operation", "commit"}, 1},
		{"leasegate_requests_total", []string{"disposition", "renewed", "operation", "renew"}, 1},
		{"leasegate_requests_total", []string{"disposition", "released", "operation", "release"}, 1},
		{"leasegate_requests_total", []string{"disposition", "expired_owner", "operation", "release"}, 1},
		{"leasegate_txn_duration_seconds", []string{"operation", "claim"}, 2},
		{"leasegate_txn_duration_seconds", []string{"operation", "commit"}, 3},
		{"leasegate_txn_duration_seconds", []string{"operation", "release"}, 2},
		{"leasegate_sessions", nil, 2},
	} {
		if got := value(mfs, w.name, w.labels...); got != w.want {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
	if age := value(mfs, "leasegate_session_renewal_age_seconds"); age <= 0 || age > 10 {
		t.Errorf("renewal age %v, want within the 10s TTL", age)
	}

	// A revoked lease ends its session: one fewer live, one lease_lost.
	if err := c.RevokeLease(ctx, b.Lease()); err != nil {
		t.Fatal(err)
	}
	lgtest.Wait(t, b.Done(), "the revoked session to end")
	mfs = scrape(t, srv.URL)
	if got := value(mfs, "leasegate_sessions"); got != 1 {
		t.Errorf("sessions after a revoke: %v, want 1", got)
	}
	if got := value(mfs, "leasegate_keepalive_failures_total", "reason", "lease_lost"); got != 1 {
		t.Errorf("keepalive failures lease_lost: %v, want 1", got)
	}

	// Bounded cardinality: more tenants and tasks add no series, and no
	// label names a tenant, task, owner or lease.
	before := series(mfs)
	for i := range 5 {
		g := lgtest.Claim(t, a, fmt.Sprintf("tenant-%d", i), fmt.Sprintf("task-%d", i))
		if err := c.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	mfs = scrape(t, srv.URL)
	if after := series(mfs); after != before {
		t.Errorf("series grew from %d to %d with new tasks", before, after)
	}
	allowed := map[string]bool{"operation": true, "disposition": true, "reason": true, "state": true, "action": true}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.HasPrefix(name, "leasegate_") && !allowed[l.GetName()] {
					t.Errorf("%s has label %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func TestWithMetricsRefusals(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	ctx := lgtest.Ctx(t)
	_, err := coordinator.New(ctx, cl.Client(t), coordinator.WithMetrics(nil))
	lgtest.Want(t, err, coordinator.InvalidInput)

	// A registry that already holds the metrics is refused before any I/O:
	// nothing is written, not even the realm of a fresh prefix.
	reg := prometheus.NewRegistry()
	lgtest.Coordinator(t, cl, coordinator.WithMetrics(reg))
	_, err = coordinator.New(ctx, cl.Client(t), coordinator.WithMetrics(reg), coordinator.WithPrefix("/second"))
	lgtest.Want(t, err, coordinator.InvalidInput)
	resp, err := cl.Client(t).Get(ctx, "/second/realm")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("a refused New wrote the realm")
	}
	// Two coordinators on one registry, told apart by a constant label.
	shared := prometheus.NewRegistry()
	for _, name := range []string{"one", "two"} {
		lgtest.Coordinator(t, cl, coordinator.WithMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"coordinator": name}, shared)))
	}
}

// TestClosedSessionIsNoKeepAliveFailure: a session closed by its owner
// leaves the live count and counts no keepalive failure of any reason.
func TestClosedSessionIsNoKeepAliveFailure(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	reg := prometheus.NewRegistry()
	c := lgtest.Coordinator(t, cl, coordinator.WithMetrics(reg))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	s := lgtest.Session(t, c, "a", 10*time.Second)
	if err := s.Close(lgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	mfs := scrape(t, srv.URL)
	if got := value(mfs, "leasegate_sessions"); got != 0 {
		t.Errorf("sessions after Close: %v, want 0", got)
	}
	if mf := mfs["leasegate_keepalive_failures_total"]; mf != nil {
		for _, m := range mf.GetMetric() {
			t.Errorf("a closed session counted a keepalive failure: %v", m)
		}
	}
}

// TestMetricsRegistrationFailureLeavesNothing: New whose metrics collide
// with a collector already on the registry fails, and takes back what it
// had registered, so that New on the same registry succeeds once the
// collision is gone.
func TestMetricsRegistrationFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	reg := prometheus.NewRegistry()
	// The same descriptor as New's gauge (a registry never takes a name
	// back with another help text), registered first: New's is refused.
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "leasegate", Name: "sessions",
		Help: "Sessions of this process that can still act (lease not lost, local deadline not passed, not closed)."})
	if err := reg.Register(clash); err != nil {
		t.Fatal(err)
	}
	if _, err := coordinator.New(lgtest.Ctx(t), cl.Client(t), coordinator.WithMetrics(reg)); err == nil {
		t.Fatal("New registered metrics over a collector of the same name")
	}
	reg.Unregister(clash)
	if _, err := coordinator.New(lgtest.Ctx(t), cl.Client(t), coordinator.WithMetrics(reg)); err != nil {
		t.Fatalf("New after the collision is gone: %v (the failed New left collectors registered)", err)
	}
}
