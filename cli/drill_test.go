package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestDrillEndpoints runs a short drill against a three-member cluster
// with -o json: the object has exactly the keys docs/drill.md gives, the exit code
// follows pass, and the run's prefix is gone afterwards.
func TestDrillEndpoints(t *testing.T) {
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	eps := strings.Join(cl.Endpoints(), ",")
	r := execApp(t, call{}, "--endpoints", eps, "--prefix", "/drill-cli", "drill", "--trials", "16", "--seed", "3", "-o", "json")
	if r.code != cli.ExitDone {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	obj := lastJSON(t, r.stdout)
	if got := keysOf(obj); !slices.Equal(got, []string{"designs", "fixtures", "paired", "pass"}) {
		t.Fatalf("top-level keys %v", got)
	}
	if obj["pass"] != true {
		t.Fatalf("pass %v", obj["pass"])
	}
	fixtures := obj["fixtures"].([]any)
	if len(fixtures) != 11 {
		t.Fatalf("%d fixtures", len(fixtures))
	}
	if got := keysOf(fixtures[0].(map[string]any)); !slices.Equal(got, []string{"expected", "name", "observed", "pass"}) {
		t.Fatalf("fixture keys %v", got)
	}
	designs := obj["designs"].(map[string]any)
	if got := keysOf(designs); !slices.Equal(got, []string{"fenced", "naive"}) {
		t.Fatalf("designs %v", got)
	}
	want := []string{"cost", "faults", "manual_review", "reconciled", "residual_applied", "residual_stale_calls", "seconds",
		"seed_sequence", "seed_traffic_order", "total_violations", "trials", "unknown_operations", "violations"}
	for name, d := range designs {
		dm := d.(map[string]any)
		if got := keysOf(dm); !slices.Equal(got, want) {
			t.Fatalf("%s keys %v", name, got)
		}
		if dm["trials"].(float64) != 16 {
			t.Fatalf("%s trials %v", name, dm["trials"])
		}
	}
	if got := keysOf(obj["paired"].(map[string]any)); !slices.Equal(got, []string{"orders_queued_delta", "recovery_delta_seconds", "shoppers_warned_delta", "writes_held_delta_seconds"}) {
		t.Fatalf("paired keys %v", got)
	}
	if designs["fenced"].(map[string]any)["total_violations"].(float64) != 0 {
		t.Fatalf("fenced violations: %v", designs["fenced"])
	}
	resp, err := cl.Client(t).Get(lgtest.Ctx(t), "/drill-cli", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("%d keys left under the run's prefix (%v)", resp.Count, err)
	}
}

// TestDrillSecured runs a short drill against etcd with client TLS and
// auth, as a user whose role covers only the drill's prefix.
func TestDrillSecured(t *testing.T) {
	cl := embedtest.NewCluster(t, embedtest.WithTLS(), embedtest.WithAuth("root-pw"))
	f := cl.TLSFiles()
	cl.AddPrefixUser(t, "driller", "driller-pw", "/drill-tls/") // the one grant leasegate's prefix needs covers the drill
	// The prefix already holds a keyspace in use, as on any cluster leasegate
	// runs on: the drill runs inside it all the same.
	if r := execApp(t, call{}, "--endpoints", strings.Join(cl.Endpoints(), ","), "--cacert", f.CA, "--cert", f.ClientCert,
		"--key", f.ClientKey, "--user", "driller", "--password", "driller-pw", "--prefix", "/drill-tls",
		"claim", "--tenant", "t", "--task", "k", "--owner", "o", "--ttl", "30s"); r.code != cli.ExitDone {
		t.Fatalf("claim: exit %d\nstderr: %s", r.code, r.stderr)
	}
	r := execApp(t, call{}, "--endpoints", strings.Join(cl.Endpoints(), ","), "--cacert", f.CA, "--cert", f.ClientCert,
		"--key", f.ClientKey, "--user", "driller", "--password", "driller-pw", "--prefix", "/drill-tls",
		"drill", "--trials", "6", "-o", "json")
	if r.code != cli.ExitDone {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if obj := lastJSON(t, r.stdout); obj["pass"] != true {
		t.Fatalf("pass %v", obj["pass"])
	}
	// Without the client certificate the cluster refuses the connection:
	// the drill cannot run, and says so as a hold.
	r = execApp(t, call{}, "--endpoints", strings.Join(cl.Endpoints(), ","), "--cacert", f.CA, "--dial-timeout", "1s",
		"--user", "driller", "--password", "driller-pw", "--prefix", "/drill-tls", "drill", "--trials", "2")
	if r.code != cli.ExitUnavailable || !strings.HasPrefix(r.stderr, string(coordinator.AuthorityUnavailable)) {
		t.Fatalf("drill without a client certificate: exit %d, want %d\nstderr: %s", r.code, cli.ExitUnavailable, r.stderr)
	}
}

// TestDrillDeniedIsSix: a user whose role does not cover --prefix gets
// the drill's exit 6 (permission_denied), never a pass or a hold.
func TestDrillDeniedIsSix(t *testing.T) {
	cl := embedtest.NewCluster(t, embedtest.WithTLS(), embedtest.WithAuth("root-pw"))
	f := cl.TLSFiles()
	cl.AddPrefixUser(t, "elsewhere", "elsewhere-pw", "/elsewhere/")
	r := execApp(t, call{}, "--endpoints", strings.Join(cl.Endpoints(), ","), "--cacert", f.CA, "--cert", f.ClientCert,
		"--key", f.ClientKey, "--user", "elsewhere", "--password", "elsewhere-pw", "--prefix", "/drill-tls",
		"drill", "--trials", "2")
	if r.code != cli.ExitDenied || !strings.HasPrefix(r.stderr, string(coordinator.PermissionDenied)) {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, cli.ExitDenied, r.stdout, r.stderr)
	}
}

// TestDrillIgnoresEndpointsFromTheEnvironment: an exported
// LEASEGATE_ENDPOINTS does not send the drill to that cluster — it runs on
// its own embedded etcd and writes nothing there — and --keep, which needs
// a real cluster, is refused with it alone.
func TestDrillIgnoresEndpointsFromTheEnvironment(t *testing.T) {
	cl := embedtest.NewCluster(t)
	t.Setenv("LEASEGATE_ENDPOINTS", strings.Join(cl.Endpoints(), ","))
	r := execApp(t, call{}, "drill", "--trials", "2", "--design", "fenced")
	if r.code != cli.ExitDone || !strings.Contains(r.stdout, "embedded etcd") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	resp, err := cl.Client(t).Get(lgtest.Ctx(t), "", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("%d keys written to the environment's cluster (%v)", resp.Count, err)
	}
	if r := execApp(t, call{}, "drill", "--keep"); r.code != cli.ExitInvalid {
		t.Fatalf("--keep with endpoints from the environment only: exit %d (stderr %s)", r.code, r.stderr)
	}
	// On the command line they count (here the environment names another).
	t.Setenv("LEASEGATE_ENDPOINTS", "127.0.0.1:1")
	r = execApp(t, call{}, "--endpoints", strings.Join(cl.Endpoints(), ","), "--prefix", "/env", "drill", "--trials", "2",
		"--design", "fenced", "--keep")
	if r.code != cli.ExitDone || strings.Contains(r.stdout, "embedded etcd") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if resp, err := cl.Client(t).Get(lgtest.Ctx(t), "/env/drill/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count == 0 {
		t.Fatalf("the kept run is not under /env/drill/: %v keys (%v)", resp.Count, err)
	}
}

// TestDrillScenarioIncident prints the seed's incident in both designs,
// side by side against the seed's clock.
func TestDrillScenarioIncident(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "incident.svg")
	r := execApp(t, call{}, "drill", "--scenario", "incident", "--svg", svg)
	if r.code != cli.ExitDone {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"NAIVE", "FENCED", "02:13:27", "A-184", "B-771", "R-009", "REFUSED at the gateway", "graders: no violation"} {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("output lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, d := range []string{"naive", "fenced"} {
		b, err := os.ReadFile(strings.TrimSuffix(svg, ".svg") + "-" + d + ".svg")
		if err != nil || !bytes.HasPrefix(b, []byte("<svg ")) || !bytes.Contains(b, []byte(d+" design")) {
			t.Fatalf("%s picture: %v\n%.200s", d, err, b)
		}
	}
}

// TestDrillReplayEmbedded replays one trial on the embedded etcd the drill
// starts itself, and prints its trajectory.
func TestDrillReplayEmbedded(t *testing.T) {
	r := execApp(t, call{}, "drill", "--design", "naive", "--replay", "3", "--seed", "1")
	if r.code != cli.ExitDone {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"trial 3 design naive", "claim", "PromoteTarget", "end: writer"} {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("replay output lacks %q:\n%s", s, r.stdout)
		}
	}
}

// TestDrillFails: a drill whose naive design is caught by fewer than two
// graders (one trial of seed 7: only its traffic change before the writer
// moved) exits 1 after printing its report, with one line on stderr saying
// why.
func TestDrillFails(t *testing.T) {
	r := execApp(t, call{}, "drill", "--design", "naive", "--trials", "1", "--seed", "7", "-o", "json")
	if r.code != cli.ExitRefused {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, cli.ExitRefused, r.stdout, r.stderr)
	}
	if obj := lastJSON(t, r.stdout); obj["pass"] != false {
		t.Fatalf("pass %v", obj["pass"])
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "drill failed: the naive design is caught by 1 graders") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// TestDrillFailsASelfTestDesign: a graders' self-test design (here one
// that does nothing) fails the drill by liveness alone: exit 1, the
// liveness grader counting every trial, one line on stderr.
func TestDrillFailsASelfTestDesign(t *testing.T) {
	r := execApp(t, call{}, "drill", "--design", "do-nothing", "--trials", "2", "--seed", "7", "-o", "json")
	if r.code != cli.ExitRefused {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, cli.ExitRefused, r.stdout, r.stderr)
	}
	obj := lastJSON(t, r.stdout)
	d, _ := obj["designs"].(map[string]any)["do-nothing"].(map[string]any)
	if obj["pass"] != false || d == nil || d["violations"].(map[string]any)["liveness"] != float64(2) {
		t.Fatalf("report %v", obj)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "drill failed: the do-nothing design has") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// TestDrillBadInput: bad flags are exit 2 before anything starts.
func TestDrillBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"drill", "--design", "fast"},
		{"drill", "--trials", "0"},
		{"drill", "--parallel", "0"},
		{"drill", "--replay", "-2"},
		{"drill", "--keep"},
		{"drill", "--scenario", "outage"},
		{"drill", "--scenario", "incident", "--replay", "1"},
		{"drill", "--svg", "x.svg"},
		{"drill", "extra"},
	} {
		r := execApp(t, call{}, args...)
		if r.code != cli.ExitInvalid {
			t.Errorf("%v: exit %d, want %d (stderr %s)", args, r.code, cli.ExitInvalid, r.stderr)
		}
	}
}
