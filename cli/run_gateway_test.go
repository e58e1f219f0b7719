package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// gatewayRunArgs is runArgs through the gateway: no --owner (it is the
// certificate's identity).
func gatewayRunArgs(task string, extra ...string) []string {
	return append([]string{"run", "--tenant", "acme", "--task", task, "--ttl", "2s"}, extra...)
}

// run through the gateway claims, runs the child with the grant and the
// gateway's URL in its environment, keeps the lease alive from this
// process (a child outliving several TTLs keeps the task), releases, and
// exits with the child's status: the same JSON as through --endpoints.
func TestRunThroughTheGateway(t *testing.T) {
	gw := newGatewayEnv(t)
	e := gw.env
	w1 := gw.certs.IDs["w1"]

	envFile := e.dir + "/env"
	script := `env > "$1"; sleep 5; exit 7` // 5 s: two and a half TTLs of 2 s
	via := gw.as(t, "w1", gatewayRunArgs("kept", "--", "sh", "-c", script, "sh", envFile)...)
	direct := e.lg(t, "run", "--tenant", "acme", "--task", "kept", "--owner", w1, "--ttl", "2s", "--", "sh", "-c", "exit 7")
	if via.code != 7 || direct.code != 7 || via.stderr != "" {
		t.Fatalf("exit %d (--endpoints %d), stderr %q", via.code, direct.code, via.stderr)
	}
	sameJSON(t, direct, via, "lease", "epoch")
	var out runOut
	decode(t, via, &out)
	if out.Disposition != "released" || out.Grant.Owner != w1 || out.Child.ExitCode != 7 {
		t.Fatalf("run output %+v", out)
	}
	raw, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, found := strings.Cut(line, "="); found && strings.HasPrefix(k, "LEASEGATE_") {
			env[k] = v
		}
	}
	var inEnv coordinator.Grant
	if err := json.Unmarshal([]byte(env["LEASEGATE_GRANT"]), &inEnv); err != nil || inEnv != out.Grant ||
		env["LEASEGATE_GATEWAY"] != gw.url || env["LEASEGATE_OWNER"] != w1 || env["LEASEGATE_ENDPOINTS"] != "" {
		t.Fatalf("child's environment %v; grant %+v", env, out.Grant)
	}
	o, err := e.co.Owner(lgtest.Ctx(t), "acme", "kept")
	if err != nil || o.Owned() {
		t.Fatalf("after run: %+v, %v", o, err)
	}
}

// Whichever way ownership goes, run through the gateway sees it on the
// gateway's ownership stream (or its session ending), stops the child with
// SIGTERM, exits 5 and says why, as through --endpoints.
func TestRunThroughTheGatewayOwnershipLost(t *testing.T) {
	var refuse atomic.Bool // the gateway refuses renewals (the network to it is gone)
	gw := newGatewayEnvWrapped(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			if refuse.Load() && req.URL.Path == leasegatev1connect.WorkerServiceRenewSessionProcedure {
				panic(http.ErrAbortHandler)
			}
			next.ServeHTTP(rw, req)
		})
	})
	e := gw.env
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, g coordinator.Grant)
		want coordinator.Disposition
	}{
		{"lease revoked", func(t *testing.T, g coordinator.Grant) {
			wantViaGateway(t, gw.as(t, "op1", "lease", "revoke", "--lease", strconv.FormatInt(g.Lease, 10)), cli.ExitDone, "ok")
		}, coordinator.ExpiredOwner},
		{"grant released", func(t *testing.T, g coordinator.Grant) {
			wantViaGateway(t, gw.as(t, "w1", "release", "--grant", e.grantFile(t, g)), cli.ExitDone, coordinator.Released)
		}, coordinator.ExpiredOwner},
		{"owner key rewritten", func(t *testing.T, g coordinator.Grant) {
			if _, err := e.client().Put(lgtest.Ctx(t), e.co.Keys().Owner(g.Tenant, g.Task), "intruder"); err != nil {
				t.Fatal(err)
			}
		}, coordinator.StaleOwner},
		{"renewals cut off", func(t *testing.T, g coordinator.Grant) { refuse.Store(true) }, coordinator.ExpiredOwner},
		{"realm rotated", func(t *testing.T, g coordinator.Grant) {
			wantViaGateway(t, gw.as(t, "op1", "realm", "rotate"), cli.ExitDone, "ok")
		}, coordinator.GenerationMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer refuse.Store(false)
			task := unsafeChars.ReplaceAllString(tc.name, "-")
			b := startApp(t, append(gw.gatewayArgs("w1", gw.url), gatewayRunArgs(task, "--", "sh", "-c", child)...)...)
			g := grantOfChild(t, b.stdout.waitFor(t, "ready\n"))
			tc.lose(t, g)
			r := b.wait(t)
			if r.code != cli.ExitOwnershipLost || !strings.Contains(r.stdout, "child got SIGTERM") {
				t.Fatalf("exit %d, want %d, the child stopped\nstdout: %s\nstderr: %s", r.code, cli.ExitOwnershipLost, r.stdout, r.stderr)
			}
			var out runOut
			decode(t, r, &out)
			if out.Disposition != string(tc.want) || out.Grant != g || out.Child.Stopped != "SIGTERM" || out.Child.ExitCode != 9 {
				t.Fatalf("run output %+v; want %s", out, tc.want)
			}
			wantRefusalLine(t, r, tc.want)
		})
	}
}

// grantOfChild is the grant a child printed ("grant=<JSON>").
func grantOfChild(t *testing.T, out string) coordinator.Grant {
	t.Helper()
	var g coordinator.Grant
	for _, line := range strings.Split(out, "\n") {
		if raw, found := strings.CutPrefix(line, "grant="); found {
			if err := json.Unmarshal([]byte(raw), &g); err != nil {
				t.Fatal(err)
			}
		}
	}
	if g.Epoch == 0 {
		t.Fatalf("no grant in the child's output:\n%s", out)
	}
	return g
}

// A held task: busy without --wait (the child never runs); with --wait,
// run waits on the gateway's stream until the holder goes, then runs the
// child under a newer epoch; --wait-timeout gives up with busy. Bad input
// is refused before any I/O, an unreachable gateway is a hold, and a claim
// whose answer was lost is outcome_unknown — with the session revoked, so
// the claim, had it applied, holds nothing.
func TestRunThroughTheGatewayRefusals(t *testing.T) {
	var lose atomic.Bool
	gw := newGatewayEnvWrapped(t, loseAnswers(&lose, leasegatev1connect.WorkerServiceClaimProcedure))
	e := gw.env
	held, heldFile := e.claim(t, "acme", "held", "holder", "2m")
	as := func(args ...string) result { return gw.as(t, "w1", args...) }

	r := as(gatewayRunArgs("held", "--", "sh", "-c", "echo child ran")...)
	wantViaGateway(t, r, cli.ExitRefused, coordinator.Busy)
	if strings.Contains(r.stdout, "child ran") {
		t.Fatal("the child ran without the grant")
	}
	r = as(gatewayRunArgs("held", "--wait", "--wait-timeout", "1s", "--", "sh", "-c", "echo child ran")...)
	wantViaGateway(t, r, cli.ExitRefused, coordinator.Busy)
	if strings.Contains(r.stdout, "child ran") || !strings.Contains(r.stderr, "--wait-timeout 1s passed") {
		t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
	b := startApp(t, append(append(gw.gatewayArgs("w1", gw.url), "--log-level", "debug"),
		gatewayRunArgs("held", "--wait", "--", "sh", "-c", `echo "epoch=$LEASEGATE_EPOCH"`)...)...)
	b.stderr.waitForLogField(t, "disposition", string(coordinator.Busy))
	want(t, e.lg(t, "release", "--grant", heldFile), cli.ExitDone, coordinator.Released)
	r = b.wait(t)
	var out runOut
	decode(t, r, &out)
	if r.code != 0 || out.Disposition != "released" || out.Grant.Epoch <= held.Epoch ||
		!strings.Contains(r.stdout, "epoch="+strconv.FormatInt(out.Grant.Epoch, 10)) {
		t.Fatalf("exit %d, run output %+v after a holder at epoch %d\nstdout: %s\nstderr: %s", r.code, out, held.Epoch, r.stdout, r.stderr)
	}

	e.writesNothing(t, "a refused run", func() {
		for _, args := range [][]string{
			gatewayRunArgs("x", "--owner", "someone-else", "--", "true"),
			gatewayRunArgs("x", "--metrics-addr", "127.0.0.1:0", "--", "true"),
			gatewayRunArgs("x", "--kill-after", "-1s", "--", "true"),
			gatewayRunArgs("x"),
		} {
			wantViaGateway(t, as(args...), cli.ExitInvalid, coordinator.InvalidInput)
		}
		r := execApp(t, call{}, append(gw.gatewayArgs("w1", "https://127.0.0.1:1"), gatewayRunArgs("x", "--", "sh", "-c", "echo child ran")...)...)
		wantViaGateway(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
		if strings.Contains(r.stdout, "child ran") {
			t.Fatal("the child ran without a grant")
		}
	})

	lose.Store(true)
	r = as(gatewayRunArgs("lost", "--", "sh", "-c", "echo child ran")...)
	wantViaGateway(t, r, cli.ExitOutcomeUnknown, coordinator.OutcomeUnknown)
	if strings.Contains(r.stdout, "child ran") {
		t.Fatal("the child ran without a grant")
	}
	if o, err := e.co.Owner(lgtest.Ctx(t), "acme", "lost"); err != nil || o.Owned() {
		t.Fatalf("the lost claim outlived run: %+v, %v", o, err)
	}
}

// The gateway renews run's lease only in answer to run's own renewals: a
// run process SIGSTOPped past its TTL loses the task (the gateway keeps
// nothing alive for it), another worker claims it, and on SIGCONT run
// stops its child and exits 5 — it never acts on under the old grant.
func TestRunThroughTheGatewayPausedLosesTheTask(t *testing.T) {
	gw := newGatewayEnv(t)
	e := gw.env
	cmd := exec.Command(os.Args[0], append(gw.gatewayArgs("w1", gw.url), gatewayRunArgs("paused", "--", "sh", "-c", child)...)...)
	cmd.Env = append(os.Environ(), asBinary+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	var out strings.Builder
	for lines.Scan() && lines.Text() != "ready" {
		out.WriteString(lines.Text() + "\n")
	}
	g := grantOfChild(t, out.String())

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	lgtest.WaitOwnerGone(t, e.co, "acme", "paused") // its lease expires: nobody renewed it
	t.Logf("the owner key went %v after SIGSTOP (TTL 2s)", time.Since(stopped))
	next, _ := e.claim(t, "acme", "paused", "w-next", "30s")
	if next.Epoch <= g.Epoch {
		t.Fatalf("the next claim's epoch %d is not past %d", next.Epoch, g.Epoch)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != cli.ExitOwnershipLost || !strings.Contains(rest.String(), "child got SIGTERM") {
		t.Fatalf("run after SIGCONT: %v\nstdout: %s\nstderr: %s", err, rest.String(), stderr.String())
	}
	// Its session's end, the key's deletion or the next claim, whichever
	// it reads first: each says its grant is gone.
	if line := stderr.String(); !strings.HasPrefix(line, string(coordinator.ExpiredOwner)+": ") && !strings.HasPrefix(line, string(coordinator.StaleOwner)+": ") {
		t.Fatalf("stderr %q: want expired_owner or stale_owner", line)
	}
	if o, err := e.co.Owner(lgtest.Ctx(t), "acme", "paused"); err != nil || o.Owner != "w-next" || o.Epoch != next.Epoch {
		t.Fatalf("the next owner's claim did not survive the paused run: %+v, %v", o, err)
	}
}
