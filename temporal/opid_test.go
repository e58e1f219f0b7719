package temporal_test

import (
	"strings"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	lgtemporal "github.com/leasegate/leasegate/temporal"
)

// The operation id is a function of the workflow id and the step alone:
// readable when it can be, a label always, and distinct for distinct pairs
// (including pairs whose concatenations collide).
func TestOperationIDOfIsAStableLabelPerWorkflowAndStep(t *testing.T) {
	long := strings.Repeat("w", 90)
	for _, tc := range []struct {
		wf, step, want string
	}{
		{"northstar-recovery-7", "promote", "northstar-recovery-7/promote"},
		{"northstar-recovery-7", "traffic", "northstar-recovery-7/traffic"},
	} {
		got, err := lgtemporal.OperationIDOf(tc.wf, tc.step)
		if err != nil || got != tc.want {
			t.Fatalf("OperationIDOf(%q, %q) = %q, %v; want %q", tc.wf, tc.step, got, err, tc.want)
		}
	}
	seen := map[string][2]string{}
	for _, p := range [][2]string{
		{"northstar-recovery-7", "promote"}, {"northstar-recovery-8", "promote"},
		{long, "promote"}, {long, "traffic"}, {long + "x", "promote"},
		{"a b", "c"}, {"a", "b c"}, {"a/b", "c"}, {"recovery ü", "promote"},
		{strings.Repeat("x", 70), "ab"}, {strings.Repeat("x", 70) + "a", "b"},
	} {
		id, err := lgtemporal.OperationIDOf(p[0], p[1])
		if err != nil {
			if p[1] == "b c" {
				continue // a step that is not a label is refused
			}
			t.Fatalf("OperationIDOf(%q, %q): %v", p[0], p[1], err)
		}
		if err := coordinator.CheckLabel("operation", id); err != nil {
			t.Fatalf("OperationIDOf(%q, %q) = %q: %v", p[0], p[1], id, err)
		}
		again, _ := lgtemporal.OperationIDOf(p[0], p[1])
		if again != id {
			t.Fatalf("OperationIDOf(%q, %q) changed: %q then %q", p[0], p[1], id, again)
		}
		if prev, dup := seen[id]; dup {
			t.Fatalf("OperationIDOf(%q, %q) = %q, the same as for %q", p[0], p[1], id, prev)
		}
		seen[id] = p
	}
}

func TestOperationIDOfRefusesAnEmptyWorkflowOrABadStep(t *testing.T) {
	for _, p := range [][2]string{{"", "promote"}, {"wf", ""}, {"wf", "two words"}, {"wf", strings.Repeat("s", 81)}, {"a", "b/c"}} {
		if _, err := lgtemporal.OperationIDOf(p[0], p[1]); coordinator.DispositionOf(err) != coordinator.InvalidInput {
			t.Fatalf("OperationIDOf(%q, %q): %v; want invalid_input", p[0], p[1], err)
		}
	}
}

// TaskOf keeps a label workflow id as it is and hashes any other.
func TestTaskOfIsALabel(t *testing.T) {
	if got := lgtemporal.TaskOf("northstar-recovery-7"); got != "northstar-recovery-7" {
		t.Fatalf("TaskOf = %q", got)
	}
	for _, wf := range []string{"with space", strings.Repeat("w", 81), "ü"} {
		got := lgtemporal.TaskOf(wf)
		if !strings.HasPrefix(got, "wf-") || coordinator.CheckLabel("task", got) != nil || got == lgtemporal.TaskOf(wf+"x") {
			t.Fatalf("TaskOf(%q) = %q", wf, got)
		}
	}
}
