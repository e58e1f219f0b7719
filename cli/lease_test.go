package cli_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
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
