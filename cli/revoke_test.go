package cli_test

import (
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestLeaseRevokeOnlyLeasegateLeases: lease revoke revokes a lease that
// carries owner keys of the keyspace and nothing else. Another
// application's lease — key-less, or holding /other/app-lock — and a
// leasegate lease with a foreign key attached are refused (exit 2), and
// nothing is revoked or deleted: as root and as a user whose role has the
// prefix only. --force revokes them, as far as etcd's auth lets the user.
func TestLeaseRevokeOnlyLeasegateLeases(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithAuth("root-pw"))
	cl.AddPrefixUser(t, "worker", "worker-pw", "/lg/")
	root := cl.Client(t)
	ctx := lgtest.Ctx(t)
	eps := strings.Join(cl.Endpoints(), ",")
	for _, u := range []struct{ name, user, password string }{
		{"as root", embedtest.RootUser, cl.RootPassword()},
		{"as a user with the prefix only", "worker", "worker-pw"},
	} {
		t.Run(u.name, func(t *testing.T) {
			lg := func(args ...string) result {
				t.Helper()
				return execApp(t, call{}, append([]string{"--endpoints", eps, "--prefix", "/lg", "-o", "json",
					"--user", u.user, "--password", u.password}, args...)...)
			}
			grantOf := func(task string) coordinator.Grant {
				t.Helper()
				r := lg("claim", "--tenant", "acme", "--task", task, "--owner", "w", "--ttl", "60s")
				want(t, r, cli.ExitDone, coordinator.Granted)
				var out claimOut
				decode(t, r, &out)
				return out.Grant
			}
			lease := func(keys ...string) int64 {
				t.Helper()
				l, err := root.Grant(ctx, 60)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					if _, err := root.Put(ctx, k, "held", clientv3.WithLease(l.ID)); err != nil {
						t.Fatal(err)
					}
				}
				return int64(l.ID)
			}
			alive := func(id int64) bool {
				t.Helper()
				resp, err := root.TimeToLive(ctx, clientv3.LeaseID(id))
				if err != nil {
					t.Fatal(err)
				}
				return resp.TTL > 0
			}
			appLock := "/other/app-lock-" + u.user
			rider := "/other/rider-" + u.user
			keyless, locked := lease(), lease(appLock)
			mixed := grantOf("mixed-" + u.user)
			if _, err := root.Put(ctx, rider, "rides", clientv3.WithLease(clientv3.LeaseID(mixed.Lease))); err != nil {
				t.Fatal(err)
			}

			lgtest.WritesNothing(t, root, "", "refused revokes", func() {
				for name, id := range map[string]int64{"a key-less lease": keyless, "a lease holding " + appLock: locked,
					"a leasegate lease with a foreign key": mixed.Lease} {
					r := lg("lease", "revoke", "--lease", coordinator.FormatLeaseID(id))
					wantOperatorAdvice(t, r, cli.ExitInvalid, coordinator.InvalidInput, revokeForceAdvice)
					if !alive(id) || !strings.Contains(r.stderr, "--force") {
						t.Fatalf("%s: revoked (%v) or the line does not point to --force: %s", name, !alive(id), r.stderr)
					}
				}
			})

			// A leasegate lease: revoked, its task vacated.
			g := grantOf("invoices-" + u.user)
			var out struct {
				Vacated []struct{ Tenant, Task string } `json:"vacated"`
			}
			r := lg("lease", "revoke", "--lease", coordinator.FormatLeaseID(g.Lease))
			want(t, r, cli.ExitDone, "ok")
			decode(t, r, &out)
			if alive(g.Lease) || len(out.Vacated) != 1 || out.Vacated[0].Task != g.Task {
				t.Fatalf("revoke of a leasegate lease: %s", r.stdout)
			}

			// --force: etcd lets any user revoke a key-less lease; a lease
			// with keys only a user who may write them.
			want(t, lg("lease", "revoke", "--force", "--lease", coordinator.FormatLeaseID(keyless)), cli.ExitDone, "ok")
			if alive(keyless) {
				t.Fatal("--force did not revoke the key-less lease")
			}
			r = lg("lease", "revoke", "--force", "--lease", coordinator.FormatLeaseID(locked))
			lock, err := root.Get(ctx, appLock)
			if err != nil {
				t.Fatal(err)
			}
			if u.user == embedtest.RootUser {
				want(t, r, cli.ExitDone, "ok")
				if alive(locked) || len(lock.Kvs) != 0 {
					t.Fatalf("root's --force left the lease or %s", appLock)
				}
			} else {
				want(t, r, cli.ExitDenied, coordinator.PermissionDenied)
				if !alive(locked) || len(lock.Kvs) != 1 {
					t.Fatalf("a denied --force revoked the lease or deleted %s", appLock)
				}
			}
		})
	}
}

// revokeForceAdvice begins the line of a refused lease revoke.
const revokeForceAdvice = "check the lease ID ('leasegate lease list' shows leasegate's leases); " +
	"'leasegate lease revoke --force' with --endpoints"

// TestLeaseRevokeThroughTheGatewayOffersNoForce: through --gateway, the
// refusal of another application's lease points to the check of its ID
// and says that only --endpoints can force it; its detail names no flag
// the gateway's caller could try, and the lease is not revoked.
func TestLeaseRevokeThroughTheGatewayOffersNoForce(t *testing.T) {
	t.Parallel()
	g := newGatewayEnv(t)
	ctx := lgtest.Ctx(t)
	l, err := g.client().Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	r := g.as(t, "op1", "lease", "revoke", "--lease", coordinator.FormatLeaseID(int64(l.ID)))
	wantOperatorAdvice(t, r, cli.ExitInvalid, coordinator.InvalidInput, revokeForceAdvice)
	var out struct{ Detail, Hint string }
	decode(t, r, &out)
	if strings.Contains(out.Detail, "--force") || !strings.Contains(out.Hint, "with --endpoints") ||
		!strings.Contains(out.Hint, "the gateway revokes only leasegate leases") {
		t.Fatalf("the refusal offers the gateway's caller a --force it does not have: %s", r.stdout)
	}
	ttl, err := g.client().TimeToLive(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL <= 0 {
		t.Fatal("the refused revoke revoked the lease")
	}
}
