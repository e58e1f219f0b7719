package drill

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/internal/store"
)

// The drill's side of a worker process (realchild.go): start it, answer
// its requests, pause it for real, reap it.

// runProc runs the worker as a process of its own, given sp, and serves it
// until it exits.
func (wk *realWorker) runProc(sp workerSpec) {
	w := wk.w
	exe, err := os.Executable()
	if err != nil {
		w.fail(fmt.Errorf("worker %s: the drill's executable: %w", wk.name, err))
		return
	}
	spec, err := json.Marshal(sp)
	if err != nil {
		w.fail(err)
		return
	}
	// A stopped process still dies of SIGKILL: the trial's end reaps it
	// even mid-pause.
	cmd := exec.CommandContext(w.ctx, exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		w.fail(err)
		return
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.fail(err)
		return
	}
	if err := cmd.Start(); err != nil {
		w.fail(fmt.Errorf("start worker %s: %w", wk.name, err))
		return
	}
	wk.pid = cmd.Process.Pid
	if realWorkerStarted != nil {
		realWorkerStarted(w.design, wk.pid)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), linkMaxLineSize)
	enc := json.NewEncoder(in)
	locked := false // the worker holds provMu (between before-call and after-call)
	for sc.Scan() {
		var m linkMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			w.fail(fmt.Errorf("worker %s: bad request %q: %w", wk.name, sc.Text(), err))
			break
		}
		a := wk.serve(m, &locked)
		if err := enc.Encode(a); err != nil {
			break
		}
	}
	in.Close()
	w.mu.Lock()
	w.exited[wk.name] = true
	w.mu.Unlock()
	if locked {
		w.provMu.Unlock()
	}
	if err := cmd.Wait(); err != nil && w.ctx.Err() == nil {
		w.fail(fmt.Errorf("worker %s (pid %d): %w: %s", wk.name, wk.pid, err, strings.TrimSpace(stderr.String())))
	}
}

// workerFailure is the error a worker process reported (opFail). What it
// saw of etcd keeps its disposition across the process boundary, as the
// same error in the drill's own process would: a hold
// (authority_unavailable: it could not reach etcd) or etcd's auth refusing
// it (permission_denied, unauthenticated). Anything else — the worker's
// own faults, an invalid_input among them (the drill's input to it, not
// the caller's) — is the drill's own failure: no disposition.
func workerFailure(name string, m linkMsg) error {
	switch m.D.Class() {
	case coordinator.ClassUnavailable, coordinator.ClassDenied:
		return store.NewError(m.D, "drill worker "+name, "", "", m.S, nil)
	}
	return fmt.Errorf("drill worker %s: %s", name, m.S)
}

// realWorkerStarted, if set (by a test), is told of each worker process
// as it starts.
var realWorkerStarted func(d Design, pid int)

// spec is what the worker process is given: a fenced worker, the
// gateway's address, the CA and its own certificate and key; a naive
// one, etcd and the servers with their credentials.
func (wk *realWorker) spec() workerSpec {
	w, p := wk.w, wk.w.prov
	sp := workerSpec{Design: w.design, Trial: w.trial, Seed: w.run.cfg.Seed, Task: w.task, Name: wk.name, First: wk.first}
	if w.design == Fenced {
		sp.Gateway, sp.CA, sp.Cert, sp.Key = w.run.serve.workerFiles(wk.name)
		return sp
	}
	sp.Endpoints, sp.Client, sp.Prefix = w.run.coord.Client().Endpoints(), w.run.worker, w.run.cfg.Prefix+"/trials"
	sp.Nodes = []pgpromote.Node{{Name: realOriginal, ConnString: p.pair.Primary.ConnString()}, {Name: realTarget, ConnString: p.standbyConn()}}
	sp.PasswordFile, sp.ProxyPort, sp.DNSAddr, sp.Zone, sp.KeyFile = p.passwordFile, p.proxyPort, p.dns.Addr, p.dns.Zone, p.dns.KeyFile
	return sp
}

// serve answers one request of the worker process.
func (wk *realWorker) serve(m linkMsg, locked *bool) linkMsg {
	w := wk.w
	var a linkMsg
	switch m.Op {
	case opEvent:
		if m.Event != nil && m.Event.Kind == KindClaim && w.design == Fenced {
			// Whatever the servers did before this claim comes before it
			// in the trajectory (the fenced design's calls leave from the
			// gateway, not from the link).
			w.watchAll()
		}
		if m.Event != nil {
			w.add(*m.Event)
		}
	case opFail:
		w.fail(workerFailure(wk.name, m))
	case opHeld:
		a.B = w.isHeld()
	case opSetHeld:
		w.mu.Lock()
		w.held, w.holder = m.B, wk.name
		w.mu.Unlock()
	case opDone:
		w.mu.Lock()
		w.exited[wk.name] = true
		w.mu.Unlock()
	case opSync:
		w.syncJournal()
	case opClaimed:
		w.mu.Lock()
		wk.grant.Epoch, wk.grant.Lease = m.N, m.N2
		w.mu.Unlock()
		if c := w.claimed(wk.name); !isClosed(c) {
			close(c)
		}
	case opHistTimeout:
		w.historyTimeout(m.S)
	case opHistStart:
		w.mu.Lock()
		w.history.start(m.S, m.S2)
		w.mu.Unlock()
	case opHistClose:
		w.mu.Lock()
		delete(w.history.open, m.S)
		w.mu.Unlock()
	case opCompleted:
		a.B = wk.completed()
	case opSetCompleted:
		wk.setCompleted(m.B)
	case opPromotes:
		a.N = int64(w.promotesLogged(m.S))
	case opBeforeCall:
		w.provMu.Lock()
		*locked = true
		if m.S == "promote" {
			w.beforePromoteCall()
		} else {
			w.beforeTrafficCall()
		}
	case opAfterCall:
		if !*locked {
			w.fail(fmt.Errorf("worker %s: after-call without before-call", wk.name))
			break
		}
		if m.S == "promote" {
			w.afterPromoteCall()
		}
		w.watch(m.S2, m.N, m.S3)
		*locked = false
		w.provMu.Unlock()
	case opWatch:
		w.provMu.Lock()
		w.watch("", 0, "")
		w.provMu.Unlock()
	case opStopStandby:
		w.stopStandby()
	case opPause:
		if m.S3 != "" {
			wk.untilWindow(window(m.S), m.S3)
		}
		wk.pause(window(m.S), m.S2)
	default:
		w.fail(fmt.Errorf("worker %s: unknown request %q", wk.name, m.Op))
	}
	return a
}

// pause is the plan's pause, for real: the worker process, blocked on
// this request in its window, is SIGSTOPped — every goroutine of it,
// its heartbeat too — so its lease expires in etcd on its own; the other
// worker claims the task; wakeAfter later the process gets SIGCONT and
// goes on exactly where it was. The trajectory records what the drill
// saw: the process's state in /proc while stopped, and etcd's answer for
// its lease.
func (wk *realWorker) pause(win window, what string) {
	w := wk.w
	wk.paused = true
	wk.record(Event{Kind: KindFault, Effect: string(stopFault(win, false)), Detail: fmt.Sprintf("SIGSTOP pid %d %s", wk.pid, what)})
	if err := stopProcess(wk.pid); err != nil {
		w.fail(fmt.Errorf("pause worker %s: %w", wk.name, err))
		return
	}
	defer func() {
		if err := syscall.Kill(wk.pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) { // ESRCH: reaped at the trial's end
			w.fail(fmt.Errorf("SIGCONT worker %s: %w", wk.name, err))
		}
	}()
	state := waitProcState(w.ctx, wk.pid, 'T', time.Second)
	expired := false
	select {
	case <-w.claimed(otherWorker(wk.name)):
		expired = true
	case <-time.After(30 * time.Second):
	case <-w.ctx.Done():
	}
	lease := wk.leaseTTL()
	state2 := procState(wk.pid)
	if expired {
		w.add(Event{Kind: KindLost, Actor: wk.name, Epoch: wk.grant.Epoch, Detail: fmt.Sprintf(
			"lease expired in etcd (%s) while pid %d was stopped (state %c, then %c): no heartbeats for %v",
			lease, wk.pid, state, state2, w.sessionTTL())})
		wk.sleep(w.plan.wakeAfter)
	} else {
		wk.note("no other worker claimed the task while pid %d was stopped (%s; state %c, then %c)", wk.pid, lease, state, state2)
	}
	wk.note("SIGCONT pid %d: it goes on where it was (%s)", wk.pid, win)
}

// untilWindow waits (bounded) until the world shows the dispatch of
// operation where the pause window win strikes (realPauseReached): the
// worker's call is at the gateway, which the drill sees in the ledger.
func (wk *realWorker) untilWindow(win window, operation string) {
	w := wk.w
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && w.ctx.Err() == nil {
		rec, _, err := w.journal.Record(context.WithoutCancel(w.ctx), w.run.tenant(w.design), w.task, operation)
		if err == nil && realPauseReached(win, rec) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	wk.note("the dispatch of %s did not reach the window %s within 15 s: paused anyway", operation, win)
}

// sessionTTL is how long a worker's lease outlives its last renewal.
func (w *realWorld) sessionTTL() time.Duration {
	if w.design == Fenced {
		return realSessionTTL
	}
	return realLeaseTTL
}

// leaseTTL is etcd's answer for the worker's lease: "ttl -1" once it
// expired.
func (wk *realWorker) leaseTTL() string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(wk.w.ctx), 5*time.Second)
	defer cancel()
	r, err := wk.w.run.coord.Client().TimeToLive(ctx, clientv3.LeaseID(wk.grant.Lease))
	if err != nil {
		return "lease " + fmt.Sprintf("%x", wk.grant.Lease) + ": " + err.Error()
	}
	return fmt.Sprintf("lease %x ttl %d", wk.grant.Lease, r.TTL)
}

// stopProcess stops pid: SIGSTOP, which a process can neither catch nor
// ignore.
func stopProcess(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }

// procState is pid's state letter in /proc/PID/stat ('T': stopped by a
// signal), '?' when it cannot be read.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return '?'
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return '?'
	}
	return b[i+2]
}

// waitProcState polls pid's state until it is want (a signal's delivery
// is asynchronous) or d has passed, and returns the last state read.
func waitProcState(ctx context.Context, pid int, want byte, d time.Duration) byte {
	deadline := time.Now().Add(d)
	for {
		s := procState(pid)
		if s == want || time.Now().After(deadline) || ctx.Err() != nil {
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
