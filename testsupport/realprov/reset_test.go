package realprov_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/leasegate/leasegate/testsupport/realprov"
)

// A disarmed proxy relays the request it was armed to cut, and its answer.
func TestCutProxyDisarmed(t *testing.T) {
	addr, got, _ := echo(t)
	p, err := realprov.NewCutProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.CutAfter("promote")
	p.Disarm()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintln(c, "promote db-b")
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || answer != "ok promote db-b\n" || <-got != "promote db-b" || p.Cuts() != 0 {
		t.Fatalf("answer %q, %v, cuts %d: want the request relayed and answered", answer, err, p.Cuts())
	}
}

// Reclone after a failover (the standby promoted, the primary crashed)
// gives a fresh standby of the primary again: the primary a writer on its
// timeline, the standby in recovery, streaming.
func TestRecloneGivesAFreshStandby(t *testing.T) {
	p := realprov.NewPGPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := p.Standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Reclone(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n    *realprov.PGNode
		want bool
	}{{p.Primary, false}, {p.Standby, true}} {
		if got, err := c.n.InRecovery(ctx); err != nil || got != c.want {
			t.Fatalf("%s in recovery = %v, %v after Reclone; want %v", c.n.Name, got, err, c.want)
		}
	}
	if err := p.Standby.Promote(ctx); err != nil { // a standby again: it can be promoted again
		t.Fatalf("promote the recloned standby: %v", err)
	}
}
