package robustness_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// Real processes frozen with SIGSTOP past their TTL: the test binary
// re-executes itself as a worker, or as the leasegate CLI (what
// cli/leasegate/main.go runs).

// worker claims t/k with a 2 s session, prints its grant as one JSON line,
// then for each line "commit OP EXPECTED" or "commit-live OP EXPECTED" on
// stdin commits with the grant (commit-live: through its session, which
// refuses past its local deadline) and prints the disposition.
func worker() int {
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv("WORKER_ENDPOINTS"), ","),
		DialTimeout: 5 * time.Second, DialOptions: coordinator.DialOptions(), Logger: zap.NewNop()})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer cli.Close()
	ctx := context.Background()
	c, err := coordinator.New(ctx, cli, coordinator.WithPrefix(os.Getenv("WORKER_PREFIX")))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	s, err := c.NewSession(ctx, "frozen", 2*time.Second)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer s.Close(ctx)
	g, err := s.Claim(ctx, "t", "k")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	raw, _ := json.Marshal(g)
	fmt.Println(string(raw))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var verb, op string
		var expected int64
		if _, err := fmt.Sscan(in.Text(), &verb, &op, &expected); err != nil {
			fmt.Println("error", err)
			continue
		}
		var opts []fencedtxn.CommitOption
		if verb == "commit-live" {
			opts = append(opts, fencedtxn.WithSession(s))
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := fencedtxn.Commit(cctx, c, g, intent("k", op, expected), opts...)
		cancel()
		d := coordinator.DispositionOf(err)
		if err == nil {
			d = coordinator.Committed
		}
		fmt.Println(d)
	}
	return 0
}

// leasegateMain is cli/leasegate's main.
func leasegateMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return cli.ExitCode(cli.New().RunContext(ctx, os.Args))
}

// reexec starts the test binary in a role, with stdin and stdout piped.
func reexec(t *testing.T, role string, env []string, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("%s's stderr:\n%s", role, stderr.String())
	})
	return cmd, stdin, bufio.NewReader(stdout)
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		return s
	case <-time.After(lgtest.Timeout):
		t.Fatal("no line from the process")
		return ""
	}
}

// TestFrozenProcessIsFenced: a worker process is frozen with SIGSTOP past
// its TTL; a replacement takes over and writes; the worker resumes with
// SIGCONT and its write is refused by the authority (and by its own session
// before any I/O), leaving the keyspace unchanged.
func TestFrozenProcessIsFenced(t *testing.T) {
	t.Parallel()
	cl := three(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/frozen"))
	cmd, stdin, stdout := reexec(t, "worker", []string{"WORKER_ENDPOINTS=" + strings.Join(cl.Endpoints(), ","), "WORKER_PREFIX=/frozen"})
	var g coordinator.Grant
	if line := readLine(t, stdout); json.Unmarshal([]byte(line), &g) != nil {
		t.Fatalf("worker: %s", line)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lgtest.WaitOwnerGone(t, c, "t", "k") // its keepalives stopped with it
	b := lgtest.Session(t, c, "replacement", 2*time.Second)
	gb := lgtest.Claim(t, b, "t", "k")
	if _, err := fencedtxn.Commit(ctx, c, gb, intent("k", "replacement-1", 0)); err != nil {
		t.Fatal(err)
	}
	lgtest.WritesNothing(t, c.Client(), "/frozen/", "the resumed worker was refused", func() {
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ line, want string }{
			{"commit frozen-1 0", string(coordinator.StaleOwner)},        // the authority refuses
			{"commit frozen-1 1", string(coordinator.StaleOwner)},        // whatever version it guesses
			{"commit-live frozen-2 1", string(coordinator.ExpiredOwner)}, // its session stops it first
		} {
			fmt.Fprintln(stdin, tc.line)
			if got := readLine(t, stdout); got != tc.want {
				t.Fatalf("%s after SIGCONT: %s, want %s", tc.line, got, tc.want)
			}
		}
	})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("worker: %v", err)
	}
}

// TestFrozenRunIsStopped: `leasegate run` is frozen with SIGSTOP past its
// TTL while its child keeps running; a replacement takes over; on SIGCONT
// run sees ownership lost, terminates its child and exits 5.
func TestFrozenRunIsStopped(t *testing.T) {
	t.Parallel()
	cl := three(t)
	ctx := lgtest.Ctx(t)
	c := lgtest.Coordinator(t, cl, coordinator.WithPrefix("/frozen-run"))
	cmd, _, stdout := reexec(t, "leasegate", nil, "--endpoints", strings.Join(cl.Endpoints(), ","), "--prefix", "/frozen-run",
		"run", "--tenant", "t", "--task", "k", "--owner", "frozen", "--ttl", "2s", "--kill-after", "2s", "--",
		"sh", "-c", "echo $$; exec sleep 60")
	child, err := strconv.Atoi(readLine(t, stdout))
	if err != nil {
		t.Fatalf("child pid: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lgtest.WaitOwnerGone(t, c, "t", "k")
	if err := syscall.Kill(child, 0); err != nil {
		t.Fatalf("the child should still run while run is frozen: %v", err)
	}
	b := lgtest.Session(t, c, "replacement", 2*time.Second)
	gb := lgtest.Claim(t, b, "t", "k")
	if _, err := fencedtxn.Commit(ctx, c, gb, intent("k", "replacement-1", 0)); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Fatalf("run after SIGCONT: %v, want exit 5 (ownership lost)", err)
	}
	// run waited for its child: the pid is gone.
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("child %d still exists after run exited: %v", child, err)
	}
}
