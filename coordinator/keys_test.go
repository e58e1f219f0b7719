package coordinator_test

import (
	"strings"
	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestLabelLengthBoundary: a label of MaxLabelLen bytes is valid, one
// byte more is not.
func TestLabelLengthBoundary(t *testing.T) {
	if err := coordinator.CheckLabel("task", strings.Repeat("a", coordinator.MaxLabelLen)); err != nil {
		t.Errorf("a label of %d bytes: %v, want valid", coordinator.MaxLabelLen, err)
	}
	if err := coordinator.CheckLabel("task", strings.Repeat("a", coordinator.MaxLabelLen+1)); err == nil {
		t.Errorf("a label of %d bytes was accepted", coordinator.MaxLabelLen+1)
	}
}

// TestParseTaskRefusesLongerKeys: an operation record's key (kind,
// tenant, task and one more segment) is no task key.
func TestParseTaskRefusesLongerKeys(t *testing.T) {
	t.Parallel()
	k := lgtest.Coordinator(t, embedtest.NewCluster(t)).Keys()
	if kind, tenant, task, ok := k.ParseTask(k.Op("t", "k", "op")); ok {
		t.Errorf("ParseTask(%q) = %s %s %s, true; want not a task key", k.Op("t", "k", "op"), kind, tenant, task)
	}
	if _, tenant, task, ok := k.ParseTask(k.Owner("t", "k")); !ok || tenant != "t" || task != "k" {
		t.Errorf("ParseTask of an owner key: %s %s %v, want t k true", tenant, task, ok)
	}
}
