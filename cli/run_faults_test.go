package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

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
