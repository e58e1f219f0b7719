package realprov

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is one server process the harness started: its command, a
// channel closed when it has exited (and been reaped), and its exit error.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProcess starts cmd with its output appended to logPath.
func startProcess(cmd *exec.Cmd, logPath string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the process's whole group (a server and the
// children it forked).
func (p *process) signalGroup(sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop sends sig and waits up to grace for the exit, then kills the group.
// A frozen (SIGSTOPped) group is continued first, or it could not act on
// the signal.
func (p *process) stop(sig syscall.Signal, grace time.Duration) error {
	if p == nil || p.exited() {
		return nil
	}
	_ = syscall.Kill(p.cmd.Process.Pid, sig)
	_ = p.signalGroup(syscall.SIGCONT)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.signalGroup(syscall.SIGKILL)
	select {
	case <-p.done:
		return fmt.Errorf("realprov: %s did not stop within %v; killed", p.cmd.Path, grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("realprov: %s (pid %d) survived SIGKILL", p.cmd.Path, p.cmd.Process.Pid)
	}
}

// server is one server process a harness runs, under a lock: what
// PGNode and DNSServer share (stop, freeze, thaw, running).
type server struct {
	name string
	mu   sync.Mutex
	proc *process
}

// set records a freshly started process.
func (s *server) set(p *process) {
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

// stopWith sends sig, waits up to grace, then kills (process.stop).
func (s *server) stopWith(sig syscall.Signal, grace time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.stop(sig, grace)
}

// Freeze SIGSTOPs the server and every process of its group.
func (s *server) Freeze() error { return s.signal(syscall.SIGSTOP) }

// Thaw continues a frozen server.
func (s *server) Thaw() error { return s.signal(syscall.SIGCONT) }

func (s *server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("realprov: %s never started", s.name)
	}
	return s.proc.signalGroup(sig)
}

// Running reports whether the server process is running.
func (s *server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// freePort is a loopback TCP port free at the moment of asking (and, for
// DNS, free for UDP too).
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = u.Close()
		return port, nil
	}
	return 0, errors.New("realprov: no free loopback port")
}
