package store_test

import (
	"strings"
	"testing"

	"github.com/leasegate/leasegate/internal/store"
)

// TestPrefixesDoNotReachASibling: every prefix the packages range over
// covers its own keys and none of a sibling's whose name starts the same
// (tenant a and ab, task t and t2, operation op and op1, keyspace /lg and
// /lg2), nor a label holding a '/'.
func TestPrefixesDoNotReachASibling(t *testing.T) {
	t.Parallel()
	k, sibling := store.NewKeys("/lg"), store.NewKeys("/lg2")
	for _, tc := range []struct {
		name, prefix string
		own, others  []string
	}{
		{"a tenant's owner keys", k.TaskPrefix(store.KindOwner, "a"),
			[]string{k.Owner("a", "t")}, []string{k.Owner("ab", "t"), k.Owner("a/b", "t"), k.Fence("a", "t")}},
		{"every tenant's fences", k.TaskPrefix(store.KindFence, ""),
			[]string{k.Fence("a", "t")}, []string{k.Owner("a", "t"), sibling.Fence("a", "t")}},
		{"a task's effects", k.EffectPrefix("a", "t"),
			[]string{k.Effect("a", "t", "op")}, []string{k.Effect("a", "t2", "op"), k.Effect("a", "t/2", "op")}},
		{"a task's journal", k.JournalPrefix("a", "t"),
			[]string{k.JournalEntry("a", "t", "op", 1)}, []string{k.JournalEntry("a", "t2", "op", 1)}},
		{"an operation's journal", k.JournalOperationPrefix("a", "t", "op"),
			[]string{k.JournalEntry("a", "t", "op", 1), k.JournalEntry("a", "t", "op", 12)},
			[]string{k.JournalEntry("a", "t", "op1", 1), k.JournalEntry("a", "t", "op/1", 1)}},
		{"the retention marks", k.RetentionMarks(),
			[]string{k.RetentionMark(5)}, []string{k.RetentionClock(), sibling.RetentionMark(5)}},
		{"the keyspace", k.Prefix() + "/",
			[]string{k.Realm(), k.Origin(), k.Owner("a", "t"), k.State("a", "t"), k.Op("a", "t", "op")},
			[]string{sibling.Realm(), sibling.Owner("a", "t")}},
	} {
		for _, key := range tc.own {
			if !strings.HasPrefix(key, tc.prefix) {
				t.Errorf("%s: prefix %q does not cover its key %q", tc.name, tc.prefix, key)
			}
		}
		for _, key := range tc.others {
			if strings.HasPrefix(key, tc.prefix) {
				t.Errorf("%s: prefix %q covers a sibling's key %q", tc.name, tc.prefix, key)
			}
		}
	}
}

// TestKeysParseBackToTheirLabels: a task, operation or effect key splits
// back into the labels it was built of, '/' and '%' in them included, and
// two different label tuples never share a key.
func TestKeysParseBackToTheirLabels(t *testing.T) {
	t.Parallel()
	k := store.NewKeys("/lg")
	labels := [][3]string{{"a", "t", "op"}, {"a/b", "c", "o/p"}, {"a", "b/c", "op"}, {"50%", "t%2F", "%"}, {"t", "a%2Fb", "x"}, {"t", "a/b", "x"}}
	seen := map[string][3]string{}
	for _, l := range labels {
		tenant, task, op := l[0], l[1], l[2]
		key := k.Owner(tenant, task)
		if kind, gotTenant, gotTask, ok := k.ParseTask(key); !ok || kind != store.KindOwner || gotTenant != tenant || gotTask != task {
			t.Errorf("ParseTask(%q) = %s %q %q %v; want owner %q %q", key, kind, gotTenant, gotTask, ok, tenant, task)
		}
		if gotTenant, gotTask, gotOp, ok := k.ParseOp(k.Op(tenant, task, op)); !ok || gotTenant != tenant || gotTask != task || gotOp != op {
			t.Errorf("ParseOp(%q) = %q %q %q %v", k.Op(tenant, task, op), gotTenant, gotTask, gotOp, ok)
		}
		if gotTenant, gotTask, gotOp, ok := k.ParseEffect(k.Effect(tenant, task, op)); !ok || gotTenant != tenant || gotTask != task || gotOp != op {
			t.Errorf("ParseEffect(%q) = %q %q %q %v", k.Effect(tenant, task, op), gotTenant, gotTask, gotOp, ok)
		}
		if other, dup := seen[key]; dup && other != l {
			t.Errorf("%q and %q share the key %q", other, l, key)
		}
		seen[key] = l
	}
	if _, _, _, ok := k.ParseTask(store.NewKeys("/other").Owner("a", "t")); ok {
		t.Error("ParseTask took another keyspace's key for its own")
	}
}
