package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/browser"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// The Now page's task list, on an operator's browser, follows ownership as
// it changes, pushed from the gateway's watch: a claim shows its owner and
// epoch, a release empties the row, and the page is never reloaded
// meanwhile.
func TestLiveTaskListFollowsClaimAndRelease(t *testing.T) {
	w := newWorld(t)
	b := w.browserAs("operator")
	p := w.page(b, "/console/")
	waitFor(t, p, "the live list to be established", `document.body.dataset.live === "synced"`)
	eval[bool](t, p, `window.sameDocument = true`)

	c := w.client("worker")
	s := w.session(c)
	g, err := s.Claim(ctxOf(t), tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	row := `document.querySelector('tr[data-key="tenant-a/db"]')`
	waitFor(t, p, "the claim on the page", fmt.Sprintf(`(function(){var r=%s; return !!r && r.querySelector("td.owner").innerText === %q && r.querySelector("td.epoch").innerText === "%d"})()`,
		row, g.Owner, g.Epoch))
	if ttl := eval[string](t, p, row+`.querySelector("td.ttl").innerText`); !strings.HasSuffix(ttl, "s") || ttl == "0s" {
		t.Errorf("time left %q, want seconds left on the lease", ttl)
	}
	if got := text(t, p, "#realm"); !strings.Contains(got, "realm") {
		t.Errorf("the operator's Now page shows no realm: %q", got)
	}
	p.Screenshot(t, "now")
	if err := c.Release(ctxOf(t), g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "the release on the page", row+`.querySelector("td.owner").innerText === "—"`)
	if !eval[bool](t, p, `window.sameDocument === true`) {
		t.Error("the page was reloaded: the list must change in place")
	}
}

// An UNKNOWN record is listed first: above a MANUAL_REVIEW one (which,
// in task and operation order, would come first), and both above the
// records that need no human.
func TestUnknownRecordIsAtTheTop(t *testing.T) {
	w := newWorld(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctxOf(t), tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	w.propose(c, g, "op-a-proposed", devprovider.KindDNS, "www", map[string]string{"value": "10.0.0.1"})
	rec := w.propose(c, g, unknownOp, devprovider.KindPromote, "db-2", nil)
	approver := w.client("approver")
	if _, err := approver.Authorize(ctxOf(t), tenant, "db", unknownOp, ledger.Approval{
		ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Policy: "v1"}); err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	w.reviewed(c, g, "op-a-review")
	if rec, _ := c.Dispatch(ctxOf(t), g, unknownOp); rec.State != ledger.Unknown {
		t.Fatalf("dispatch recorded %s, want UNKNOWN (the provider never answers)", rec.State)
	}
	b := w.browserAs("worker-2")
	p := w.page(b, "/console/effects")
	first := text(t, p, ".needs-human tbody tr")
	if !contains(first, "UNKNOWN", unknownOp) {
		t.Errorf("first record %q, want %s UNKNOWN", first, unknownOp)
	}
	order := eval[[]string](t, p, `Array.from(document.querySelectorAll("tr[data-operation]")).map(r => r.dataset.operation)`)
	if len(order) != 3 || order[0] != unknownOp || order[1] != "op-a-review" || order[2] != "op-a-proposed" {
		t.Errorf("records in order %v, want %s, then op-a-review (MANUAL_REVIEW), then op-a-proposed", order, unknownOp)
	}
	p.Screenshot(t, "effects")
	// The count on the Now page links to them.
	if n := text(t, w.page(b, "/console/"), ".attention"); !strings.HasPrefix(n, "2 effects need a human") {
		t.Errorf("Now page says %q, want 2 effects needing a human", n)
	}
}

// A worker's page of a proposed record has no approve button, and a POST
// forged from that page (with the worker's own action token) is refused
// by the API: the worker is no approver. Nothing is written.
func TestWorkerSeesNoApproveButtonAndAForgedApprovalIsRefused(t *testing.T) {
	w := newWorld(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctxOf(t), tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	rec := w.propose(c, g, "op-1", devprovider.KindPromote, "db-2", nil)
	b := w.browserAs("worker")
	p := w.page(b, "/console/op/tenant-a/db/op-1")
	if got := text(t, p, "#record-state"); got != "PROPOSED" {
		t.Fatalf("record state on the page %q, want PROPOSED", got)
	}
	if eval[bool](t, p, `!!document.querySelector("form#approve, form#reject, form#resolve, button.approve")`) {
		t.Error("a worker's page shows an approve, reject or resolve form")
	}
	if ro := text(t, p, "#read-only"); !strings.Contains(ro, "neither an approver nor an operator") {
		t.Errorf("read-only note %q", ro)
	}
	p.Screenshot(t, "operation as a worker")
	forge(t, p, "/console/op/tenant-a/db/op-1/approve", map[string]string{
		"csrf":                `document.querySelector('meta[name="leasegate-action-token"]').content`,
		"params_digest":       fmt.Sprintf("%q", rec.ParamsDigest),
		"precondition_digest": fmt.Sprintf("%q", rec.Precondition.Digest),
		"policy":              `"v1"`,
	})
	waitFor(t, p, "the refusal page", `!!document.querySelector("#refusal")`)
	if got := text(t, p, "#refusal"); !contains(got, "permission_denied", "is not a") {
		t.Errorf("forged approval answered %q, want the API's permission_denied", got)
	}
	p.Screenshot(t, "forged approval refused")
	p.Navigate(t, w.url+"/console/")
	if got := text(t, p, `tr[data-key="tenant-a/db"] td.owner`); got != g.Owner {
		t.Errorf("the worker's Now page shows tenant-a/db owned by %q, want %s", got, g.Owner)
	}
	p.Screenshot(t, "now as a worker")
	p.Navigate(t, w.url+"/console/effects")
	if got := text(t, p, `tr[data-operation="op-1"]`); !contains(got, "PROPOSED", "op-1") {
		t.Errorf("the worker's Effects page lists op-1 as %q", got)
	}
	p.Screenshot(t, "effects as a worker")
	after, _, err := c.Record(ctxOf(t), tenant, "db", "op-1")
	if err != nil || after.State != ledger.Proposed || after.Seq != rec.Seq {
		t.Errorf("record after the forged approval: %s seq %d (%v), want PROPOSED seq %d", after.State, after.Seq, err, rec.Seq)
	}
}

// A cross-site form posted to the console — which the browser sends with
// the client certificate, ambient — is refused before the API is called,
// and so is a same-site POST without the action token.
func TestPostWithoutTheActionTokenIsRefused(t *testing.T) {
	w := newWorld(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctxOf(t), tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	rec := w.propose(c, g, "op-1", devprovider.KindPromote, "db-2", nil)
	target := w.url + "/console/op/tenant-a/db/op-1/approve"
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(rw, `<!doctype html><form id=f method=post action=%q>
<input name=params_digest value=%q><input name=precondition_digest value=%q><input name=policy value=v1></form>
<script>document.getElementById("f").submit()</script>`, target, rec.ParamsDigest, rec.Precondition.Digest)
	}))
	t.Cleanup(evil.Close)
	b := w.browserAs("approver")
	p := b.NewPage(t, 1280, 900)
	p.Navigate(t, evil.URL)
	waitFor(t, p, "the console's answer", `location.href.indexOf("/console/op/") > 0 && !!document.querySelector("#refusal")`)
	if got := text(t, p, "#refusal"); !contains(got, "permission_denied", "another site") {
		t.Errorf("cross-site POST answered %q, want refused as from another site", got)
	}
	p.Screenshot(t, "cross-site post refused")
	// From the console's own origin, without the token: the token is the
	// check (Origin and Sec-Fetch-Site say same-origin here).
	p = w.page(b, "/console/")
	forge(t, p, "/console/op/tenant-a/db/op-1/approve", map[string]string{
		"params_digest": fmt.Sprintf("%q", rec.ParamsDigest), "precondition_digest": fmt.Sprintf("%q", rec.Precondition.Digest), "policy": `"v1"`})
	waitFor(t, p, "the refusal page", `!!document.querySelector("#refusal")`)
	if got := text(t, p, "#refusal"); !contains(got, "permission_denied", "no action token") {
		t.Errorf("same-origin POST without the token answered %q, want refused for the missing token", got)
	}
	// With another identity's token.
	forge(t, p, "/console/op/tenant-a/db/op-1/approve", map[string]string{
		"csrf": fmt.Sprintf("%q", workerToken(t, w)), "params_digest": fmt.Sprintf("%q", rec.ParamsDigest),
		"precondition_digest": fmt.Sprintf("%q", rec.Precondition.Digest), "policy": `"v1"`})
	waitFor(t, p, "the refusal page", `!!document.querySelector("#refusal")`)
	if got := text(t, p, "#refusal"); !contains(got, "permission_denied", "not made for this certificate") {
		t.Errorf("POST with another certificate's token answered %q, want refused", got)
	}
	after, _, err := c.Record(ctxOf(t), tenant, "db", "op-1")
	if err != nil || after.State != ledger.Proposed || after.Seq != rec.Seq {
		t.Errorf("record after the refused POSTs: %s seq %d (%v), want PROPOSED seq %d", after.State, after.Seq, err, rec.Seq)
	}
}

// workerToken is the action token a worker's console page carries.
func workerToken(t *testing.T, w *world) string {
	t.Helper()
	p := w.page(w.browserAs("worker"), "/console/")
	return eval[string](t, p, `document.querySelector('meta[name="leasegate-action-token"]').content`)
}

// forge submits a form built in p's page to path, each field's value a
// JavaScript expression.
func forge(t *testing.T, p *browser.Page, path string, fields map[string]string) {
	t.Helper()
	js := `(function(){var f=document.createElement("form");f.method="post";f.action=` + fmt.Sprintf("%q", path) + `;`
	for k, v := range fields {
		js += fmt.Sprintf(`var i=document.createElement("input");i.name=%q;i.value=%s;f.appendChild(i);`, k, v)
	}
	js += `document.body.appendChild(f);window.forged=true;f.submit();return true})()`
	eval[bool](t, p, js)
	waitFor(t, p, "the answer to the form", `window.forged !== true && document.readyState === "complete"`)
}

// A browser presenting a certificate the CA issued but the configuration
// does not name, and a client presenting none, get the page that asks who
// they are and how to present a certificate: no page of the console, no
// action token, no stream, and a decision from them is refused before
// anything is read or written.
func TestACallerWithoutAKnownCertificateIsAskedWhoItIs(t *testing.T) {
	w := newWorld(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctxOf(t), tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	w.propose(c, g, "op-1", devprovider.KindPromote, "db-2", nil)

	p := w.page(w.browserAs("stranger"), "/console/")
	if got := text(t, p, "h1"); got != "Who are you?" {
		t.Errorf("heading %q, want the page asking who the browser is", got)
	}
	if got := text(t, p, "#refusal"); !contains(got, "unauthenticated", w.certs.IDs["stranger"], "is not in the server's configuration") {
		t.Errorf("the page says %q", got)
	}
	if got := text(t, p, "main"); !strings.Contains(got, "Presenting a certificate") {
		t.Errorf("the page does not say how to present a certificate: %q", got)
	}
	if eval[bool](t, p, `!!document.querySelector('meta[name="leasegate-action-token"], #tasks, form[method="post"]')`) {
		t.Error("the page for an unknown certificate has an action token, the task list or a form")
	}
	p.Screenshot(t, "who are you (a certificate the configuration does not name)")

	lgtest.WritesNothing(t, w.etcd, w.c.Keys().Prefix(), "requests of unknown callers", func() {
		for caller, why := range map[string]string{"": "no client certificate", "stranger": "is not in the server's configuration"} {
			hc := w.httpAs(caller)
			for _, path := range []string{"/console/", "/console/effects", "/console/op/tenant-a/db/op-1", "/console/live"} {
				status, page := get(t, hc, w.url+path)
				if status != http.StatusUnauthorized || !contains(page, "Who are you?", "unauthenticated", why) || strings.Contains(page, "leasegate-action-token") {
					t.Errorf("%s with certificate %q: HTTP %d %s", path, caller, status, refusalIn(page))
				}
			}
			status, page := post(t, hc, w.url+"/console/op/tenant-a/db/op-1/reject", w.url, url.Values{"reason": {"no"}})
			if status != http.StatusUnauthorized || !contains(page, "unauthenticated", why) {
				t.Errorf("a rejection with certificate %q: HTTP %d %s", caller, status, refusalIn(page))
			}
		}
	})
}

// Every answer of the console, a page, a refusal and the "Who are you?"
// page alike, forbids framing (an approve button under another site's
// clickjacking overlay), caching and content sniffing, and lets the page
// load nothing from elsewhere.
func TestPagesForbidFramingCachingAndOtherOrigins(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct{ caller, path string }{
		{"operator", "/console/"}, {"approver", "/console/effects"}, {"worker", "/console/op/tenant-a/db/none"},
		{"stranger", "/console/"}, {"worker", "/console/effects?state=DONE"},
	} {
		resp, err := w.httpAs(c.caller).Get(w.url + c.path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if !contains(csp, "default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "script-src 'self'") ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s as %s (HTTP %d): CSP %q, X-Frame-Options %q, Cache-Control %q, X-Content-Type-Options %q", c.path, c.caller, resp.StatusCode,
				csp, h.Get("X-Frame-Options"), h.Get("Cache-Control"), h.Get("X-Content-Type-Options"))
		}
	}
}
