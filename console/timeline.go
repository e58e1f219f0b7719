package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
)

// timelineView is an operation's timeline as the page embeds it.
type timelineView struct {
	SVG    template.HTML
	Owners []ownerSpan // the owner lane, also listed under the drawing
}

// ownerSpan is one epoch of the task as the journal and the current owner
// show it: who held it, from its first journal entry (or "before") to the
// next epoch's first (or now, for the current owner).
type ownerSpan struct {
	Epoch    int64
	Owner    string
	From, To time.Time
	Current  bool
}

// ownerSpans derives the owner lane: each epoch that wrote to the journal,
// in the order it first did, ending where the next one began; the current
// owner's epoch runs to now.
func ownerSpans(journal []ledger.Transition, owner *coordinator.Ownership, now time.Time) []ownerSpan {
	var spans []ownerSpan
	for _, t := range journal {
		if t.Epoch == 0 {
			continue
		}
		if n := len(spans); n > 0 && spans[n-1].Epoch == t.Epoch {
			spans[n-1].To = t.At
			continue
		}
		if n := len(spans); n > 0 {
			spans[n-1].To = t.At
		}
		spans = append(spans, ownerSpan{Epoch: t.Epoch, Owner: t.Owner, From: t.At, To: t.At})
	}
	if owner != nil && owner.Owned() {
		if n := len(spans); n > 0 && spans[n-1].Epoch == owner.Epoch {
			spans[n-1].To, spans[n-1].Current = now, true
		} else {
			from := now
			if n > 0 {
				from = spans[n-1].To
			}
			spans = append(spans, ownerSpan{Epoch: owner.Epoch, Owner: owner.Owner, From: from, To: now, Current: true})
		}
	}
	return spans
}

// timeline draws the operation: the owner lane and the record's lane on
// one time axis.
func (c *Console) timeline(rec ledger.Record, journal []ledger.Transition, owner *coordinator.Ownership) timelineView {
	now := c.now()
	spans := ownerSpans(journal, owner, now)
	ch := chart{Title: fmt.Sprintf("%s/%s %s", rec.Tenant, rec.Task, rec.Operation), Now: now}
	ol := lane{Name: "owner"}
	for _, s := range spans {
		label := fmt.Sprintf("epoch %d · %s", s.Epoch, s.Owner)
		explain := "from its first journal entry"
		if s.Current {
			explain = "holds the task now"
		}
		ol.Spans = append(ol.Spans, span{From: s.From, To: s.To, Label: label, Explain: explain})
	}
	rl := lane{Name: "record"}
	for _, t := range journal {
		ex := string(t.By)
		if t.Approver != "" {
			ex += " by " + t.Approver
		}
		rl.Events = append(rl.Events, event{At: t.At, Label: string(t.To), Explain: ex, Title: fmt.Sprintf("#%d %s→%s (%s, epoch %d, %s): %s", t.Seq, t.From, t.To, t.By, t.Epoch, t.Owner, t.Reason)})
	}
	ch.Lanes = []lane{ol, rl}
	var b strings.Builder
	ch.svg(&b)
	return timelineView{SVG: template.HTML(b.String()), Owners: spans} //nolint:gosec // built from escaped text only (svg.go)
}
