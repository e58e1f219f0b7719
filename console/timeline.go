package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/timeline"
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

// explainedEntries is how many journal entries, the latest, the timeline
// numbers and explains under the drawing; earlier ones are dots (the
// journal's table lists every entry).
const explainedEntries = 40

// classOf is how the timeline colours a transition to state to.
func classOf(to ledger.State) string {
	switch to {
	case ledger.Confirmed:
		return "claim"
	case ledger.Unknown, ledger.Failed:
		return "fault"
	case ledger.ManualReview:
		return "hold"
	case ledger.Rejected, ledger.Superseded:
		return "refused"
	case ledger.Authorized:
		return "note"
	}
	return "transition"
}

// timeline draws the operation with package timeline, as the drill's
// pictures are drawn: the task's owners, the record's states and its
// transitions on one time axis.
func (c *Console) timeline(rec ledger.Record, journal []ledger.Transition, owner *coordinator.Ownership) timelineView {
	now := c.now()
	spans := ownerSpans(journal, owner, now)
	ch := timeline.Chart{
		Title:      fmt.Sprintf("%s/%s %s", rec.Tenant, rec.Task, rec.Operation),
		Subtitle:   "The task's owners (each epoch from its first entry in this journal; the current owner to now) and the record's states and transitions, on one time axis.",
		Now:        now,
		Width:      960,
		TimeFormat: "15:04:05.000",
	}
	owners := timeline.Lane{Name: "owners", Sub: "epoch · owner"}
	for _, s := range spans {
		label := fmt.Sprintf("epoch %d · %s", s.Epoch, s.Owner)
		sp := timeline.Span{From: s.From, To: s.To, Label: label, Class: "epoch",
			Explain: "from its first entry in this journal to the next epoch's first"}
		if s.Current {
			sp.To = time.Time{} // open: to now
			sp.Explain = "holds the task now"
		}
		owners.Spans = append(owners.Spans, sp)
	}
	record := timeline.Lane{Name: "record", Sub: "state · transitions"}
	first := max(len(journal)-explainedEntries, 0)
	for i, t := range journal {
		to := time.Time{}
		if i+1 < len(journal) {
			to = journal[i+1].At
		}
		record.Spans = append(record.Spans, timeline.Span{From: t.At, To: to, Label: string(t.To), Class: "state"})
		ev := timeline.Event{At: t.At, Label: string(t.To), Class: classOf(t.To),
			Title: fmt.Sprintf("#%d %s→%s (%s, epoch %d, %s): %s", t.Seq, t.From, t.To, t.By, t.Epoch, t.Owner, visible(t.Reason)),
			Data:  map[string]string{"seq": strconv.FormatInt(t.Seq, 10), "to": string(t.To)}}
		if i >= first {
			ev.Explain = explain(t)
		}
		record.Events = append(record.Events, ev)
	}
	if first > 0 {
		ch.Notes = append(ch.Notes, timeline.Note{Text: fmt.Sprintf("Entries 1–%d are drawn as dots; the journal below lists every entry.", first)})
	}
	ch.Lanes = []timeline.Lane{owners, record}
	var b strings.Builder
	if err := ch.SVG(&b); err != nil {
		c.lg.Warn("timeline not drawn", zap.Error(err))
		return timelineView{Owners: spans}
	}
	// The SVG is timeline's, which escapes every text it writes.
	return timelineView{SVG: template.HTML(b.String()), Owners: spans} //nolint:gosec
}

// explain is a transition's line under the drawing: what made it, under
// which epoch, and why.
func explain(t ledger.Transition) string {
	by := string(t.By)
	if t.Approver != "" {
		by += " by " + t.Approver
	}
	s := fmt.Sprintf("#%d %s, epoch %d (%s)", t.Seq, by, t.Epoch, t.Owner)
	if t.Reason != "" {
		s += ": " + visible(t.Reason)
	}
	return s
}
