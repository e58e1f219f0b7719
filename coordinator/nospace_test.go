package coordinator_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestNoSpace fills a member started with a tiny backend quota until etcd
// raises its NOSPACE alarm; from then on every leasegate write is no_space
// (a hold, nothing written), never outcome_unknown or a refusal.
func TestNoSpace(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithQuotaBackendBytes(1<<20))
	cli := cl.Client(t)
	c := lgtest.CoordinatorOf(t, cli)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 30*time.Second)
	g := lgtest.Claim(t, s, "t", "full")

	// etcd compares the quota with the backend's file size, which grows only
	// when its write batch commits (every 100 ms): without -race, a few
	// hundred puts can all land inside one batch interval, so the bound is
	// far above the ~16 puts the quota holds.
	filler := strings.Repeat("x", 64<<10)
	const most = 2000
	for i := 0; ; i++ {
		if i == most {
			t.Fatalf("no NOSPACE after %d puts of 64 KiB on a 1 MiB quota", most)
		}
		_, err := cli.Put(ctx, fmt.Sprintf("/filler/%d", i), filler)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil || len(alarms.Alarms) == 0 {
		t.Fatalf("alarm list: %v %v; want the NOSPACE alarm raised", alarms, err)
	}

	prefix := c.Keys().Prefix()
	lgtest.RefusedWritingNothing(t, cli, prefix, coordinator.NoSpace, func() error {
		_, err = fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "full", Operation: "op-1", Value: []byte("v")})
		return err
	})
	if !errors.Is(err, coordinator.ErrNoSpace) || coordinator.NoSpace.Class() != coordinator.ClassUnavailable {
		t.Fatalf("commit: %v; want ErrNoSpace, a hold", err)
	}
	lgtest.RefusedWritingNothing(t, cli, prefix, coordinator.NoSpace, func() error { _, err := s.Claim(ctx, "t", "other"); return err })
	lgtest.RefusedWritingNothing(t, cli, prefix, coordinator.NoSpace, func() error {
		_, err := c.NewSession(ctx, "late", 10*time.Second)
		return err
	})
	lgtest.RefusedWritingNothing(t, cli, prefix, coordinator.NoSpace, func() error { _, err := c.RotateRealm(ctx); return err })
	// Reads still work: the grant is still current.
	if own, err := c.Owner(ctx, "t", "full"); err != nil || own.Epoch != g.Epoch {
		t.Fatalf("owner under NOSPACE: %+v %v", own, err)
	}
}
