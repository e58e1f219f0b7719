package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// runOut is run's JSON result (or its error object, for ownership lost).
type runOut struct {
	Disposition string            `json:"disposition"`
	Grant       coordinator.Grant `json:"grant"`
	Child       struct {
		ExitCode int    `json:"exit_code"`
		Signal   string `json:"signal"`
		Stopped  string `json:"stopped_with"`
	} `json:"child"`
}

func runArgs(task string, extra ...string) []string {
	return append([]string{"run", "--tenant", "tenant", "--task", task, "--owner", "runner", "--ttl", "2s"}, extra...)
}

// wantUnowned checks that the task has no owner and the lease is gone:
// nothing of the run outlives it.
func (e *env) wantUnowned(t *testing.T, task string, lease int64) {
	t.Helper()
	o, err := e.co.Owner(lgtest.Ctx(t), "tenant", task)
	if err != nil || o.Owned() {
		t.Fatalf("after run: %+v, %v", o, err)
	}
	ttl, err := e.client().TimeToLive(lgtest.Ctx(t), clientv3.LeaseID(lease))
	if err != nil || ttl.TTL != -1 {
		t.Fatalf("run's lease %d still there: ttl %d, %v", lease, ttl.TTL, err)
	}
}

// TestRunChildEnvironment: the child sees the grant in its environment,
// and the grant is released when it exits.
func TestRunChildEnvironment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	envFile := e.dir + "/env"
	r := e.lg(t, runArgs("task", "--", "sh", "-c", `env > "$1"`, "sh", envFile)...)
	want(t, r, cli.ExitDone, coordinator.Released)
	var out runOut
	decode(t, r, &out)
	g := out.Grant
	if out.Child.ExitCode != 0 || g.Tenant != "tenant" || g.Task != "task" || g.Owner != "runner" || g.Epoch == 0 {
		t.Fatalf("run output %+v", out)
	}
	env := map[string]string{}
	for _, line := range strings.Split(readFile(t, envFile), "\n") {
		if k, v, found := strings.Cut(line, "="); found && strings.HasPrefix(k, "LEASEGATE_") {
			env[k] = v
		}
	}
	for k, v := range map[string]string{
		"LEASEGATE_TENANT": "tenant", "LEASEGATE_TASK": "task", "LEASEGATE_OWNER": "runner",
		"LEASEGATE_EPOCH": strconv.FormatInt(g.Epoch, 10), "LEASEGATE_LEASE": fmt.Sprintf("%016x", g.Lease),
		"LEASEGATE_REALM": e.co.Realm(), "LEASEGATE_ENDPOINTS": strings.Join(e.endpoints, ","), "LEASEGATE_PREFIX": e.prefix,
	} {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	var inEnv coordinator.Grant
	if err := json.Unmarshal([]byte(env["LEASEGATE_GRANT"]), &inEnv); err != nil || inEnv != g {
		t.Errorf("LEASEGATE_GRANT %q: %+v, %v; want %+v", env["LEASEGATE_GRANT"], inEnv, err, g)
	}
	e.wantUnowned(t, "task", g.Lease)
}

// TestRunExitStatus: run exits with its child's status, 128+n for a
// signal n, and releases the grant either way.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		script string
		code   int
		signal string
	}{
		{"exit 7", "exit 7", 7, ""},
		{"killed by SIGUSR1", "kill -USR1 $$", 128 + 10, "user defined signal 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := unsafeChars.ReplaceAllString(tc.name, "-")
			r := e.lg(t, runArgs(task, "--", "sh", "-c", tc.script)...)
			if r.code != tc.code || r.stderr != "" {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			var out runOut
			decode(t, r, &out)
			if out.Disposition != "released" || out.Child.ExitCode != tc.code || out.Child.Signal != tc.signal || out.Child.Stopped != "" {
				t.Fatalf("run output %+v", out)
			}
			e.wantUnowned(t, task, out.Grant.Lease)
		})
	}
}

// child is a long-running child: it prints its lease and grant, then
// "ready", and on SIGTERM prints "child got SIGTERM" and exits 9. Its
// stderr is silenced (its shell reports the killed sleep there), so that
// stderr holds leasegate's lines only.
const child = `exec 2>/dev/null
trap 'echo child got SIGTERM; exit 9' TERM
echo "lease=$LEASEGATE_LEASE"
echo "grant=$LEASEGATE_GRANT"
echo ready
while :; do sleep 1; done`

// startChild starts `run` with script as its child and waits for "ready".
func (e *env) startChild(t *testing.T, task, script string, extra ...string) (*background, coordinator.Grant) {
	t.Helper()
	b := e.start(t, runArgs(task, append(extra, "--", "sh", "-c", script)...)...)
	return b, grantOfChild(t, b.stdout.waitFor(t, "ready\n"))
}

// TestRunOwnershipLost: whichever way ownership goes, run sees it on its
// watch, stops the child with SIGTERM, exits 5, and says why.
func TestRunOwnershipLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, e *env, g coordinator.Grant)
		want coordinator.Disposition
	}{
		{"lease revoked", func(t *testing.T, e *env, g coordinator.Grant) {
			want(t, e.lg(t, "lease", "revoke", "--lease", strconv.FormatInt(g.Lease, 10)), cli.ExitDone, "ok")
		}, coordinator.ExpiredOwner},
		{"grant released by an operator", func(t *testing.T, e *env, g coordinator.Grant) {
			want(t, e.lg(t, "release", "--grant", e.grantFile(t, g)), cli.ExitDone, coordinator.Released)
		}, coordinator.ExpiredOwner},
		{"owner key rewritten", func(t *testing.T, e *env, g coordinator.Grant) {
			if _, err := e.client().Put(lgtest.Ctx(t), e.co.Keys().Owner(g.Tenant, g.Task), "intruder"); err != nil {
				t.Fatal(err)
			}
		}, coordinator.StaleOwner},
		{"realm rotated", func(t *testing.T, e *env, g coordinator.Grant) {
			want(t, e.lg(t, "realm", "rotate"), cli.ExitDone, "ok")
		}, coordinator.GenerationMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: rotating the realm ends every run of the prefix.
			task := unsafeChars.ReplaceAllString(tc.name, "-")
			b, g := e.startChild(t, task, child)
			tc.lose(t, e, g)
			r := b.wait(t)
			if r.code != cli.ExitOwnershipLost {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, cli.ExitOwnershipLost, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "child got SIGTERM") {
				t.Fatalf("the child was not sent SIGTERM:\n%s", r.stdout)
			}
			var out runOut
			decode(t, r, &out)
			if out.Disposition != string(tc.want) || out.Grant != g || out.Child.Stopped != "SIGTERM" || out.Child.ExitCode != 9 {
				t.Fatalf("run output %+v; want %s", out, tc.want)
			}
			wantRefusalLine(t, r, tc.want)
			ttl, err := e.client().TimeToLive(lgtest.Ctx(t), clientv3.LeaseID(g.Lease))
			if err != nil || ttl.TTL != -1 {
				t.Fatalf("run's lease %d outlived it: ttl %d, %v", g.Lease, ttl.TTL, err)
			}
		})
	}
}

// TestRunKillAfter: a child that ignores SIGTERM gets SIGKILL after
// --kill-after.
func TestRunKillAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b, g := e.startChild(t, "task", `exec 2>/dev/null
trap '' TERM
echo "grant=$LEASEGATE_GRANT"
echo ready
while :; do sleep 1; done`, "--kill-after", "300ms")
	want(t, e.lg(t, "lease", "revoke", "--lease", strconv.FormatInt(g.Lease, 10)), cli.ExitDone, "ok")
	r := b.wait(t)
	if r.code != cli.ExitOwnershipLost {
		t.Fatalf("exit %d, want %d\nstderr: %s", r.code, cli.ExitOwnershipLost, r.stderr)
	}
	var out runOut
	decode(t, r, &out)
	if out.Disposition != string(coordinator.ExpiredOwner) || out.Child.Stopped != "SIGKILL" || out.Child.ExitCode != 128+9 || out.Child.Signal != "killed" {
		t.Fatalf("run output %+v", out)
	}
	wantRefusalLine(t, r, coordinator.ExpiredOwner)
}

// TestRunBusy: without --wait, a held task is refused with busy and the
// child never starts; with --wait, run waits (on a watch) until the holder
// releases, then runs the child under a newer epoch.
func TestRunBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	held, heldFile := e.claim(t, "tenant", "task", "holder", "2m") // released below; a TTL far past a loaded machine's run
	t.Run("refused without --wait", func(t *testing.T) {
		r := e.lg(t, runArgs("task", "--", "sh", "-c", "echo child ran")...)
		obj := want(t, r, cli.ExitRefused, coordinator.Busy)
		if strings.Contains(r.stdout, "child ran") {
			t.Fatal("the child ran without the grant")
		}
		if h, _ := obj["holder"].(map[string]any); h["owner"] != "holder" {
			t.Fatalf("holder %v", obj["holder"])
		}
	})
	t.Run("gives up after --wait-timeout", func(t *testing.T) {
		r := e.lg(t, runArgs("task", "--wait", "--wait-timeout", "1s", "--", "sh", "-c", "echo child ran")...)
		want(t, r, cli.ExitRefused, coordinator.Busy)
		if strings.Contains(r.stdout, "child ran") || !strings.Contains(r.stderr, "--wait-timeout 1s passed") {
			t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
		}
	})
	t.Run("waits with --wait", func(t *testing.T) {
		b := e.start(t, append([]string{"--log-level", "debug"},
			runArgs("task", "--wait", "--", "sh", "-c", `echo "epoch=$LEASEGATE_EPOCH"`)...)...)
		b.stderr.waitForLogField(t, "disposition", string(coordinator.Busy))
		want(t, e.lg(t, "release", "--grant", heldFile), cli.ExitDone, coordinator.Released)
		r := b.wait(t)
		if r.code != cli.ExitDone {
			t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
		}
		var out runOut
		decode(t, r, &out)
		if out.Disposition != "released" || out.Grant.Epoch <= held.Epoch ||
			!strings.Contains(r.stdout, "epoch="+strconv.FormatInt(out.Grant.Epoch, 10)) {
			t.Fatalf("run output %+v after a holder at epoch %d\nstdout: %s", out, held.Epoch, r.stdout)
		}
	})
}

// TestRunInterrupted: cancelling run (SIGINT in the binary) sends the
// child SIGTERM, releases the grant and exits with the child's status.
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b, g := e.startChild(t, "task", `echo "grant=$LEASEGATE_GRANT"
echo ready
exec sleep 60`)
	b.cancel()
	r := b.wait(t)
	if r.code != 128+15 || r.stderr != "" {
		t.Fatalf("exit %d, want %d; stderr %q", r.code, 128+15, r.stderr)
	}
	var out runOut
	decode(t, r, &out)
	if out.Disposition != "released" || out.Child.Stopped != "SIGTERM" || out.Child.Signal != "terminated" {
		t.Fatalf("run output %+v", out)
	}
	e.wantUnowned(t, "task", g.Lease)
}

// TestRunChildGetsNoCredentials: the credentials run read from the
// environment do not reach its child; the grant and the endpoints do.
func TestRunChildGetsNoCredentials(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithAuth("s3cret"))
	out := asProcess(t, []string{"LEASEGATE_ENDPOINTS=" + strings.Join(cl.Endpoints(), ","), "LEASEGATE_USER=root",
		"LEASEGATE_PASSWORD=s3cret", "LEASEGATE_UNRELATED=kept"},
		"run", "--tenant", "t", "--task", "k", "--owner", "o", "--", "env")
	for _, kv := range strings.Split(out, "\n") {
		if strings.HasPrefix(kv, "LEASEGATE_USER=") || strings.HasPrefix(kv, "LEASEGATE_PASSWORD=") || strings.Contains(kv, "s3cret") {
			t.Fatalf("the child's environment holds %q", kv)
		}
	}
	if !strings.Contains(out, "\nLEASEGATE_GRANT=") || !strings.Contains(out, "\nLEASEGATE_UNRELATED=kept\n") {
		t.Fatalf("the child's environment lacks the grant or an unrelated variable:\n%s", out)
	}
}

// TestRunSeesALossBeforeACompaction: run's ownership watch is cut (the
// connection lost) while the owner key is deleted and etcd compacts past the
// deletion; the watch cannot resume from where it was (ErrCompacted), so run
// asks etcd whether the grant is current (Coordinator.Current), learns it is
// not, stops the child and exits 5. Resuming from the compaction without
// asking would miss the deletion and leave the child running.
func TestRunSeesALossBeforeACompaction(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	direct := newEnvOn(t, cl)
	proxied := &env{endpoints: cp.Endpoints(), prefix: direct.prefix, co: direct.co, dir: direct.dir}
	b, g := proxied.startChild(t, "task", child, "--ttl", "30s")

	cp.Cut()
	ctx := lgtest.Ctx(t)
	owner := direct.co.Keys().Owner(g.Tenant, g.Task)
	if _, err := direct.client().Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	resp, err := direct.client().Put(ctx, direct.prefix+"-elsewhere", "moves the revision on")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.client().Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	cp.Heal()

	r := b.wait(t)
	if r.code != cli.ExitOwnershipLost || !strings.Contains(r.stdout, "child got SIGTERM") {
		t.Fatalf("exit %d, want %d with the child stopped\nstdout: %s\nstderr: %s", r.code, cli.ExitOwnershipLost, r.stdout, r.stderr)
	}
	wantRefusalLine(t, r, coordinator.ExpiredOwner)
}

// TestRunReleaseFailureIsReportedOnce: the child ends by itself while etcd
// cannot be reached, so releasing its grant fails: run exits with the
// child's status, prints its result with the release's disposition, and one
// line on stderr for the release — reported by the app, once.
func TestRunReleaseFailureIsReportedOnce(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cp := cl.ClientProxy(t)
	e := &env{endpoints: cp.Endpoints(), prefix: newEnvOn(t, cl).prefix, dir: t.TempDir()}
	fifo := filepath.Join(e.dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	b := e.start(t, append([]string{"--command-timeout", "1s"},
		runArgs("task", "--ttl", "30s", "--", "sh", "-c", `echo ready; read x < "$0"; exit 3`, fifo)...)...)
	b.stdout.waitFor(t, "ready\n")
	cp.Cut()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("go\n")
	_ = f.Close()

	r := b.wait(t)
	if r.code != 3 {
		t.Fatalf("exit %d, want the child's 3\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var out runOut
	decode(t, r, &out)
	if out.Child.ExitCode != 3 || coordinator.Disposition(out.Disposition).Class() != coordinator.ClassUnavailable &&
		coordinator.Disposition(out.Disposition) != coordinator.OutcomeUnknown {
		t.Fatalf("run output %+v: want the child's status and the release's failure", out)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, out.Disposition+": ") {
		t.Fatalf("stderr %q is not one line naming %s", r.stderr, out.Disposition)
	}
}
