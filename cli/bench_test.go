package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
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

// TestBenchSessionRenewsOnConnectionsOfItsOwn: leasegate bench scale
// --endpoints --user on a three-member cluster with auth, reached through
// a proxy per member. Once the session holds its grant, every connection
// its clients have open hangs while new ones get through (StallOpen): the
// keepalive cannot renew through its client's connection and asks the
// other members, each on a connection of its own, which logs in there with
// the configuration the global flags made (bench.Etcd.ClientConfig). The
// test waits for etcd itself to see the lease renewed, then heals; the run
// finishes. Without that configuration the fan-out's login goes through the
// client's hung connection, and the lease runs out.
func TestBenchSessionRenewsOnConnectionsOfItsOwn(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3), embedtest.WithAuth("root-pw"))
	cl.WaitLeader(t)
	cp := cl.ClientProxy(t)
	direct := cl.Client(t) // not through cp
	ctx := lgtest.Ctx(t)
	b := startApp(t, "--endpoints", strings.Join(cp.Endpoints(), ","), "--user", embedtest.RootUser, "--password", "root-pw", "-o", "json",
		"bench", "scale", "--sizes", "1", "--workers", "1", "--commits", "3", "--ttl", "6s", "--per-lock", "-1")
	b.stderr.waitFor(t, "1 grants: claimed")
	leases, err := direct.Leases(ctx)
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("the session's lease: %+v, %v", leases, err)
	}
	id := leases.Leases[0].ID
	cp.StallOpen()
	healed := false
	defer func() {
		if !healed {
			cp.Heal()
		}
	}()
	// etcd's time left (whole seconds) only falls until a renewal reaches
	// it, which no connection open at the stall can carry.
	lowest := int64(math.MaxInt64)
	for {
		r, err := direct.TimeToLive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.TTL < 0 {
			t.Fatal("the session's lease ran out while its client's connections hung: no renewal on a connection of its own")
		}
		if r.TTL > lowest {
			break
		}
		lowest = r.TTL
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	cp.Heal()
	healed = true
	r := b.wait(t)
	if obj := wantBench(t, r); len(obj["sizes"].([]any)) != 1 {
		t.Fatalf("report %v", obj)
	}
}

// progressLine is a bench progress line on stderr: what a step measured,
// then how far the run is.
var progressLine = regexp.MustCompile(`^\S.* {2}\[\d+/\d+\]$`)

// wantBench checks a bench run that finished: exit 0, on stderr nothing but
// progress lines — the plan first — and, with -o json, disposition ok and
// no interruption.
func wantBench(t *testing.T, r result) map[string]any {
	t.Helper()
	if r.code != cli.ExitDone {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "bench") || !strings.Contains(lines[0], "about") {
		t.Fatalf("stderr's first line %q is not the plan with its expected length", lines[0])
	}
	for _, l := range lines {
		if !progressLine.MatchString(l) {
			t.Fatalf("stderr line %q is not a progress line\nstderr: %s", l, r.stderr)
		}
	}
	if !strings.HasPrefix(r.stdout, "{") {
		return nil
	}
	obj := lastJSON(t, r.stdout)
	if obj["disposition"] != "ok" || obj["interrupted"] != nil {
		t.Fatalf("report %v; want ok, complete", obj)
	}
	return obj
}

// TestBenchProgressLines: not on a terminal, a bench run prints its plan
// and then a line per finished cell on stderr, as it goes.
func TestBenchProgressLines(t *testing.T) {
	t.Parallel()
	r := execApp(t, call{}, "bench", "takeover", "--unsafe-no-fsync", "--trials", "2", "--causes", "revoke",
		"--contenders", "acquire,election")
	wantBench(t, r)
	for _, w := range []string{
		`(?m)^bench takeover: 4 trials \(2 per cause and contender: revoke × acquire,election\), about \S+  \[0/4\]$`,
		`(?m)^trial 1/2, from deletion: revoke/(acquire|election) [0-9.]+ ms \(grant [0-9.]+\), revoke/(acquire|election) [0-9.]+ ms \(grant [0-9.]+\)  \[2/4\]$`,
		`(?m)^trial 2/2, from deletion: .*  \[4/4\]$`,
	} {
		if !regexp.MustCompile(w).MatchString(r.stderr) {
			t.Errorf("stderr has no line matching %s:\n%s", w, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "CAUSE") || strings.Contains(r.stdout, "INTERRUPTED") {
		t.Errorf("table:\n%s", r.stdout)
	}
}

// TestBenchInterrupted: a bench command whose context is cancelled (what
// SIGINT, SIGTERM or SIGHUP do, in main) prints what it measured, ends its
// table with why it is partial, says on stderr that it was interrupted —
// not outcome_unknown — and exits 130.
func TestBenchInterrupted(t *testing.T) {
	t.Parallel()
	sigterm := errors.New("terminated signal received")
	for _, tc := range []struct {
		name   string
		args   []string
		stopAt string // the progress line after which the "signal" comes
		done   string // how far it got
	}{
		{"takeover", []string{"bench", "takeover", "--unsafe-no-fsync", "--trials", "50", "--causes", "revoke", "--contenders", "acquire,election"},
			"trial 1/50", "after 2 of 100 trials"},
		{"cells", []string{"bench", "--unsafe-no-fsync", "--workers", "1", "--rounds", "20", "--duration", "50ms", "--variants", "commit,put"},
			"round 1/20", "of 40 cells"},
		{"scale", []string{"bench", "scale", "--unsafe-no-fsync", "--sizes", "10,20", "--commits", "2", "--ttl", "1s", "--per-lock", "-1"},
			"10 grants: owner keys gone", "of 6 steps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, format := range []string{"table", "json"} {
				ctx, cancel := context.WithCancelCause(lgtest.Ctx(t))
				defer cancel(nil)
				c := call{ctx: ctx, stdout: newSyncBuffer(), stderr: newSyncBuffer()}
				done := make(chan result, 1)
				go func() { done <- execApp(t, c, append([]string{"-o", format}, tc.args...)...) }()
				c.stderr.waitFor(t, tc.stopAt)
				cancel(sigterm)
				r := <-done
				if r.code != cli.ExitInterrupted {
					t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", format, r.code, cli.ExitInterrupted, r.stdout, r.stderr)
				}
				lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
				last := lines[len(lines)-1]
				if !strings.HasPrefix(last, "interrupted (terminated signal received) after ") || !strings.Contains(last, tc.done) ||
					!strings.HasSuffix(last, "the figures printed are what was measured until then") || strings.Contains(r.stderr, "outcome_unknown") {
					t.Fatalf("%s: stderr's last line %q; want the interrupt, its cause and how far it got\nstderr: %s", format, last, r.stderr)
				}
				for _, l := range lines[:len(lines)-1] {
					if !progressLine.MatchString(l) {
						t.Fatalf("%s: stderr line %q is neither progress nor the interrupt", format, l)
					}
				}
				if format == "table" {
					if !strings.Contains(r.stdout, "INTERRUPTED: interrupted (terminated signal received)") {
						t.Fatalf("table does not end with the interrupt:\n%s", r.stdout)
					}
					continue
				}
				var obj map[string]any
				if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil {
					t.Fatalf("json: %v\n%s", err, r.stdout)
				}
				if why, _ := obj["interrupted"].(string); !strings.Contains(why, tc.done) {
					t.Fatalf("report's interrupted %q; want how far it got\n%s", why, r.stdout)
				}
				results, _ := obj["results"].([]any)
				if sizes, _ := obj["sizes"].([]any); len(results) == 0 && len(sizes) == 0 {
					t.Fatalf("report has nothing measured:\n%s", r.stdout)
				}
			}
		})
	}
}
