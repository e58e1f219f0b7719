package cli_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestLeaseListAndShow: every lease carrying owner keys, with its owner,
// granted TTL, TTL left and tasks; one lease by hex ID, decimal ID or
// grant file; a lease gone is expired_owner.
func TestLeaseListAndShow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g1, file1 := e.claim(t, "acme", "invoices", "worker-1", "30s")
	g2, _ := e.claim(t, "acme", "payroll", "worker-2", "20s")

	var list struct {
		Disposition string                  `json:"disposition"`
		Leases      []coordinator.LeaseInfo `json:"leases"`
	}
	r := e.lg(t, "lease", "list")
	decode(t, r, &list)
	if list.Disposition != "ok" || len(list.Leases) != 2 {
		t.Fatalf("lease list: %s", r.stdout)
	}
	byID := map[int64]coordinator.LeaseInfo{}
	for _, li := range list.Leases {
		byID[li.ID] = li
	}
	for _, w := range []struct {
		g   coordinator.Grant
		ttl int64
	}{{g1, 30}, {g2, 20}} {
		li := byID[w.g.Lease]
		if li.Owner != w.g.Owner || li.GrantedTTL != w.ttl || li.TTLLeft <= 0 || li.TTLLeft > w.ttl ||
			len(li.Tasks) != 1 || li.Tasks[0].Task != w.g.Task || li.Tasks[0].Epoch != w.g.Epoch {
			t.Fatalf("lease %x: %+v, want the grant %+v", w.g.Lease, li, w.g)
		}
		// In JSON the ID is a hex string, as etcdctl prints it.
		if !strings.Contains(r.stdout, `"id":"`+coordinator.FormatLeaseID(w.g.Lease)+`"`) {
			t.Fatalf("lease list JSON does not carry %x as a hex string: %s", w.g.Lease, r.stdout)
		}
	}

	t.Run("table", func(t *testing.T) {
		r := e.lg(t, "lease", "list", "-o", "table")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 3 {
			t.Fatalf("exit %d\n%s", r.code, r.stdout)
		}
		wantFields(t, lines[0], "LEASE", "OWNER", "GRANTED-TTL", "TTL", "TASKS")
		if !strings.Contains(r.stdout, coordinator.FormatLeaseID(g1.Lease)+"  worker-1  30s") ||
			!strings.Contains(r.stdout, "acme/invoices") || !strings.Contains(r.stdout, "acme/payroll") {
			t.Fatalf("lease list table:\n%s", r.stdout)
		}
	})
	for name, args := range map[string][]string{
		"hex":     {"lease", "show", coordinator.FormatLeaseID(g1.Lease)},
		"decimal": {"lease", "show", strconv.FormatInt(g1.Lease, 10)},
		"grant":   {"lease", "show", "--grant", file1},
	} {
		t.Run("show by "+name, func(t *testing.T) {
			var show struct {
				Disposition string                `json:"disposition"`
				Lease       coordinator.LeaseInfo `json:"lease"`
			}
			r := e.lg(t, args...)
			decode(t, r, &show)
			if li := show.Lease; show.Disposition != "ok" || li.ID != g1.Lease || li.Owner != "worker-1" || li.GrantedTTL != 30 ||
				len(li.Tasks) != 1 || li.Tasks[0].Task != "invoices" {
				t.Fatalf("lease show: %s", r.stdout)
			}
		})
	}
	t.Run("a lease gone", func(t *testing.T) {
		want(t, e.lg(t, "lease", "revoke", "--lease", coordinator.FormatLeaseID(g2.Lease)), cli.ExitDone, "ok")
		r := e.lg(t, "lease", "show", coordinator.FormatLeaseID(g2.Lease))
		wantOperatorAdvice(t, r, cli.ExitRefused, coordinator.ExpiredOwner, "etcd no longer knows this lease")
		if !strings.Contains(r.stderr, "lease list") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, args := range [][]string{
			{"lease", "show"},
			{"lease", "show", "xyz"},
			{"lease", "show", "1", "2"},
			{"lease", "show", "1", "--grant", file1},
		} {
			want(t, e.lg(t, args...), cli.ExitInvalid, coordinator.InvalidInput)
		}
	})
}

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

// TestLeaseRevoke: the operator's forced expiry names what it vacated; a
// lease already gone is refused (exit 1); hex IDs as etcdctl prints them
// are accepted.
func TestLeaseRevoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, _ := e.claim(t, "acme", "invoices", "worker-1", "30s")
	hex := fmt.Sprintf("%016x", g.Lease) // as status and etcdctl print it
	r := e.lg(t, "lease", "revoke", "--lease", hex)
	obj := want(t, r, cli.ExitDone, "ok")
	if obj["lease"] != fmt.Sprintf("%016x", g.Lease) || fmt.Sprint(obj["vacated"]) != "[map[task:invoices tenant:acme]]" {
		t.Fatalf("revoke printed %v", obj)
	}
	if o, err := e.co.Owner(t.Context(), "acme", "invoices"); err != nil || o.Owned() {
		t.Fatalf("after revoke: %+v, %v", o, err)
	}
	e.writesNothing(t, "a refused revoke", func() {
		r := e.lg(t, "lease", "revoke", "--lease", strconv.FormatInt(g.Lease, 10))
		wantOperatorAdvice(t, r, cli.ExitRefused, coordinator.ExpiredOwner, "etcd no longer knows this lease")
		if !strings.Contains(r.stderr, "nothing to revoke") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})

	// --grant revokes the grant's lease: claim's output is accepted as is.
	g2, file := e.claim(t, "acme", "invoices", "worker-2", "30s")
	r = e.lg(t, "lease", "revoke", "--grant", file)
	if obj := want(t, r, cli.ExitDone, "ok"); obj["lease"] != fmt.Sprintf("%016x", g2.Lease) {
		t.Fatalf("revoke --grant printed %v", obj)
	}
	if o, err := e.co.Owner(t.Context(), "acme", "invoices"); err != nil || o.Owned() {
		t.Fatalf("after revoke --grant: %+v, %v", o, err)
	}
	e.writesNothing(t, "an invalid revoke", func() {
		want(t, e.lg(t, "lease", "revoke", "--grant", file, "--lease", "1"), cli.ExitInvalid, coordinator.InvalidInput)
		want(t, e.lg(t, "lease", "revoke", "--grant", e.file(t, "{}")), cli.ExitInvalid, coordinator.InvalidInput)
	})

	// The table says the lease is revoked, not the TTL it had before.
	g3, _ := e.claim(t, "acme", "invoices", "worker-3", "30s")
	r = e.lg(t, "-o", "table", "lease", "revoke", "--lease", coordinator.FormatLeaseID(g3.Lease))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "revoked (") || !strings.Contains(lines[1], "s were left)") {
		t.Fatalf("revoke table:\n%s", r.stdout)
	}
}
