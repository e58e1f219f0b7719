package console_test

import (
	"strings"
	"testing"

	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/browser"
)

// An operation proposed under one owner and approved, dispatched and
// confirmed under the next, within a second: its page draws both owners
// and the four transitions on one time axis, and no two of the drawing's
// labels overlap as Chromium renders them.
func TestOperationTimelineLabelsDoNotOverlap(t *testing.T) {
	w := newWorld(t)
	ctx := ctxOf(t)
	c1, c2 := w.client("worker"), w.client("worker-2")
	s1 := w.session(c1)
	g1, err := s1.Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	rec := w.propose(c1, g1, "op-1", devprovider.KindDNS, "www.example", map[string]string{"value": "10.0.0.2"})
	if err := c1.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	g2, err := w.session(c2).Claim(ctx, tenant, "db")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.client("approver").Authorize(ctx, tenant, "db", "op-1", ledger.Approval{
		ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Policy: "v1", Note: "checked the writer"}); err != nil {
		t.Fatal(err)
	}
	if rec, err := c2.Dispatch(ctx, g2, "op-1"); err != nil || rec.State != ledger.Confirmed {
		t.Fatalf("dispatch: %s, %v", rec.State, err)
	}
	p := w.page(w.browserAs("worker-2"), "/console/op/tenant-a/db/op-1")
	var labels []browser.TextBox
	for _, b := range p.TextBoxes(t) {
		if b.Tag == "text" || b.Tag == "tspan" { // SVG text: the drawing's labels
			labels = append(labels, b)
		}
	}
	var all []string
	for _, b := range labels {
		all = append(all, b.Text)
	}
	joined := strings.Join(all, "|")
	for _, want := range []string{"PROPOSED", "AUTHORIZED", "DISPATCHING", "CONFIRMED", "epoch " + itoa(g1.Epoch) + " · " + g1.Owner, "epoch " + itoa(g2.Epoch) + " · " + g2.Owner} {
		if !strings.Contains(joined, want) {
			t.Errorf("the timeline draws no label %q; it draws %q", want, joined)
		}
	}
	for _, o := range browser.Overlapping(labels) {
		t.Errorf("timeline labels overlap: %v", o)
	}
	for _, s := range browser.SmallerThan(labels, 9) {
		t.Errorf("timeline label too small to read: %v", s)
	}
	p.Screenshot(t, "operation")
}
