package bench

import (
	"reflect"
	"slices"
	"testing"
)

// TestDefaultsLeaveTheCallersConfig: filling in a config's defaults
// returns a copy; the caller's config, the slices it holds and the
// package's default lists are left as they were, and the copy's slices are
// its own (a report built from them cannot change them afterwards).
func TestDefaultsLeaveTheCallersConfig(t *testing.T) {
	t.Run("run", func(t *testing.T) {
		workers := []int{2, 3}
		in := Config{Etcd: Etcd{Dir: t.TempDir()}, Workers: workers}
		before := in
		got, err := in.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, before) || !slices.Equal(workers, []int{2, 3}) {
			t.Fatalf("the caller's config changed: %+v", in)
		}
		if got.Rounds != 3 || got.Duration == 0 || got.Prefix == "" || got.Logger == nil || !slices.Equal(got.Variants, variants) {
			t.Fatalf("defaults not filled in: %+v", got)
		}
		want := slices.Clone(variants)
		got.Variants[0], got.Workers[0] = "written", 99
		if !slices.Equal(variants, want) || workers[0] != 2 {
			t.Errorf("the copy shares its slices: variants %v, the caller's workers %v", variants, workers)
		}
	})
	t.Run("takeover", func(t *testing.T) {
		in := TakeoverConfig{Etcd: Etcd{Dir: t.TempDir()}}
		before := in
		got, err := in.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, before) {
			t.Fatalf("the caller's config changed: %+v", in)
		}
		wantCauses, wantContenders := slices.Clone(causes), slices.Clone(contenders)
		got.Causes[0], got.Contenders[0] = "written", "written"
		if !slices.Equal(causes, wantCauses) || !slices.Equal(contenders, wantContenders) {
			t.Errorf("the copy shares the package's lists: %v, %v", causes, contenders)
		}
	})
	t.Run("scale", func(t *testing.T) {
		sizes := []int{5, 7}
		in := ScaleConfig{Etcd: Etcd{Dir: t.TempDir()}, Sizes: sizes}
		before := in
		got, err := in.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, before) || got.Workers != 16 || got.PerLock != 7 {
			t.Fatalf("the caller's config changed (%+v) or defaults missing (%+v)", in, got)
		}
		got.Sizes[0] = 99
		if sizes[0] != 5 {
			t.Errorf("the copy shares the caller's sizes: %v", sizes)
		}
	})
}

// TestListsAreCopies: each list the package exports is a new slice per
// call, so a caller that changes one changes nothing the package ranges
// over.
func TestListsAreCopies(t *testing.T) {
	for name, list := range map[string]func() []string{
		"Variants": Variants, "Causes": Causes, "Contenders": Contenders, "AllContenders": AllContenders,
	} {
		got := list()
		want := slices.Clone(got)
		got[0] = "changed"
		if !slices.Equal(list(), want) {
			t.Errorf("%s() shares its slice with the caller: %v", name, list())
		}
	}
}
