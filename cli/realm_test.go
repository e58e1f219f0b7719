package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

type realmOut struct {
	Disposition string              `json:"disposition"`
	Realm       string              `json:"realm"`
	Origin      *coordinator.Origin `json:"origin"`
	Warnings    []string            `json:"warnings"`
}

// TestRealmShowAfterRestore: realm show is quiet on the cluster that minted
// the realm, warns on a restore of its snapshot (bumped, as the runbook
// says), and is quiet again after realm rotate.
func TestRealmShowAfterRestore(t *testing.T) {
	t.Parallel()
	a := embedtest.NewCluster(t)
	e := newEnvOn(t, a)
	ctx := lgtest.Ctx(t)
	for i := 0; i < 2*store.RestoreSlack; i++ { // some history before the snapshot
		if _, err := e.client().Put(ctx, fmt.Sprintf("/history/%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	show := func(e *env) realmOut {
		t.Helper()
		var out realmOut
		r := e.lg(t, "realm", "show")
		want(t, r, cli.ExitDone, "ok")
		decode(t, r, &out)
		return out
	}
	if out := show(e); len(out.Warnings) != 0 || out.Origin == nil {
		t.Fatalf("realm show on the minting cluster: %+v", out)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := a.SaveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	b := embedtest.NewRestoredCluster(t, snap, embedtest.WithRevisionBump(1_000_000), embedtest.WithMarkCompacted())
	restored := &env{endpoints: b.Endpoints(), prefix: e.prefix, co: e.co, dir: e.dir}
	out := show(restored)
	if len(out.Warnings) == 0 || !strings.Contains(strings.Join(out.Warnings, " "), "restored") {
		t.Fatalf("realm show after a restore: %+v; want a warning", out)
	}
	want(t, restored.lg(t, "realm", "rotate"), cli.ExitDone, "ok")
	if out := show(restored); len(out.Warnings) != 0 {
		t.Fatalf("realm show after rotation: %+v; want no warning", out)
	}
}
