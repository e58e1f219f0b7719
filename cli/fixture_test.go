package cli_test

import (
	"strconv"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestSeedFixture drives the seed's fenced-commit fixture through the CLI
// alone, in its order, with real lease expiry: each subtest is one named
// assertion on the JSON disposition and the exit code. Refusals must leave
// the keyspace byte-for-byte unchanged.
func TestSeedFixture(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	commit := func(t *testing.T, grant string, op, value string, version int64) result {
		t.Helper()
		return e.lg(t, "commit", "--grant", grant, "--operation", op, "--value", value,
			"--expected-version", strconv.FormatInt(version, 10))
	}
	refused := func(t *testing.T, r func() result, d coordinator.Disposition) {
		t.Helper()
		e.writesNothing(t, "refused with "+string(d), func() { want(t, r(), cli.ExitRefused, d) })
	}

	// region-a claims with a 1 s lease and never renews: a worker that paused.
	old, oldFile := e.claim(t, "tenant-a", "task-a", "region-a", "1s")

	t.Run("expired owner refused before any regrant", func(t *testing.T) {
		lgtest.WaitOwnerGone(t, e.co, "tenant-a", "task-a")
		refused(t, func() result { return commit(t, oldFile, "operation-a", "synthetic-value", 0) }, coordinator.ExpiredOwner)
	})
	t.Run("renewal cannot revive an expired grant", func(t *testing.T) {
		refused(t, func() result { return e.lg(t, "renew", "--grant", oldFile) }, coordinator.ExpiredOwner)
	})
	var fresh coordinator.Grant
	var freshFile string
	t.Run("regrant has a larger epoch", func(t *testing.T) {
		fresh, freshFile = e.claim(t, "tenant-a", "task-a", "region-b", "10s")
		if fresh.Epoch <= old.Epoch {
			t.Fatalf("new epoch %d not above old %d", fresh.Epoch, old.Epoch)
		}
	})
	t.Run("a second claim is busy and names the holder", func(t *testing.T) {
		r := e.lg(t, "claim", "--tenant", "tenant-a", "--task", "task-a", "--owner", "region-c", "--ttl", "10s")
		obj := want(t, r, cli.ExitRefused, coordinator.Busy)
		holder, _ := obj["holder"].(map[string]any)
		if holder["owner"] != "region-b" || holder["epoch"] != float64(fresh.Epoch) {
			t.Fatalf("holder %v, want region-b at epoch %d", holder, fresh.Epoch)
		}
	})
	t.Run("old owner refused after regrant before the new owner's first write", func(t *testing.T) {
		refused(t, func() result { return commit(t, oldFile, "operation-a", "synthetic-value", 0) }, coordinator.StaleOwner)
	})
	t.Run("equal-epoch impostor refused", func(t *testing.T) {
		impostor := fresh
		impostor.Owner = "another-owner"
		refused(t, func() result { return commit(t, e.grantFile(t, impostor), "operation-a", "synthetic-value", 0) }, coordinator.StaleOwner)
		otherLease := fresh
		otherLease.Lease = old.Lease
		refused(t, func() result { return commit(t, e.grantFile(t, otherLease), "operation-a", "synthetic-value", 0) }, coordinator.StaleOwner)
	})
	t.Run("current owner renews", func(t *testing.T) {
		want(t, e.lg(t, "renew", "--grant", freshFile), cli.ExitDone, coordinator.Renewed)
	})
	var first fencedtxn.Receipt
	t.Run("current owner commits", func(t *testing.T) {
		r := commit(t, freshFile, "operation-a", "synthetic-value", 0)
		want(t, r, cli.ExitDone, coordinator.Committed)
		decode(t, r, &first)
		if first.CommittedVersion != 1 || first.Epoch != fresh.Epoch || first.Revision == 0 {
			t.Fatalf("receipt %+v", first)
		}
	})
	t.Run("historical retry returns the original receipt", func(t *testing.T) {
		e.writesNothing(t, "a retry", func() {
			r := commit(t, freshFile, "operation-a", "synthetic-value", 0)
			want(t, r, cli.ExitDone, coordinator.HistoricalRetry)
			var again fencedtxn.Receipt
			decode(t, r, &again)
			again.Disposition = first.Disposition
			if again != first {
				t.Fatalf("retry receipt %+v, original %+v", again, first)
			}
		})
	})
	t.Run("changed payload under the same operation conflicts", func(t *testing.T) {
		refused(t, func() result { return commit(t, freshFile, "operation-a", "different-value", 0) }, coordinator.OperationConflict)
	})
	t.Run("wrong expected version conflicts", func(t *testing.T) {
		refused(t, func() result { return commit(t, freshFile, "operation-b", "synthetic-value", 0) }, coordinator.VersionConflict)
	})
	t.Run("cross-task intent refused", func(t *testing.T) {
		refused(t, func() result {
			return e.lg(t, "commit", "--grant", freshFile, "--task", "other-task", "--operation", "operation-b",
				"--value", "v", "--expected-version", "1")
		}, coordinator.ScopeMismatch)
	})
	t.Run("unavailable authority holds with nothing written", func(t *testing.T) {
		e.writesNothing(t, "an unavailable commit", func() {
			r := execApp(t, call{}, "--endpoints", deadEndpoint(t), "--prefix", e.prefix, "--dial-timeout", "200ms", "-o", "json",
				"commit", "--grant", freshFile, "--operation", "operation-b", "--value", "synthetic-next", "--expected-version", "1")
			want(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
		})
	})
	t.Run("release, then the released grant is refused", func(t *testing.T) {
		want(t, e.lg(t, "release", "--grant", freshFile), cli.ExitDone, coordinator.Released)
		refused(t, func() result { return e.lg(t, "release", "--grant", freshFile) }, coordinator.ExpiredOwner)
		refused(t, func() result { return commit(t, freshFile, "operation-b", "synthetic-next", 1) }, coordinator.ExpiredOwner)
	})
	var latest coordinator.Grant
	var latestFile string
	t.Run("new owner recovers the exact operation", func(t *testing.T) {
		latest, latestFile = e.claim(t, "tenant-a", "task-a", "region-c", "10s")
		r := commit(t, latestFile, "operation-a", "synthetic-value", 0)
		want(t, r, cli.ExitDone, coordinator.HistoricalRetry)
		var rec fencedtxn.Receipt
		decode(t, r, &rec)
		if rec.Epoch != first.Epoch || rec.CommittedVersion != 1 || rec.Revision != first.Revision {
			t.Fatalf("recovery receipt %+v, original %+v", rec, first)
		}
		r = commit(t, latestFile, "operation-b", "synthetic-next", 1)
		want(t, r, cli.ExitDone, coordinator.Committed)
	})
	t.Run("realm rotation refuses every outstanding grant", func(t *testing.T) {
		r := e.lg(t, "realm", "rotate")
		obj := want(t, r, cli.ExitDone, "ok")
		if obj["previous_realm"] != latest.Realm || obj["realm"] == latest.Realm {
			t.Fatalf("rotate printed %v; the grant's realm was %s", obj, latest.Realm)
		}
		refused(t, func() result { return commit(t, latestFile, "operation-c", "v", 2) }, coordinator.GenerationMismatch)
		again, _ := e.claim(t, "tenant-a", "task-a", "region-c", "10s")
		if again.Realm != obj["realm"] || again.Epoch <= latest.Epoch {
			t.Fatalf("claim after rotation: %+v", again)
		}
	})
}
