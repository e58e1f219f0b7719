package coordinator_test

import (
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestSessionSurvivesHungMembers: members hang for a session's client
// (their proxies hold every byte) for longer than the TTL, while the
// cluster keeps its quorum. Each renewal attempt that lands on a hung
// member gives up in time and the next goes to another member, so the
// session lives; the first failure is logged at warn with the member and
// counted as it happens. Two sessions: one on clientv3's default balancer
// with two of three members hung, one whose client's balancer sticks to
// one member (pick_first) with that member hung — its retries must leave
// the balancer to reach another. When no quorum answers at all, the session
// is still lost, at its local deadline, with its cause.
func TestSessionSurvivesHungMembers(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	cl.WaitLeader(t)
	ctx := lgtest.Ctx(t)
	cp := cl.ClientProxy(t)
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	c := lgtest.CoordinatorOf(t, cp.Client(t), coordinator.WithLogger(zap.New(core)), coordinator.WithMetrics(reg))
	direct := lgtest.Coordinator(t, cl)
	const ttl = 5 * time.Second
	s := lgtest.Session(t, c, "worker", ttl)
	g := lgtest.Claim(t, s, "t", "k")
	sticky := cl.ClientProxy(t)
	scli, err := sticky.NewClient(grpc.WithDisableServiceConfig(), grpc.WithDefaultServiceConfig(`{"loadBalancingPolicy":"pick_first"}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = scli.Close() })
	ss := lgtest.Session(t, lgtest.CoordinatorOf(t, scli), "sticky", ttl)
	sg := lgtest.Claim(t, ss, "t", "sticky")

	hung := map[string]bool{cp.Endpoints()[0][len("http://"):]: true, cp.Endpoints()[1][len("http://"):]: true}
	cp.Member(0).Stall()
	cp.Member(1).Stall()
	sticky.Member(0).Stall() // pick_first's member: the first endpoint
	stalled := time.Now()
	// What is tested is time passing: 1.5 TTLs with members hung, during
	// which neither session may end.
	select {
	case <-s.Done():
		t.Fatalf("session lost with a member still answering: %v", s.Err())
	case <-ss.Done():
		t.Fatalf("session on a pick_first client lost with two members still answering: %v", ss.Err())
	case <-time.After(3 * ttl / 2):
	}
	for _, x := range []struct {
		s *coordinator.Session
		g coordinator.Grant
	}{{s, g}, {ss, sg}} {
		if !x.s.Deadline().After(stalled.Add(ttl)) {
			t.Fatalf("%s: deadline %v: not renewed past the TTL since the stall at %v", x.s.Owner(), x.s.Deadline(), stalled)
		}
		if err := direct.Current(ctx, x.g); err != nil {
			t.Fatalf("%s: the grant after 1.5 TTLs with members hung: %v", x.s.Owner(), err)
		}
	}
	// A failed attempt is the warning naming a member and the attempt's
	// error (matched by its level and fields, never by its wording).
	warned := logs.FilterLevelExact(zapcore.WarnLevel).Filter(func(e observer.LoggedEntry) bool {
		m := e.ContextMap()
		_, member := m["member"]
		_, cause := m["error"]
		return member && cause
	}).All()
	if len(warned) == 0 {
		t.Fatal("no warning of a failed keepalive attempt")
	}
	if m, _ := warned[0].ContextMap()["member"].(string); !hung[m] {
		t.Fatalf("warning names member %q, want one of the hung %v", m, hung)
	}
	if got := counter(t, reg, "leasegate_keepalive_failures_total", "unreachable"); got < 1 {
		t.Fatalf("keepalive_failures_total{unreachable} = %v while attempts failed, want it counted as they happen", got)
	}

	// No quorum: the members behind the one still answering stop. And
	// every member hangs for the sticky session: its renewal attempts hang,
	// and cannot hold Done open past its local deadline.
	cp.Member(0).Heal()
	cp.Member(1).Heal()
	sticky.Stall()
	cl.Member(0).Stop(t)
	cl.Member(1).Stop(t)
	for _, x := range []*coordinator.Session{s, ss} {
		var deadline time.Time
		for open := true; open; {
			deadline = x.Deadline() // a renewal may still move it, before the faults bite
			select {
			case <-x.Done():
				open = false
			case <-time.After(time.Until(deadline) + 2*time.Second):
				if x.Deadline().Equal(deadline) {
					t.Fatalf("%s: Done still open %v past the local deadline %v", x.Owner(), time.Since(deadline), deadline)
				}
			}
		}
		if !errors.Is(x.Err(), coordinator.ErrSessionDeadline) {
			t.Fatalf("%s: Err() = %v, want ErrSessionDeadline", x.Owner(), x.Err())
		}
		if time.Now().Before(deadline) {
			t.Fatalf("%s: Done before the local deadline %v", x.Owner(), deadline)
		}
	}
	if got := counter(t, reg, "leasegate_keepalive_failures_total", "deadline"); got != 1 {
		t.Fatalf("keepalive_failures_total{deadline} = %v, want 1", got)
	}
	sticky.Heal()
}

// counter is the value of the counter name with the one label value.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	return value(byName, name, "reason", label)
}

// withoutClientConfig runs the secured test as a library user who gave New
// no WithClientConfig: the keepalive's fan-out then logs in through the
// client's balanced connection, which may pick a hung member, and the
// session is lost in most runs (3 of 3, then 1 of 2, measured with -count).
var withoutClientConfig = flag.Bool("without-client-config", false, "TestSessionSurvivesHungMembersSecured: leave out coordinator.WithClientConfig")

// TestSessionSurvivesHungMembersSecured is TestSessionSurvivesHungMembers
// on a cluster with TLS and authentication: two members hang for the
// session's client for longer than the TTL while the third answers. The
// renewals that leave the client's connection for one of their own must
// still be TLS'd and authenticated in time, so the session lives.
func TestSessionSurvivesHungMembersSecured(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3), embedtest.WithTLS(), embedtest.WithAuth("root-pw"))
	cl.WaitLeader(t)
	ctx := lgtest.Ctx(t)
	cp := cl.ClientProxy(t)
	core, logs := observer.New(zapcore.DebugLevel)
	t.Cleanup(func() {
		if t.Failed() {
			for _, e := range logs.All() {
				t.Logf("%s %s %s %v", e.Time.Format("15:04:05.000"), e.Level, e.Message, e.ContextMap())
			}
		}
	})
	cfg, err := cp.Config()
	if err != nil {
		t.Fatal(err)
	}
	opts := []coordinator.Option{coordinator.WithLogger(zap.New(core))}
	if !*withoutClientConfig {
		opts = append(opts, coordinator.WithClientConfig(cfg))
	}
	c := lgtest.CoordinatorOf(t, cp.Client(t), opts...)
	direct := lgtest.Coordinator(t, cl)
	const ttl = 5 * time.Second
	s := lgtest.Session(t, c, "worker", ttl)
	g := lgtest.Claim(t, s, "t", "k")

	cp.Member(0).Stall()
	cp.Member(1).Stall()
	stalled := time.Now()
	select {
	case <-s.Done():
		t.Fatalf("session lost with a member still answering: %v", s.Err())
	case <-time.After(3 * ttl / 2):
	}
	if !s.Deadline().After(stalled.Add(ttl)) {
		t.Fatalf("deadline %v: not renewed past the TTL since the stall at %v", s.Deadline(), stalled)
	}
	if err := direct.Current(ctx, g); err != nil {
		t.Fatalf("the grant after 1.5 TTLs with members hung: %v", err)
	}
	cp.Heal()
}
