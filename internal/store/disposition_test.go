package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestDispositionTable walks the disposition table: every row names a
// disposition once and a class; the done ones, and only they, have exit 0,
// code OK, HTTP 200, no sentinel and no hint; every class has one exit
// status of its own; each sentinel is its row's alone, named for it, and
// errors.Is and DispositionOf find it through an *Error and through a
// wrapping; and the lookups (Class, Hint, Dispositions) answer from it.
func TestDispositionTable(t *testing.T) {
	seen := map[Disposition]bool{}
	sentinelOf := map[error]Disposition{}
	exitOf := map[Class]int{}
	classOf := map[int]Class{}
	for i, m := range table {
		d := m.Disposition
		if d == "" || seen[d] {
			t.Fatalf("row %d: disposition %q empty or twice", i, d)
		}
		seen[d] = true
		if m.Class == ClassUnknown {
			t.Fatalf("%s has no class", d)
		}
		done := m.Class == ClassDone
		if done != (m.Exit == ExitDone) || done != (m.Wire == codes.OK) || done != (m.HTTP == 200) ||
			done != (m.Sentinel == nil) || done != (m.Hint == "") {
			t.Fatalf("%s: done %v, but exit %d, code %v, HTTP %d, sentinel %v, hint %q: done ones, and only they, are 0, OK, 200, none, none",
				d, done, m.Exit, m.Wire, m.HTTP, m.Sentinel, m.Hint)
		}
		if e, ok := exitOf[m.Class]; ok && e != m.Exit {
			t.Fatalf("%s: exit %d, another of its class exits %d", d, m.Exit, e)
		}
		if c, ok := classOf[m.Exit]; ok && c != m.Class {
			t.Fatalf("%s: exit %d is also class %v's", d, m.Exit, c)
		}
		exitOf[m.Class], classOf[m.Exit] = m.Exit, m.Class
		if d.Class() != m.Class || d.Hint() != m.Hint || Dispositions()[i] != d {
			t.Fatalf("%s: the lookups do not answer from its row", d)
		}
		if done {
			if DispositionOf(NewError(d, "", "", "", "", nil)) != d {
				t.Fatalf("DispositionOf(an *Error of %s) = %s", d, DispositionOf(NewError(d, "", "", "", "", nil)))
			}
			continue
		}
		if other, ok := sentinelOf[m.Sentinel]; ok {
			t.Fatalf("%s and %s share a sentinel", d, other)
		}
		sentinelOf[m.Sentinel] = d
		if want := "coordinator: " + strings.ReplaceAll(string(d), "_", " "); m.Sentinel.Error() != want {
			t.Fatalf("%s's sentinel reads %q, want %q", d, m.Sentinel, want)
		}
		cause := errors.New("cause")
		err := fmt.Errorf("wrapped: %w", NewError(d, "", "", "", "", cause))
		if !errors.Is(err, m.Sentinel) || !errors.Is(err, cause) {
			t.Fatalf("%s: errors.Is misses the sentinel or the cause of a wrapped *Error", d)
		}
		if got := DispositionOf(fmt.Errorf("wrapped: %w", m.Sentinel)); got != d {
			t.Fatalf("DispositionOf(a wrapped %v) = %s, want %s", m.Sentinel, got, d)
		}
	}
	for _, d := range []Disposition{"", "granted-ish"} {
		if _, ok := MeaningOf(d); ok || d.Class() != ClassUnknown || d.Hint() != "" {
			t.Fatalf("%q, no disposition, has a row", d)
		}
	}
	if got := DispositionOf(errors.New("foreign")); got != OutcomeUnknown {
		t.Fatalf("a foreign error is %s, want outcome_unknown", got)
	}
}
