package realprov_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasegate/leasegate/testsupport/realprov"
)

// A pair is a primary and a streaming standby; promoting the standby by
// hand moves it to a new timeline; Close leaves no server process behind.
func TestPGPairStreamsPromotesAndStops(t *testing.T) {
	realprov.Skip(t, realprov.HavePostgres)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := realprov.StartPGPair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = p.Close()
		}
	}()
	for _, c := range []struct {
		n    *realprov.PGNode
		want bool
	}{{p.Primary, false}, {p.Standby, true}} {
		got, err := c.n.InRecovery(ctx)
		if err != nil || got != c.want {
			t.Fatalf("%s in recovery = %v, %v; want %v", c.n.Name, got, err, c.want)
		}
	}
	if err := p.Standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Standby.InRecovery(ctx); err != nil || got {
		t.Fatalf("promoted standby in recovery = %v, %v", got, err)
	}
	dir := p.Dir
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if pids := realprov.ProcessesIn(dir); len(pids) != 0 {
		t.Fatalf("processes left in %s: %v", dir, pids)
	}
}
