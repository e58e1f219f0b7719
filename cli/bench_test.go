package cli_test

import (
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/lgtest"
)

// TestBench: tiny counts, embedded and against a cluster; the report's
// shape and that every asked variant ran. No figure is asserted.
func TestBench(t *testing.T) {
	t.Parallel()
	t.Run("embedded", func(t *testing.T) {
		r := execApp(t, call{}, "-o", "json", "bench", "--unsafe-no-fsync", "--workers", "1,2", "--rounds", "1",
			"--duration", "20ms", "--variants", "commit,bare-commit,claim-release")
		obj := wantBench(t, r)
		if obj["etcd"] != "embedded" || obj["fsync"] != "off" {
			t.Fatalf("report %v", obj)
		}
		results, _ := obj["results"].([]any)
		if len(results) != 6 {
			t.Fatalf("%d results, want 3 variants × 2 worker counts: %v", len(results), obj)
		}
		for _, x := range results {
			res := x.(map[string]any)
			if res["ops"].(float64) < 1 || res["errors"].(float64) != 0 {
				t.Errorf("result %v", res)
			}
		}
		if ratios, _ := obj["ratios"].([]any); len(ratios) != 2 { // commit / bare-commit at 1 and 2 workers: no mutex, no bare claim
			t.Errorf("ratios %v", ratios)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		e := newEnv(t)
		r := e.lg(t, "bench", "--workers", "2", "--rounds", "1", "--duration", "20ms")
		obj := wantBench(t, r)
		if obj["fsync"] != "cluster's own" || !strings.Contains(obj["etcd"].(string), e.endpoints[0]) {
			t.Fatalf("report %v", obj)
		}
		resp, err := e.client().Get(lgtest.Ctx(t), "/leasegate-bench-", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 0 {
			t.Fatalf("bench left %d keys behind (%v)", resp.Count, err)
		}
	})
	t.Run("takeover", func(t *testing.T) {
		r := execApp(t, call{}, "-o", "json", "bench", "takeover", "--unsafe-no-fsync", "--trials", "1", "--causes", "revoke",
			"--contenders", "acquire,election")
		obj := wantBench(t, r)
		if results, _ := obj["results"].([]any); len(results) != 2 {
			t.Fatalf("results %v", obj)
		}
	})
	t.Run("scale", func(t *testing.T) {
		r := execApp(t, call{}, "-o", "json", "bench", "scale", "--unsafe-no-fsync", "--sizes", "10", "--commits", "2",
			"--ttl", "1s", "--per-lock", "-1")
		obj := wantBench(t, r)
		if sizes, _ := obj["sizes"].([]any); len(sizes) != 1 || obj["per_lock"] != nil {
			t.Fatalf("report %v", obj)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		// No etcd at --endpoints: a hold within --dial-timeout, not at a
		// request's own timeout (10 s) or the run's end.
		r := execApp(t, call{}, "--endpoints", "127.0.0.1:1", "--dial-timeout", "500ms", "-o", "json", "bench", "--workers", "1",
			"--rounds", "1", "--duration", "20ms", "--variants", "bare-commit")
		want(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
		if !strings.Contains(r.stderr, "no connection to etcd at 127.0.0.1:1 within --dial-timeout 500ms") {
			t.Fatalf("stderr %q does not say what was not reached within what", r.stderr)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		e := newEnv(t)
		for _, args := range [][]string{
			{"bench", "--workers", "x"},
			{"bench", "--variants", "nope"},
			{"bench", "--unsafe-no-fsync"}, // with --endpoints
			{"bench", "--rounds", "0", "--workers", "1"},
			{"bench", "stray"},
			{"bench", "takeover", "--trials", "0"},
			{"bench", "takeover", "--causes", "fire"},
			{"bench", "takeover", "--ttl", "1500ms"},
			{"bench", "scale", "--sizes", "ten"},
			{"bench", "scale", "--sizes", "0"},
		} {
			want(t, e.lg(t, args...), cli.ExitInvalid, coordinator.InvalidInput)
		}
	})
}

// TestBenchIgnoresEndpointsFromTheEnvironment: a bench writes load, so an
// exported LEASEGATE_ENDPOINTS alone does not send it to a cluster — with
// the variable naming an address no etcd listens on, bench measures its own
// embedded etcd and succeeds. On the command line the address is the etcd
// it measures, here unreachable: a hold, exit 3.
func TestBenchIgnoresEndpointsFromTheEnvironment(t *testing.T) {
	const noEtcd = "127.0.0.1:1" // tcpmux's port: no etcd listens there
	t.Setenv("LEASEGATE_ENDPOINTS", noEtcd)
	r := execApp(t, call{}, "-o", "json", "bench", "--unsafe-no-fsync", "--workers", "1", "--rounds", "1", "--duration", "20ms",
		"--variants", "bare-commit")
	if obj := wantBench(t, r); obj["etcd"] != "embedded" {
		t.Fatalf("bench with %s in the environment measured %v", noEtcd, obj["etcd"])
	}
	// On the command line it counts (the environment names a live cluster).
	t.Setenv("LEASEGATE_ENDPOINTS", strings.Join(shared.Endpoints(), ","))
	r = execApp(t, call{}, "--endpoints", noEtcd, "--dial-timeout", "500ms", "-o", "json", "bench", "--workers", "1", "--rounds", "1", "--duration", "20ms",
		"--variants", "bare-commit")
	want(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
}
