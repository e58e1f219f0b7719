package lgtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Process is a worker in another language run as a real process that
// answers one JSON object a line on its stdout, each with an "event" (the
// examples' workers: examples/python, clients/typescript). Its stderr goes
// to the test's log under name.
type Process struct {
	t     testing.TB
	Cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan map[string]any
}

// StartProcess starts cmd; the test's cleanup wakes (SIGCONT) and kills it.
func StartProcess(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logWriter{t, name}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{t: t, Cmd: cmd, in: in, lines: make(chan map[string]any, 16)}
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
				t.Errorf("%s printed %q: %v", name, sc.Text(), err)
				continue
			}
			p.lines <- m
		}
	}()
	return p
}

// Next is the process's next line, which must be event.
func (p *Process) Next(event string) map[string]any {
	p.t.Helper()
	select {
	case m, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("the process exited waiting for %s", event)
		}
		if m["event"] != event {
			p.t.Fatalf("the process answered %v, want %s", m, event)
		}
		return m
	case <-time.After(Timeout):
		p.t.Fatalf("no %s from the process", event)
	}
	return nil
}

// Send writes one line to the process's stdin.
func (p *Process) Send(format string, args ...any) {
	p.t.Helper()
	if _, err := fmt.Fprintf(p.in, format+"\n", args...); err != nil {
		p.t.Fatal(err)
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

type logWriter struct {
	t    testing.TB
	name string
}

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s: %s", w.name, b)
	return len(b), nil
}
