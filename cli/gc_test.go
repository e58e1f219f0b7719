package cli_test

import (
	"testing"
	"time"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/retention"
)

type gcOut struct {
	Disposition string                `json:"disposition"`
	Applied     bool                  `json:"applied"`
	Horizon     int64                 `json:"horizon"`
	Candidates  []retention.Candidate `json:"candidates"`
	Deleted     []retention.Candidate `json:"deleted"`
}

func TestGC(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, grant := e.claim(t, "acme", "invoices", "w1", "30s")
	want(t, e.lg(t, "commit", "--grant", grant, "--operation", "op-1", "--value", "paid", "--expected-version", "0"),
		cli.ExitDone, coordinator.Committed)
	want(t, e.lg(t, "release", "--grant", grant), cli.ExitDone, coordinator.Released)
	opKey, fenceKey := e.co.Keys().Op("acme", "invoices", "op-1"), e.co.Keys().Fence("acme", "invoices")

	for _, bad := range []string{"0s", "-1s", "500ms", "10"} {
		want(t, e.lg(t, "gc", "--retention", bad), cli.ExitInvalid, coordinator.InvalidInput)
	}

	// The dry run writes nothing, and with no mark yet lists nothing.
	var out gcOut
	e.writesNothing(t, "a dry run", func() {
		r := e.lg(t, "gc", "--retention", "1s")
		want(t, r, cli.ExitDone, coordinator.OK)
		decode(t, r, &out)
		if out.Applied || out.Horizon != 0 || len(out.Candidates) != 0 {
			t.Fatalf("dry run without marks: %+v", out)
		}
	})
	// The first --apply writes a mark and deletes nothing.
	r := e.lg(t, "gc", "--retention", "1s", "--apply")
	want(t, r, cli.ExitDone, "ok")
	decode(t, r, &out)
	if len(out.Deleted) != 0 {
		t.Fatalf("first apply deleted %+v", out.Deleted)
	}
	// What is tested is time passing: the mark must be one window old.
	time.Sleep(1100 * time.Millisecond)
	e.writesNothing(t, "a dry run", func() {
		r := e.lg(t, "gc", "--retention", "1s")
		want(t, r, cli.ExitDone, coordinator.OK)
		decode(t, r, &out)
		if !hasKey(out.Candidates, opKey) || !hasKey(out.Candidates, fenceKey) {
			t.Fatalf("dry run past the window lists %+v; want %s and %s", out.Candidates, opKey, fenceKey)
		}
	})
	r = e.lg(t, "gc", "--retention", "1s", "--apply")
	want(t, r, cli.ExitDone, "ok")
	decode(t, r, &out)
	if !out.Applied || !hasKey(out.Deleted, opKey) || !hasKey(out.Deleted, fenceKey) {
		t.Fatalf("apply past the window: %+v", out)
	}
	// The released grant stays refused without its fence.
	want(t, e.lg(t, "commit", "--grant", grant, "--operation", "op-2", "--value", "x", "--expected-version", "1"),
		cli.ExitRefused, coordinator.StaleOwner)
}

func hasKey(cs []retention.Candidate, key string) bool {
	for _, c := range cs {
		if c.Key == key {
			return true
		}
	}
	return false
}
