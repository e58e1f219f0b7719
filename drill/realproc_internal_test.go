package drill

import (
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestWorkerThatCannotStartCarriesItsDisposition runs a real-provider
// worker process (this test binary again, as the drill runs it) that
// cannot start, and reads the error the drill's side of it recorded: a
// naive worker (the design that dials etcd itself) that could not reach
// etcd is a hold (authority_unavailable), one etcd's auth refused is a
// denial (permission_denied, unauthenticated), and one that reached etcd
// but could not build its adapters — here it is given no servers at all,
// which it finds after etcd — is the drill's own failure, naming no
// disposition (its invalid_input is the drill's input to it, not the
// caller's); so is a fenced worker given no gateway. No PostgreSQL or
// BIND is needed: no case gets that far.
func TestWorkerThatCannotStartCarriesItsDisposition(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithAuth("root-pw"))
	cl.AddPrefixUser(t, "elsewhere", "elsewhere-pw", "/elsewhere/")
	login := func(user, password string) *workerClient {
		wc, err := newWorkerClient(&config{clientConfig: &clientv3.Config{Username: user, Password: password}}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return wc
	}
	for _, tc := range []struct {
		name      string
		design    Design
		endpoints []string
		client    *workerClient
		want      coordinator.Disposition // "": none named, the drill's own failure
	}{
		{"etcd unreachable", Naive, []string{"127.0.0.1:1"}, nil, coordinator.AuthorityUnavailable}, // tcpmux's port: no etcd
		{"a role without the prefix", Naive, cl.Endpoints(), login("elsewhere", "elsewhere-pw"), coordinator.PermissionDenied},
		{"a wrong password", Naive, cl.Endpoints(), login("elsewhere", "not-the-password"), coordinator.Unauthenticated},
		{"no servers to build adapters on", Naive, cl.Endpoints(), login(embedtest.RootUser, cl.RootPassword()), ""},
		{"a fenced worker given no gateway", Fenced, nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &realWorld{ctx: lgtest.Ctx(t), traj: &Trajectory{}, exited: map[string]bool{}, design: tc.design}
			wk := w.newWorker("worker-a", true)
			wk.runProc(workerSpec{Endpoints: tc.endpoints, Client: tc.client, Prefix: "/drill-worker/trials", Design: tc.design,
				Task: "incident-0", Name: wk.name, First: true})
			err := errors.Join(w.errs...)
			if err == nil || !strings.Contains(err.Error(), "could not start") || !strings.Contains(err.Error(), "exit status 2") {
				t.Fatalf("the drill's error for a worker that could not start: %v", err)
			}
			got := coordinator.DispositionOf(err)
			if named := got != coordinator.OutcomeUnknown || errors.Is(err, coordinator.ErrOutcomeUnknown); !named {
				got = ""
			}
			if got != tc.want {
				t.Fatalf("disposition %q, want %q: %v", got, tc.want, err)
			}
		})
	}
}
