package drill

import (
	"slices"
	"testing"
)

// TestListsAreCopies: each list the package exports is a new slice per
// call, so a caller that changes one changes nothing Run or Grade ranges
// over.
func TestListsAreCopies(t *testing.T) {
	g := Graders()
	g[0] = "changed"
	f, r := FaultKinds(), RealFaultKinds()
	f[0], r[0] = "changed", "changed"
	s := Scenarios()
	s[0] = "changed"
	if !slices.Equal(Graders(), graders) || graders[0] == "changed" || faultKinds[0] == "changed" ||
		realFaultKinds[0] == "changed" || scenarios[0] == "changed" {
		t.Fatalf("a list shares its slice with the caller: %v %v %v %v", graders, faultKinds, realFaultKinds, scenarios)
	}
}
