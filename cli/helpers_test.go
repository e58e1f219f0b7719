package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// env is one test's view of a cluster: its endpoints, a prefix of its own,
// and a coordinator and client on them for waiting and snapshots.
type env struct {
	endpoints []string
	prefix    string
	co        *coordinator.Coordinator
	dir       string // files that outlive subtests (grants)
}

var (
	unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
	prefixSeq   atomic.Int64
)

// newEnv gives the test a fresh prefix on the shared cluster.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, shared)
}

func newEnvOn(t *testing.T, cl *embedtest.Cluster) *env {
	t.Helper()
	return newEnvAt(t, cl.Endpoints()...)
}

// newEnvAt gives the test a fresh prefix on the etcd at endpoints.
func newEnvAt(t *testing.T, endpoints ...string) *env {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		DialOptions: coordinator.DialOptions(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	// Unique per run too: with -count=N every run of a test shares the cluster.
	prefix := fmt.Sprintf("/%s-%d", unsafeChars.ReplaceAllString(t.Name(), "-"), prefixSeq.Add(1))
	co, err := coordinator.New(lgtest.Ctx(t), client, coordinator.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return &env{endpoints: endpoints, prefix: prefix, co: co, dir: t.TempDir()}
}

func (e *env) client() *clientv3.Client { return e.co.Client() }

// snap is every key under the test's prefix.
func (e *env) snap(t *testing.T) lgtest.Snapshot {
	t.Helper()
	return lgtest.Snap(t, e.client(), e.prefix+"/")
}

// writesNothing runs f and fails t if anything under the test's prefix
// changed meanwhile (lgtest.WritesNothing); what names f in the failure.
func (e *env) writesNothing(t *testing.T, what string, f func()) {
	t.Helper()
	lgtest.WritesNothing(t, e.client(), e.prefix+"/", what, f)
}

// result is what one run of the app did.
type result struct {
	code   int
	stdout string
	stderr string
}

// call is one run of the app: its arguments after the global flags the
// env supplies, and optionally stdin, a context and writers to watch.
type call struct {
	args           []string
	stdin          string
	ctx            context.Context
	stdout, stderr *syncBuffer
}

// lg runs `leasegate --endpoints … --prefix … -o json ARGS…` in-process.
func (e *env) lg(t *testing.T, args ...string) result {
	t.Helper()
	return e.exec(t, call{args: args})
}

func (e *env) exec(t *testing.T, c call) result {
	t.Helper()
	global := []string{"--endpoints", strings.Join(e.endpoints, ","), "--prefix", e.prefix, "-o", "json"}
	return execApp(t, c, append(global, c.args...)...)
}

// execApp runs the app with exactly these arguments.
func execApp(t *testing.T, c call, args ...string) result {
	t.Helper()
	if c.stdout == nil {
		c.stdout = newSyncBuffer()
	}
	if c.stderr == nil {
		c.stderr = newSyncBuffer()
	}
	if c.ctx == nil {
		c.ctx = lgtest.Ctx(t)
	}
	app := cli.New()
	app.Writer, app.ErrWriter, app.Reader = c.stdout, c.stderr, strings.NewReader(c.stdin)
	err := app.RunContext(c.ctx, append([]string{"leasegate"}, args...))
	return result{code: cli.ExitCode(err), stdout: c.stdout.String(), stderr: c.stderr.String()}
}

// want checks the exit code and the disposition of the last JSON object
// printed; a non-zero exit must print exactly one line on stderr, naming
// the disposition, and a zero exit nothing.
func want(t *testing.T, r result, code int, disposition coordinator.Disposition) map[string]any {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	obj := lastJSON(t, r.stdout)
	if got := obj["disposition"]; got != string(disposition) {
		t.Fatalf("disposition %v, want %s\nstdout: %s\nstderr: %s", got, disposition, r.stdout, r.stderr)
	}
	if code == 0 {
		if r.stderr != "" {
			t.Fatalf("stderr of a success: %q", r.stderr)
		}
		return obj
	}
	wantRefusalLine(t, r, disposition)
	return obj
}

// wantOperatorAdvice is want for an operator's command whose line gives
// advice of its own (says) in place of the disposition's worker hint.
func wantOperatorAdvice(t *testing.T, r result, code int, d coordinator.Disposition, says string) {
	t.Helper()
	if r.code != code || lastJSON(t, r.stdout)["disposition"] != string(d) {
		t.Fatalf("exit %d, want %d with %s\nstdout: %s\nstderr: %s", r.code, code, d, r.stdout, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, string(d)+": "+says) || strings.Contains(r.stderr, d.Hint()) {
		t.Fatalf("stderr %q is not one line of %s with the operator's advice %q", r.stderr, d, says)
	}
}

// wantRefusalLine checks that stderr is one line: "<disposition>: <hint> …".
func wantRefusalLine(t *testing.T, r result, d coordinator.Disposition) {
	t.Helper()
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, string(d)+": "+d.Hint()) {
		t.Fatalf("stderr %q is not one line naming %s and its hint", r.stderr, d)
	}
}

// lastJSON decodes the last line of out as a JSON object.
func lastJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var obj map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &obj); err != nil {
		t.Fatalf("last line of stdout is not a JSON object: %v\nstdout: %s", err, out)
	}
	return obj
}

// decode decodes the last JSON line of r's stdout into v.
func decode(t *testing.T, r result, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("decode %q: %v", r.stdout, err)
	}
}

// claimOut is claim's JSON output.
type claimOut struct {
	Disposition string            `json:"disposition"`
	Grant       coordinator.Grant `json:"grant"`
}

// claim runs claim and returns the grant and its output, written to a file.
func (e *env) claim(t *testing.T, tenant, task, owner, ttl string) (coordinator.Grant, string) {
	t.Helper()
	r := e.lg(t, "claim", "--tenant", tenant, "--task", task, "--owner", owner, "--ttl", ttl)
	want(t, r, cli.ExitDone, coordinator.Granted)
	var out claimOut
	decode(t, r, &out)
	return out.Grant, e.file(t, r.stdout)
}

// grantFile writes a bare grant to a file.
func (e *env) grantFile(t *testing.T, g coordinator.Grant) string {
	t.Helper()
	raw, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return e.file(t, string(raw))
}

var fileSeq struct {
	sync.Mutex
	n int
}

// file writes content to a new file in the env's directory.
func (e *env) file(t *testing.T, content string) string {
	t.Helper()
	fileSeq.Lock()
	fileSeq.n++
	n := fileSeq.n
	fileSeq.Unlock()
	p := filepath.Join(e.dir, "f"+strconv.Itoa(n))
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deadEndpoint is a loopback address nothing listens on.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// syncBuffer is a writer the app and a child process write to while the
// test reads it, and waits on it for a line to appear — no sleeping.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed on every write
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{})} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer contains s, and returns the content.
func (b *syncBuffer) waitFor(t *testing.T, s string) string {
	t.Helper()
	timeout := time.NewTimer(lgtest.Timeout)
	defer timeout.Stop()
	for {
		b.mu.Lock()
		content, changed := b.buf.String(), b.changed
		b.mu.Unlock()
		if strings.Contains(content, s) {
			return content
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("%q never appeared; got:\n%s", s, content)
		}
	}
}

// waitForLogField waits until a log line on the buffer carries the field
// key with value (the fields are the JSON object the console encoder ends
// a line with): a test waits for the event a line reports, not its wording.
func (b *syncBuffer) waitForLogField(t *testing.T, key, value string) string {
	t.Helper()
	timeout := time.NewTimer(lgtest.Timeout)
	defer timeout.Stop()
	for {
		b.mu.Lock()
		content, changed := b.buf.String(), b.changed
		b.mu.Unlock()
		for _, line := range strings.Split(content, "\n") {
			i := strings.LastIndex(line, "\t{")
			var fields map[string]any
			if i >= 0 && json.Unmarshal([]byte(line[i+1:]), &fields) == nil && fields[key] == value {
				return line
			}
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("no log line with %s=%q appeared; got:\n%s", key, value, content)
		}
	}
}

// background runs the app in a goroutine until ctx is cancelled; wait
// returns its result.
type background struct {
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan result
}

// start runs `leasegate <env's globals> ARGS…` in the background.
func (e *env) start(t *testing.T, args ...string) *background {
	t.Helper()
	global := []string{"--endpoints", strings.Join(e.endpoints, ","), "--prefix", e.prefix, "-o", "json"}
	return startApp(t, append(global, args...)...)
}

// startApp runs the app with exactly these arguments in the background.
func startApp(t *testing.T, args ...string) *background {
	t.Helper()
	// No deadline of its own: a long command (a bench, a server) is bounded
	// by wait's timeout and cancelled at the test's end, not cut off while
	// the test still waits on an event.
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{stdout: newSyncBuffer(), stderr: newSyncBuffer(), cancel: cancel, done: make(chan result, 1)}
	c := call{ctx: ctx, stdout: b.stdout, stderr: b.stderr}
	go func() { b.done <- execApp(t, c, args...) }()
	t.Cleanup(func() {
		cancel()
		<-b.done
	})
	return b
}

func (b *background) wait(t *testing.T) result {
	t.Helper()
	select {
	case r := <-b.done:
		b.done <- r // for Cleanup
		return r
	case <-time.After(lgtest.Timeout):
		t.Fatalf("the command did not return; stderr so far: %s", b.stderr.String())
	}
	return result{}
}

func wantFields(t *testing.T, line string, want ...string) {
	t.Helper()
	if got := strings.Fields(line); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("row %q, want fields %q", line, want)
	}
}

// asProcess runs the test binary as leasegate with args and env added to
// its environment, and returns its stdout; it must exit 0.
func asProcess(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asBinary+"=1"), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("leasegate %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
