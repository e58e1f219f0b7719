package console_test

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/browser"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// An operator resolves a MANUAL_REVIEW record from its page: the form
// offers the states the ledger allows from there; CONFIRMED or FAILED
// without the provider's evidence, and evidence whose detail is not JSON,
// are refused with nothing written; with evidence, the record is CONFIRMED,
// and both the page after the redirect and the journal read through the
// API name the operator from its certificate. The approver's and the
// worker's pages of the record have no resolve form, and a resolve POST
// forged with the approver's own action token is the API's
// permission_denied, nothing written.
func TestOperatorResolvesAManualReviewRecordFromThePage(t *testing.T) {
	w := newWorld(t)
	ctx := ctxOf(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	rec := w.reviewed(c, g, "op-review")
	const page = "/console/op/tenant-a/db/op-review"
	operator := w.certs.IDs["operator"]

	b := w.browserAs("operator")
	p := w.page(b, page)
	if got := text(t, p, "#record-state"); got != "MANUAL_REVIEW" {
		t.Fatalf("record state on the page %q, want MANUAL_REVIEW", got)
	}
	opts := eval[[]string](t, p, `Array.from(document.querySelectorAll('#resolve select[name="to"] option')).map(o => o.value)`)
	if want := []string{"CONFIRMED", "FAILED", "SUPERSEDED", "REJECTED"}; !slices.Equal(opts, want) {
		t.Errorf("the resolve form offers %v, want %v", opts, want)
	}
	p.Screenshot(t, "operation as an operator")
	p.Navigate(t, w.url+"/console/effects")
	if got := text(t, p, ".needs-human tbody tr"); !contains(got, "MANUAL_REVIEW", "op-review") {
		t.Errorf("the operator's Effects page lists first %q, want op-review in MANUAL_REVIEW", got)
	}
	p.Screenshot(t, "effects as an operator")
	p.Navigate(t, w.url+page)

	// Refused, nothing written: CONFIRMED and FAILED without evidence; a
	// detail that is not JSON.
	lgtest.WritesNothing(t, w.etcd, w.c.Keys().Prefix(), "refused resolutions", func() {
		for _, to := range []string{"CONFIRMED", "FAILED"} {
			submit(t, p, "#resolve", map[string]string{"to": to, "why": "the provider says so"})
			if got := text(t, p, "#refusal"); !contains(got, "invalid_input", to+" needs the provider's evidence") {
				t.Errorf("resolving to %s without evidence answered %q", to, got)
			}
			if to == "CONFIRMED" {
				p.Screenshot(t, "resolution refused")
			}
			p.Navigate(t, w.url+page)
		}
		submit(t, p, "#resolve", map[string]string{"to": "CONFIRMED", "why": "the provider says so", "provider_ids": "promote-7", "detail": "{not json"})
		if got := text(t, p, "#refusal"); !contains(got, "invalid_input", "evidence detail is not JSON") {
			t.Errorf("resolving with a detail that is not JSON answered %q", got)
		}
		p.Navigate(t, w.url+page)
	})

	submit(t, p, "#resolve", map[string]string{"to": "CONFIRMED", "why": "the provider's log shows db-2 promoted",
		"provider_ids": " promote-7 \n\npromote-8\n", "detail": `{"log": "promoted db-2"}`})
	if got := text(t, p, "#flash"); !strings.Contains(got, "resolve") {
		t.Errorf("the page after the resolution says %q", got)
	}
	if got := text(t, p, "#record-state"); got != "CONFIRMED" {
		t.Errorf("record state on the page after resolving: %q", got)
	}
	if got := eval[string](t, p, `Array.from(document.querySelectorAll("#journal td.approver")).pop().innerText`); got != operator {
		t.Errorf("the journal's last entry on the page is by %q, want the operator %s", got, operator)
	}
	p.Screenshot(t, "operation resolved")

	after, journal, err := c.Record(ctx, tenant, "db", "op-review")
	if err != nil {
		t.Fatal(err)
	}
	last := journal[len(journal)-1]
	if after.State != ledger.Confirmed || last.From != ledger.ManualReview || last.To != ledger.Confirmed || last.By != ledger.StepResolve ||
		last.Approver != operator || !strings.HasPrefix(last.Reason, "resolved by "+operator+": the provider's log shows db-2 promoted") {
		t.Errorf("after the page's resolution: %s; journal's last entry %+v, want MANUAL_REVIEW -> CONFIRMED by %s", after.State, last, operator)
	}
	var detail map[string]string
	if last.Evidence == nil || !slices.Equal(last.Evidence.ProviderIDs, []string{"promote-7", "promote-8"}) ||
		json.Unmarshal(last.Evidence.Detail, &detail) != nil || detail["log"] != "promoted db-2" {
		t.Errorf("the resolution's evidence %+v, want ids promote-7, promote-8 and the detail sent", last.Evidence)
	}
	if rec.Seq+1 != after.Seq {
		t.Errorf("the record went from seq %d to %d: the refused attempts wrote", rec.Seq, after.Seq)
	}

	// Another MANUAL_REVIEW record, on the approver's and the worker's
	// pages: no resolve form; a resolve forged with the approver's own
	// token is refused by the API.
	w.reviewed(c, g, "op-review-2")
	const page2 = "/console/op/tenant-a/db/op-review-2"
	for caller, note := range map[string]string{"approver": "nothing to approve in state MANUAL_REVIEW", "worker": "neither an approver nor an operator"} {
		status, body := get(t, w.httpAs(caller), w.url+page2)
		if status != http.StatusOK || !strings.Contains(body, note) {
			t.Errorf("the %s's page: HTTP %d, no note %q:\n%.2000s", caller, status, note, body)
		}
		for _, form := range []string{`id="resolve"`, `id="approve"`, `id="reject"`} {
			if strings.Contains(body, form) {
				t.Errorf("the %s's page of a MANUAL_REVIEW record has a form %s", caller, form)
			}
		}
	}
	ap := w.httpAs("approver")
	_, body := get(t, ap, w.url+page2)
	lgtest.WritesNothing(t, w.etcd, w.c.Keys().Prefix(), "a resolution forged by an approver", func() {
		status, body := post(t, ap, w.url+page2+"/resolve", w.url, url.Values{"csrf": {tokenIn(t, body)}, "to": {"SUPERSEDED"},
			"why": {"forged"}})
		if status != http.StatusForbidden || !contains(body, "permission_denied", "is not an operator") {
			t.Errorf("a resolve POST with the approver's token: HTTP %d %s", status, refusalIn(body))
		}
	})
}

// An approver rejects a proposed record from its page: an empty reason is
// not sent (the field is required), and a reason of spaces, or a forged
// POST with none, is the API's invalid_input, nothing written; with a
// reason the record is REJECTED and the journal, read through the API,
// names the approver from its certificate.
func TestApproverRejectsAProposedRecordFromThePage(t *testing.T) {
	w := newWorld(t)
	ctx := ctxOf(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	rec := w.propose(c, g, "op-1", devprovider.KindPromote, "db-2", nil)
	const page = "/console/op/tenant-a/db/op-1"
	approver := w.certs.IDs["approver"]

	b := w.browserAs("approver")
	p := w.page(b, "/console/")
	p.Screenshot(t, "now as an approver")
	p.Navigate(t, w.url+"/console/effects")
	p.Screenshot(t, "effects as an approver")
	p.Navigate(t, w.url+page)
	if !eval[bool](t, p, `document.querySelector('#reject input[name="reason"]').required && !document.querySelector("#reject").checkValidity()`) {
		t.Error("the reject form can be sent with an empty reason")
	}
	lgtest.WritesNothing(t, w.etcd, w.c.Keys().Prefix(), "refused rejections", func() {
		submit(t, p, "#reject", map[string]string{"reason": "   "})
		if got := text(t, p, "#refusal"); !contains(got, "invalid_input", "reason is required") {
			t.Errorf("rejecting with a reason of spaces answered %q", got)
		}
		p.Screenshot(t, "rejection refused")
		p.Navigate(t, w.url+page)
		forge(t, p, page+"/reject", map[string]string{"csrf": `document.querySelector('#reject input[name="csrf"]').value`})
		if got := text(t, p, "#refusal"); !contains(got, "invalid_input", "reason is required") {
			t.Errorf("rejecting with no reason answered %q", got)
		}
	})

	p.Navigate(t, w.url+page)
	submit(t, p, "#reject", map[string]string{"reason": "wrong target: db-3 is the replica in sync"})
	if got := text(t, p, "#record-state"); got != "REJECTED" {
		t.Errorf("record state on the page after rejecting: %q", got)
	}
	p.Screenshot(t, "operation rejected")
	after, journal, err := c.Record(ctx, tenant, "db", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	last := journal[len(journal)-1]
	if after.State != ledger.Rejected || after.Seq != rec.Seq+1 || last.To != ledger.Rejected || last.By != ledger.StepReject ||
		last.Reason != "rejected by "+approver+": wrong target: db-3 is the replica in sync" {
		t.Errorf("after the page's rejection: %s seq %d; journal's last entry %+v, want REJECTED by %s", after.State, after.Seq, last, approver)
	}
}

// submit sets the fields of the form sel (by name) and presses its submit
// button, then waits for the answer's page.
func submit(t *testing.T, p *browser.Page, sel string, fields map[string]string) {
	t.Helper()
	js := `(function(){var f=document.querySelector(` + fmt.Sprintf("%q", sel) + `);`
	for k, v := range fields {
		js += fmt.Sprintf(`f.elements[%q].value=%q;`, k, v)
	}
	js += `window.submitted=true;return true})()`
	eval[bool](t, p, js)
	if err := chromedp.Do(p.Context(), chromedp.Click(sel+` button[type="submit"]`)); err != nil {
		t.Fatalf("submit %s: %v", sel, err)
	}
	waitFor(t, p, "the answer to the form", `window.submitted !== true && document.readyState === "complete"`)
}

// get answers url's status and body (HTML entities decoded).
func get(t *testing.T, hc *http.Client, u string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, hc, req)
}

// post sends form to u as a browser's form post from origin ("": no Origin
// header) and answers the status and body (HTML entities decoded).
func post(t *testing.T, hc *http.Client, u, origin string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return send(t, hc, req)
}

// send answers req's status and body (HTML entities decoded).
func send(t *testing.T, hc *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, html.UnescapeString(string(b))
}

var (
	tokenRE   = regexp.MustCompile(`<meta name="leasegate-action-token" content="([^"]+)">`)
	refusalRE = regexp.MustCompile(`(?s)<section class="refusal" id="refusal">(.*?)</section>`)
)

// tokenIn is the action token of a console page.
func tokenIn(t *testing.T, page string) string {
	t.Helper()
	m := tokenRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no action token in the page:\n%.2000s", page)
	}
	return m[1]
}

// refusalIn is a page's refusal, for a failure message.
func refusalIn(page string) string {
	if m := refusalRE.FindStringSubmatch(page); m != nil {
		return strings.Join(strings.Fields(m[1]), " ")
	}
	return "(no refusal on the page)"
}

// A decision carrying the approver's own valid token is still refused,
// before the API is called, when the browser says it comes from another
// site: an Origin that is not the console's (another host, the console's
// host over http, an origin the console's is a prefix of, "null"), or a
// Sec-Fetch-Site of cross-site or same-site. Without the token, or with
// another certificate's, it is refused too. With the token and the
// console's own Origin, or with neither header (a client that is no
// browser), it is done.
func TestActionsFromAnotherOriginAreRefusedEvenWithTheToken(t *testing.T) {
	w := newWorld(t)
	ctx := ctxOf(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	w.propose(c, g, "op-1", devprovider.KindPromote, "db-2", nil)
	w.propose(c, g, "op-2", devprovider.KindPromote, "db-3", nil)
	ap := w.httpAs("approver")
	_, page := get(t, ap, w.url+"/console/op/tenant-a/db/op-1")
	token := tokenIn(t, page)
	_, page = get(t, w.httpAs("worker"), w.url+"/console/")
	workers := tokenIn(t, page)
	reject := func(op string, form url.Values, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, w.url+"/console/op/tenant-a/db/"+op+"/reject", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := ap.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, html.UnescapeString(string(b))
	}
	withToken := url.Values{"csrf": {token}, "reason": {"not now"}}
	lgtest.WritesNothing(t, w.etcd, w.c.Keys().Prefix(), "decisions from other sites", func() {
		for _, c := range []struct {
			name   string
			form   url.Values
			header map[string]string
			why    string
		}{
			{"another origin", withToken, map[string]string{"Origin": "https://evil.example"}, "another site"},
			{"the console's host over http", withToken, map[string]string{"Origin": "http://" + strings.TrimPrefix(w.url, "https://")}, "another site"},
			{"an origin the console's is a prefix of", withToken, map[string]string{"Origin": w.url + "0"}, "another site"},
			{"origin null", withToken, map[string]string{"Origin": "null"}, "another site"},
			{"cross-site", withToken, map[string]string{"Sec-Fetch-Site": "cross-site"}, "another site"},
			{"same-site", withToken, map[string]string{"Sec-Fetch-Site": "same-site"}, "another site"},
			{"the console's origin but cross-site", withToken, map[string]string{"Origin": w.url, "Sec-Fetch-Site": "cross-site"}, "another site"},
			{"no token", url.Values{"reason": {"not now"}}, map[string]string{"Origin": w.url}, "no action token"},
			{"another certificate's token", url.Values{"csrf": {workers}, "reason": {"not now"}}, map[string]string{"Origin": w.url}, "not made for this certificate"},
			{"a token altered", url.Values{"csrf": {token + "A"}, "reason": {"not now"}}, map[string]string{"Origin": w.url}, "not made for this certificate"},
		} {
			if status, page := reject("op-1", c.form, c.header); status != http.StatusForbidden || !contains(page, "permission_denied", c.why) {
				t.Errorf("%s: HTTP %d %s, want refused: %s", c.name, status, refusalIn(page), c.why)
			}
		}
	})
	if status, page := reject("op-1", withToken, map[string]string{"Origin": w.url, "Sec-Fetch-Site": "same-origin"}); status != http.StatusSeeOther {
		t.Errorf("a rejection from the console's own page: HTTP %d %s", status, refusalIn(page))
	}
	if status, page := reject("op-2", withToken, nil); status != http.StatusSeeOther {
		t.Errorf("a rejection with the token and neither header: HTTP %d %s", status, refusalIn(page))
	}
	for _, op := range []string{"op-1", "op-2"} {
		if rec, _, err := c.Record(ctx, tenant, "db", op); err != nil || rec.State != ledger.Rejected {
			t.Errorf("%s after its rejection: %s, %v", op, rec.State, err)
		}
	}
}

// A decision's form is read up to twice the ledger's largest detail (room
// for a reason and evidence at the ledger's bound), and not a byte more:
// at the bound it is read (and here refused as no action, nothing
// written), one byte over it is refused as too large before anything is
// called. A resolution whose evidence detail is the ledger's largest is
// done.
func TestAnActionFormIsReadUpToItsBound(t *testing.T) {
	w := newWorld(t)
	ctx := ctxOf(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	w.reviewed(c, g, "op-review")
	op := w.httpAs("operator")
	_, page := get(t, op, w.url+"/console/op/tenant-a/db/op-review")
	token := tokenIn(t, page)
	const bound = 2 * ledger.MaxDetailBytes
	sized := func(n int) url.Values {
		form := url.Values{"csrf": {token}, "pad": {""}}
		form.Set("pad", strings.Repeat("a", n-len(form.Encode())))
		if len(form.Encode()) != n {
			t.Fatalf("a form of %d bytes, want %d", len(form.Encode()), n)
		}
		return form
	}
	lgtest.WritesNothing(t, w.etcd, w.c.Keys().Prefix(), "forms at and over the bound", func() {
		if status, page := post(t, op, w.url+"/console/op/tenant-a/db/op-review/nothing", w.url, sized(bound)); status != http.StatusNotFound || !contains(page, `no action "nothing"`) {
			t.Errorf("a form of %d bytes: HTTP %d %s, want read, and refused as no action", bound, status, refusalIn(page))
		}
		if status, page := post(t, op, w.url+"/console/op/tenant-a/db/op-review/resolve", w.url, sized(bound+1)); status != http.StatusBadRequest || !contains(page, "invalid_input", "request body too large") {
			t.Errorf("a form of %d bytes: HTTP %d %s, want refused as too large", bound+1, status, refusalIn(page))
		}
	})
	detail := `"` + strings.Repeat("x", ledger.MaxDetailBytes-2) + `"`
	status, page := post(t, op, w.url+"/console/op/tenant-a/db/op-review/resolve", w.url, url.Values{"csrf": {token}, "to": {"FAILED"},
		"why": {"the provider's log shows the promotion refused"}, "provider_ids": {"promote-9"}, "detail": {detail}})
	if status != http.StatusSeeOther {
		t.Fatalf("a resolution with a detail of %d bytes: HTTP %d %s", len(detail), status, refusalIn(page))
	}
	if rec, _, err := c.Record(ctx, tenant, "db", "op-review"); err != nil || rec.State != ledger.Failed || rec.Evidence == nil || len(rec.Evidence.Detail) != len(detail) {
		t.Errorf("after the resolution: %s, %v", rec.State, err)
	}
}
