package coordinator_test

import (
	"errors"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
)

// An outcome_unknown is its own class, never a hold: a hold says nothing
// was written, so a caller that reads it as one may act as though the
// request never applied. Only authority_unavailable and no_space are holds.
func TestOutcomeUnknownIsNotAHold(t *testing.T) {
	if got := coordinator.OutcomeUnknown.Class(); got != coordinator.ClassOutcomeUnknown {
		t.Fatalf("OutcomeUnknown.Class() = %v, want ClassOutcomeUnknown (%v)", got, coordinator.ClassOutcomeUnknown)
	}
	foreign := errors.New("some transport error of no leasegate package")
	if got := coordinator.DispositionOf(foreign).Class(); got != coordinator.ClassOutcomeUnknown {
		t.Fatalf("class of a foreign error = %v, want ClassOutcomeUnknown", got)
	}
	for _, d := range coordinator.Dispositions() {
		hold := d == coordinator.AuthorityUnavailable || d == coordinator.NoSpace
		if (d.Class() == coordinator.ClassUnavailable) != hold {
			t.Errorf("%s.Class() = %v: only authority_unavailable and no_space are holds", d, d.Class())
		}
	}
}
