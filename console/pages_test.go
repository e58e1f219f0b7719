package console_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/gateway/devprovider"
)

// twoTenants is a world with records in tenant-a's tasks "db" and "db2"
// and in tenantAB's "db" (names sharing prefixes): one of each kind, one
// of them REJECTED.
func twoTenants(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	ctx := ctxOf(t)
	c, cab := w.client("worker"), w.client("worker-ab")
	s, sab := w.session(c), w.session(cab)
	gdb, err := s.Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	gdb2, err := s.Claim(ctx, tenant, "db2")
	if err != nil {
		t.Fatal(err)
	}
	gab, err := sab.Claim(ctx, tenantAB, "db")
	if err != nil {
		t.Fatal(err)
	}
	w.propose(c, gdb, "a-db-promote", devprovider.KindPromote, "db-2", nil)
	w.propose(c, gdb, "a-db-dns", devprovider.KindDNS, "www", map[string]string{"value": "10.0.0.1"})
	if _, err := w.client("approver").Reject(ctx, tenant, "db", "a-db-dns", "not now"); err != nil {
		t.Fatal(err)
	}
	w.propose(c, gdb2, "a-db2-promote", devprovider.KindPromote, "db2-replica", nil)
	w.propose(cab, gab, "ab-db-dns", devprovider.KindDNS, "ab-secret-target", map[string]string{"value": "10.9.9.9"})
	return w
}

var operationRE = regexp.MustCompile(`data-operation="([^"]+)"`)

// operations are the operations a page lists, sorted.
func operations(page string) []string {
	var out []string
	for _, m := range operationRE.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

// Each filter of the Effects page keeps exactly the records that match
// it: a tenant not its sibling sharing the prefix (tenant-a, tenant-ab), a
// task not its sibling (db, db2), a state, a kind whole (not a kind's
// prefix); filters combine. A task without its tenant, or a state the
// ledger does not have, is refused.
func TestEffectsFiltersKeepExactlyTheMatchingRecords(t *testing.T) {
	w := twoTenants(t)
	op := w.httpAs("operator")
	all := []string{"a-db-dns", "a-db-promote", "a-db2-promote", "ab-db-dns"}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", all},
		{"tenant=tenant-a", []string{"a-db-dns", "a-db-promote", "a-db2-promote"}},
		{"tenant=tenant-ab", []string{"ab-db-dns"}},
		{"tenant=tenant-a&task=db", []string{"a-db-dns", "a-db-promote"}},
		{"tenant=tenant-a&task=db2", []string{"a-db2-promote"}},
		{"tenant=tenant-a&task=d", nil},
		{"tenant=tenant-", nil},
		{"state=REJECTED", []string{"a-db-dns"}},
		{"state=PROPOSED", []string{"a-db-promote", "a-db2-promote", "ab-db-dns"}},
		{"state=CONFIRMED", nil},
		{"kind=db.promote", []string{"a-db-promote", "a-db2-promote"}},
		{"kind=db", nil},
		{"kind=dns.upsert&tenant=tenant-ab", []string{"ab-db-dns"}},
		{"kind=dns.upsert&state=PROPOSED", []string{"ab-db-dns"}},
		{"tenant=tenant-a&task=db&state=PROPOSED&kind=db.promote", []string{"a-db-promote"}},
	} {
		status, page := get(t, op, w.url+"/console/effects?"+c.query)
		if got := operations(page); status != http.StatusOK || !slices.Equal(got, c.want) {
			t.Errorf("effects?%s: HTTP %d, records %v, want %v %s", c.query, status, got, c.want, refusalIn(page))
		}
	}
	for query, why := range map[string]string{"task=db": "a task filter needs its tenant", "state=DONE": "state:"} {
		status, page := get(t, op, w.url+"/console/effects?"+query)
		if status != http.StatusBadRequest || !contains(page, "invalid_input", why) || len(operations(page)) != 0 {
			t.Errorf("effects?%s: HTTP %d %s, records %v; want refused, %q", query, status, refusalIn(page), operations(page), why)
		}
	}
}

var taskKeyRE = regexp.MustCompile(`<tr data-key="([^"]+)"`)

// An identity of one tenant sees that tenant's tasks and records, and
// nothing of another's, on every page: not the tasks of tenant-ab (whose
// name begins with its tenant's) on the Now page, not its records on the
// Effects page, asked or not, not its operation's page. An approver of both
// tenants sees both.
func TestAnIdentitySeesOnlyItsTenantsOnEveryPage(t *testing.T) {
	w := twoTenants(t)
	secret := []string{"ab-db-dns", "ab-secret-target", "10.9.9.9", "tenant-ab/"}
	leaks := func(page string) []string {
		var out []string
		for _, s := range secret {
			if strings.Contains(page, s) {
				out = append(out, s)
			}
		}
		return out
	}
	for _, caller := range []string{"worker", "approver"} {
		hc := w.httpAs(caller)
		status, page := get(t, hc, w.url+"/console/")
		var tasks []string
		for _, m := range taskKeyRE.FindAllStringSubmatch(page, -1) {
			tasks = append(tasks, m[1])
		}
		if want := []string{"tenant-a/db", "tenant-a/db2"}; status != http.StatusOK || !slices.Equal(tasks, want) {
			t.Errorf("%s's Now page: HTTP %d, tasks %v, want %v", caller, status, tasks, want)
		}
		if l := leaks(page); len(l) > 0 || strings.Contains(page, tenantAB) {
			t.Errorf("%s's Now page shows tenant-ab's %v", caller, l)
		}
		status, page = get(t, hc, w.url+"/console/effects")
		if want := []string{"a-db-dns", "a-db-promote", "a-db2-promote"}; status != http.StatusOK || !slices.Equal(operations(page), want) {
			t.Errorf("%s's Effects page: HTTP %d, records %v, want %v", caller, status, operations(page), want)
		}
		if l := leaks(page); len(l) > 0 {
			t.Errorf("%s's Effects page shows tenant-ab's %v", caller, l)
		}
		for _, path := range []string{"/console/effects?tenant=tenant-ab", "/console/effects?tenant=tenant-ab&task=db&state=PROPOSED",
			"/console/op/tenant-ab/db/ab-db-dns"} {
			status, page := get(t, hc, w.url+path)
			if status != http.StatusForbidden || !contains(page, "permission_denied") {
				t.Errorf("%s's %s: HTTP %d %s, want the API's permission_denied", caller, path, status, refusalIn(page))
			}
			// The refused operation's page names the operation asked for
			// (its heading); nothing of the record.
			if l := leaks(strings.ReplaceAll(page, "Operation ab-db-dns", "")); len(l) > 0 {
				t.Errorf("%s's refused %s shows tenant-ab's %v", caller, path, l)
			}
		}
	}
	hc := w.httpAs("approver-ab")
	_, page := get(t, hc, w.url+"/console/")
	var tasks []string
	for _, m := range taskKeyRE.FindAllStringSubmatch(page, -1) {
		tasks = append(tasks, m[1])
	}
	if want := []string{"tenant-a/db", "tenant-a/db2", "tenant-ab/db"}; !slices.Equal(tasks, want) {
		t.Errorf("the Now page of an approver of both tenants: tasks %v, want %v", tasks, want)
	}
	if _, page := get(t, hc, w.url+"/console/effects"); !slices.Equal(operations(page), []string{"a-db-dns", "a-db-promote", "a-db2-promote", "ab-db-dns"}) {
		t.Errorf("the Effects page of an approver of both tenants: %v", operations(page))
	}
	if status, page := get(t, hc, w.url+"/console/op/tenant-ab/db/ab-db-dns"); status != http.StatusOK || !strings.Contains(page, "ab-secret-target") {
		t.Errorf("the approver of both tenants' page of tenant-ab's operation: HTTP %d %s", status, refusalIn(page))
	}
}

// The operation page recomputes the parameters' digest from the effect it
// shows: for a record whose parameters were changed in etcd behind the
// ledger's back, it says DIFFERENT — do not approve, where the approver
// reads the digest it approves.
func TestTheOperationPageSaysWhenTheParametersAreNotTheirDigest(t *testing.T) {
	w := newWorld(t)
	ctx := ctxOf(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	w.propose(c, g, "op-1", devprovider.KindDNS, "www", map[string]string{"value": "10.0.0.1"})
	ap := w.httpAs("approver")
	if _, page := get(t, ap, w.url+"/console/op/tenant-a/db/op-1"); !strings.Contains(page, "recomputed from the effect below: the same") {
		t.Fatalf("the page of an untouched record does not say its digest is the effect's: %s", refusalIn(page))
	}
	resp, err := w.etcd.Get(ctx, w.c.Keys().Prefix(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, kv := range resp.Kvs {
		var rec map[string]any
		if json.Unmarshal(kv.Value, &rec) != nil || rec["operation"] != "op-1" || rec["params_digest"] == nil {
			continue
		}
		e := rec["effect"].(map[string]any)
		e["params"] = map[string]string{"value": "10.6.6.6"}
		b, _ := json.Marshal(rec)
		if _, err := w.etcd.Put(ctx, string(kv.Key), string(b)); err != nil {
			t.Fatal(err)
		}
		changed++
	}
	if changed != 1 {
		t.Fatalf("changed %d records, want op-1's", changed)
	}
	_, page := get(t, ap, w.url+"/console/op/tenant-a/db/op-1")
	if !contains(page, "10.6.6.6", "recomputed from the effect below: DIFFERENT — do not approve") {
		t.Errorf("the page of a record whose parameters are not their digest does not say so:\n%.3000s", page)
	}
}
