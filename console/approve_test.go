package console_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/browser"
)

// An approver reads a proposed record on its page — the digests it is
// about to approve — and approves it with the page's button: the record is
// AUTHORIZED with those digests, the journal names the approver from its
// certificate, and the page shows it. A record that changed after its page
// was read (rejected meanwhile) is refused, nothing written.
func TestApproverApprovesTheRecordItReadFromThePage(t *testing.T) {
	w := newWorld(t)
	ctx := ctxOf(t)
	c := w.client("worker")
	g, err := w.session(c).Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	rec := w.propose(c, g, "op-1", devprovider.KindPromote, "db-2", nil)
	b := w.browserAs("approver")
	p := w.page(b, "/console/op/tenant-a/db/op-1")
	if got, want := text(t, p, "#approve-params"), rec.ParamsDigest; got != want {
		t.Errorf("the page shows parameters digest %q to approve, the record's is %q", got, want)
	}
	if got, want := text(t, p, "#approve-precondition"), rec.Precondition.Digest; got != want {
		t.Errorf("the page shows precondition digest %q to approve, the record's is %q", got, want)
	}
	if got := text(t, p, "#digest-check"); !contains(got, "the same") {
		t.Errorf("the page's own check of the parameters digest says %q", got)
	}
	p.Screenshot(t, "operation as an approver")
	click(t, p, `#approve input[name="note"]`, "checked the replica's lag")
	waitFor(t, p, "the approved record's page", `!!document.querySelector("#flash")`)
	approver := w.certs.IDs["approver"]
	if got := text(t, p, "#record-state"); got != "AUTHORIZED" {
		t.Errorf("record state on the page after approving: %q", got)
	}
	if got := eval[string](t, p, `Array.from(document.querySelectorAll("#journal td.approver")).map(td => td.innerText).join("|")`); got != "|"+approver {
		t.Errorf("the journal's approvers on the page: %q, want the second entry by %s", got, approver)
	}
	p.Screenshot(t, "operation approved")
	after, journal, err := c.Record(ctx, tenant, "db", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	if after.State != ledger.Authorized || after.Approval == nil || after.Approval.Approver != approver ||
		after.Approval.ParamsDigest != rec.ParamsDigest || after.Approval.PreconditionDigest != rec.Precondition.Digest ||
		after.Approval.Note != "checked the replica's lag" {
		t.Errorf("record after the page's approval: %s %+v", after.State, after.Approval)
	}
	if last := journal[len(journal)-1]; last.To != ledger.Authorized || last.Approver != approver {
		t.Errorf("journal's last entry %+v, want AUTHORIZED by %s", last, approver)
	}

	// A page read, then the record rejected elsewhere: approving from the
	// stale page is refused, and nothing is written.
	rec2 := w.propose(c, g, "op-2", devprovider.KindPromote, "db-3", nil)
	p2 := w.page(b, "/console/op/tenant-a/db/op-2")
	if _, err := w.client("approver").Reject(ctx, tenant, "db", "op-2", "wrong target"); err != nil {
		t.Fatal(err)
	}
	rejected, _, err := c.Record(ctx, tenant, "db", "op-2")
	if err != nil || rejected.State != ledger.Rejected {
		t.Fatalf("op-2 after the rejection: %s, %v", rejected.State, err)
	}
	click(t, p2, `#approve button`, "")
	waitFor(t, p2, "the refusal page", `!!document.querySelector("#refusal")`)
	if got := text(t, p2, "#refusal"); !contains(got, "illegal_transition", "REJECTED") {
		t.Errorf("approving a record rejected since answered %q", got)
	}
	p2.Screenshot(t, "approval refused")
	if now, _, err := c.Record(ctx, tenant, "db", "op-2"); err != nil || now.State != ledger.Rejected || now.Seq != rejected.Seq || rec2.Seq >= now.Seq {
		t.Errorf("record after the refused approval: %s seq %d (%v), want REJECTED seq %d", now.State, now.Seq, err, rejected.Seq)
	}
}

// click types text into the input sel (when text is set) and submits its
// form; or clicks sel.
func click(t *testing.T, p *browser.Page, sel, text string) {
	t.Helper()
	var err error
	if text != "" {
		err = chromedp.Do(p.Context(), chromedp.SendKeys(sel, text), chromedp.Submit(sel))
	} else {
		err = chromedp.Do(p.Context(), chromedp.Click(sel))
	}
	if err != nil {
		t.Fatalf("%s: %v", sel, err)
	}
}
