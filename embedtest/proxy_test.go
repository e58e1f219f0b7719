package embedtest_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/leasegate/leasegate/embedtest"
)

// TestProxyCutOpen: CutOpen ends the connections open through the proxy —
// the client's side reads the end, and what the target writes after it
// reaches nobody — while a connection opened after it passes.
func TestProxyCutOpen(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	upstream := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			upstream <- c
		}
	}()
	p, err := embedtest.NewProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	dial := func() (net.Conn, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		u := <-upstream
		t.Cleanup(func() { _ = u.Close() })
		return c, u
	}
	echo := func(c, u net.Conn, line string) (string, error) {
		if _, err := c.Write([]byte(line)); err != nil {
			return "", err
		}
		got, err := bufio.NewReader(u).ReadString('\n')
		if err != nil {
			return "", err
		}
		if _, err := u.Write([]byte(got)); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return bufio.NewReader(c).ReadString('\n')
	}

	c1, u1 := dial()
	if got, err := echo(c1, u1, "before\n"); err != nil || got != "before\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.CutOpen()
	_, _ = u1.Write([]byte("after the cut\n"))
	_ = c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c1); len(b) != 0 || err != nil {
		t.Fatalf("the client's side of a cut connection read %q, %v: want the end, nothing more", b, err)
	}
	c2, u2 := dial()
	if got, err := echo(c2, u2, "fresh\n"); err != nil || got != "fresh\n" {
		t.Fatalf("a connection opened after the cut: %q, %v", got, err)
	}
}
