package cli_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

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
