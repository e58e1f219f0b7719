package realprov_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

// echo is a TCP server that records every line it receives, answers
// "ok <line>", and says when a connection of its ends.
func echo(t *testing.T) (addr string, got <-chan string, ended <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	closed := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close(); closed <- struct{}{} }()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					lines <- sc.Text()
					_, _ = io.WriteString(c, "ok "+sc.Text()+"\n")
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return l.Addr().String(), lines, closed
}

func TestCutProxyCutsAfterOrDropsAtTheRequest(t *testing.T) {
	for _, c := range []struct {
		name      string
		arm       func(p *realprov.CutProxy)
		delivered bool
	}{
		{"cut after: delivered, answer lost", func(p *realprov.CutProxy) { p.CutAfter("promote") }, true},
		{"drop at: never delivered", func(p *realprov.CutProxy) { p.DropAt("promote") }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, got, ended := echo(t)
			p, err := realprov.NewCutProxy(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			conn, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			r := bufio.NewReader(conn)
			_, _ = io.WriteString(conn, "hello\n")
			if line, err := r.ReadString('\n'); err != nil || line != "ok hello\n" {
				t.Fatalf("before arming: %q %v", line, err)
			}
			<-got
			c.arm(p)
			_, _ = io.WriteString(conn, "promote\n")
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if line, err := r.ReadString('\n'); err == nil {
				t.Fatalf("answer %q came back through a cut connection", line)
			}
			lgtest.Wait(t, ended, "the server's side of the cut connection to end")
			select {
			case line := <-got:
				if !c.delivered || line != "promote" {
					t.Fatalf("server received %q; delivered=%v", line, c.delivered)
				}
			default:
				if c.delivered {
					t.Fatal("the request was not delivered")
				}
			}
			if p.Cuts() != 1 {
				t.Fatalf("cuts %d", p.Cuts())
			}
		})
	}
}
