package gateway_test

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// startPython runs examples/python/leasegate_worker.py as a real process.
func startPython(t *testing.T, w *world, r *replica, task string, ttl time.Duration) *lgtest.Process {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python worker example is not run")
	}
	f := w.certs.Clients["worker-a"]
	return lgtest.StartProcess(t, "python", exec.Command(py, "../examples/python/leasegate_worker.py", "--gateway", r.ts.URL, "--ca", w.certs.CA,
		"--cert", f.Cert, "--key", f.Key, "--tenant", tenant, "--task", task, "--ttl", fmt.Sprint(int(ttl/time.Second))))
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
	claimed := py.Next("claimed")
	grant := claimed["grant"].(map[string]any)
	epoch := grant["epoch"].(string) // int64 in protobuf JSON is a string

	py.Send("commit c-1 hello 0")
	if rc := py.Next("committed")["receipt"].(map[string]any); rc["disposition"] != string(coordinator.Committed) {
		t.Fatalf("receipt %v", rc)
	}
	// op-1's precondition is observed through the gateway (the worker
	// holds no provider credential), op-2's given.
	approve := func(op string, observe bool) {
		t.Helper()
		if observe {
			py.Send("propose %s checkout.example %s", op, "db-"+op)
		} else {
			py.Send("propose %s checkout.example %s %s", op, "db-"+op, devprovider.Digest("db-1"))
		}
		rec := py.Next("proposed")["record"].(map[string]any)
		pre := rec["precondition"].(map[string]any)["digest"].(string)
		if pre != devprovider.Digest("db-1") {
			t.Fatalf("%s proposed with precondition %q, want the provider's world %q", op, pre, devprovider.Digest("db-1"))
		}
		if _, err := w.client(r, "approver").Authorize(ctx, tenant, task, op, ledger.Approval{ParamsDigest: rec["paramsDigest"].(string), PreconditionDigest: pre, Note: ""}); err != nil {
			t.Fatalf("Authorize %s: %v", op, err)
		}
	}
	approve("op-1", true)
	py.Send("dispatch op-1")
	if rec := py.Next("dispatched")["record"].(map[string]any); rec["state"] != string(ledger.Confirmed) {
		t.Fatalf("dispatched %v, want CONFIRMED", rec)
	}
	// Kept alive past its TTL by its own renewals, through the gateway.
	<-time.After(3 * 2 * time.Second) // the time passing is what is tested
	if o, err := w.client(r, "worker-b").Owner(ctx, tenant, task); err != nil || !o.Owned() || fmt.Sprint(o.Epoch) != epoch {
		t.Fatalf("after 3 TTLs the python worker's grant is gone: %+v, %v", o, err)
	}
	approve("op-2", false)

	py.Signal(syscall.SIGSTOP)
	lgtest.WaitOwnerGone(t, r.c, tenant, task)
	s := w.session(w.client(r, "worker-b"), 10*time.Second)
	g2 := claim(t, s, tenant, task)
	before := len(w.provider.Calls())
	py.Signal(syscall.SIGCONT)
	py.Send("dispatch op-2")
	refused := py.Next("refused")
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
	py.Send("quit")
}
