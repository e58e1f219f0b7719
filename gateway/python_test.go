package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// pyWorker is examples/python/leasegate_worker.py run as a real process.
type pyWorker struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan map[string]any
}

func startPython(t *testing.T, w *world, r *replica, task string, ttl time.Duration) *pyWorker {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python worker example is not run")
	}
	f := w.certs.Clients["worker-a"]
	cmd := exec.Command(py, "../examples/python/leasegate_worker.py", "--gateway", r.ts.URL, "--ca", w.certs.CA,
		"--cert", f.Cert, "--key", f.Key, "--tenant", tenant, "--task", task, "--ttl", fmt.Sprint(int(ttl/time.Second)))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pyWorker{t: t, cmd: cmd, in: in, lines: make(chan map[string]any, 16)}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("python worker printed %q: %v", sc.Text(), err)
				continue
			}
			p.lines <- m
		}
	}()
	return p
}

// next is the worker's next answer, which must be event.
func (p *pyWorker) next(event string) map[string]any {
	p.t.Helper()
	select {
	case m, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("the python worker exited waiting for %s", event)
		}
		if m["event"] != event {
			p.t.Fatalf("python worker answered %v, want %s", m, event)
		}
		return m
	case <-time.After(lgtest.Timeout):
		p.t.Fatalf("no %s from the python worker", event)
	}
	return nil
}

func (p *pyWorker) send(format string, args ...any) {
	p.t.Helper()
	if _, err := fmt.Fprintf(p.in, format+"\n", args...); err != nil {
		p.t.Fatal(err)
	}
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(b []byte) (int, error) {
	w.t.Logf("python: %s", b)
	return len(b), nil
}

// The Python worker, a real process with the standard library only, opens
// a session, keeps it alive, claims, commits, proposes and dispatches
// through the gateway; SIGSTOPped past its TTL it loses the task to a
// replacement, and on SIGCONT its next dispatch is refused stale_owner and
// reaches no provider.
func TestThePythonWorker(t *testing.T) {
	w := newWorld(t)
	r := w.replica()
	ctx := lgtest.Ctx(t)
	const task = "py-task"
	py := startPython(t, w, r, task, 2*time.Second)
	claimed := py.next("claimed")
	grant := claimed["grant"].(map[string]any)
	epoch := grant["epoch"].(string) // int64 in protobuf JSON is a string

	py.send("commit c-1 hello 0")
	if rc := py.next("committed")["receipt"].(map[string]any); rc["disposition"] != string(coordinator.Committed) {
		t.Fatalf("receipt %v", rc)
	}
	// op-1's precondition is observed through the gateway (the worker
	// holds no provider credential), op-2's given.
	approve := func(op string, observe bool) {
		t.Helper()
		if observe {
			py.send("propose %s checkout.example %s", op, "db-"+op)
		} else {
			py.send("propose %s checkout.example %s %s", op, "db-"+op, devprovider.Digest("db-1"))
		}
		rec := py.next("proposed")["record"].(map[string]any)
		pre := rec["precondition"].(map[string]any)["digest"].(string)
		if pre != devprovider.Digest("db-1") {
			t.Fatalf("%s proposed with precondition %q, want the provider's world %q", op, pre, devprovider.Digest("db-1"))
		}
		if _, err := w.client(r, "approver").Authorize(ctx, tenant, task, op, ledger.Approval{ParamsDigest: rec["paramsDigest"].(string), PreconditionDigest: pre, Note: ""}); err != nil {
			t.Fatalf("Authorize %s: %v", op, err)
		}
	}
	approve("op-1", true)
	py.send("dispatch op-1")
	if rec := py.next("dispatched")["record"].(map[string]any); rec["state"] != string(ledger.Confirmed) {
		t.Fatalf("dispatched %v, want CONFIRMED", rec)
	}
	// Kept alive past its TTL by its own renewals, through the gateway.
	<-time.After(3 * 2 * time.Second) // the time passing is what is tested
	if o, err := w.client(r, "worker-b").Owner(ctx, tenant, task); err != nil || !o.Owned() || fmt.Sprint(o.Epoch) != epoch {
		t.Fatalf("after 3 TTLs the python worker's grant is gone: %+v, %v", o, err)
	}
	approve("op-2", false)

	if err := py.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lgtest.WaitOwnerGone(t, r.c, tenant, task)
	s := w.session(w.client(r, "worker-b"), 10*time.Second)
	g2 := claim(t, s, tenant, task)
	before := len(w.provider.Calls())
	if err := py.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	py.send("dispatch op-2")
	refused := py.next("refused")
	if refused["disposition"] != string(coordinator.StaleOwner) || refused["code"] != "failed_precondition" {
		t.Fatalf("the woken worker's dispatch: %v, want stale_owner (failed_precondition)", refused)
	}
	if calls := w.provider.Calls(); len(calls) != before {
		t.Fatalf("the provider saw %v from the stale worker", calls[before:])
	}
	for _, c := range w.provider.Calls() {
		if c.Operation == "op-2" {
			t.Fatalf("op-2 reached the provider: %+v", c)
		}
	}
	rec, _, err := w.client(r, "worker-b").Record(ctx, tenant, task, "op-2")
	if err != nil || rec.State != ledger.Authorized {
		t.Fatalf("op-2 is %s (%v), want AUTHORIZED for the new owner (epoch %d)", rec.State, err, g2.Epoch)
	}
	py.send("quit")
}
