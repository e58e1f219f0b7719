// Package timeline draws lanes of spans and events on one time axis as a
// self-contained SVG that a person can read without hovering anything: the
// drill's pictures of a trial (drill.Trajectory.SVG) and the console's
// picture of one operation (its journal beside the task's owners) are both
// drawn by it.
//
// A Chart is lanes, top to bottom. A lane has spans — something that held
// from one time to another, drawn as a labelled bar (an owner's epoch, a
// record's state, a provider's writer) — and events at an instant. An event
// with an explanation gets a number: a numbered badge in its lane, and the
// same number in the list under the chart with its time, its label and its
// explanation, so the picture reads in an <img>, on paper and in a
// screenshot. An event without one is a small dot (a read, a poll). A legend
// names every colour the chart uses.
//
// Layout rules, so that no two pieces of text overlap at any size the SVG
// is scaled to: every text is in DejaVu Sans Mono (monospace; its advance
// is 0.602 em, so widths are known without a font engine); badges that
// would touch are stacked in rows within their lane (RowsBeforeNudge rows,
// then moved right along the row that frees up first); a span's label is
// drawn only where it fits inside its bar, cut with "…" when it does not;
// time labels under the axis are skipped where they would touch; quiet gaps
// longer than a fifth of the chart's time are drawn narrow with a break
// mark and their length. The SVG has presentation attributes only (no
// <style>, no <script>, no external reference), so a page can inline it
// under a strict Content-Security-Policy.
//
// The output is a function of the Chart alone: the same chart, the same
// bytes.
package timeline

import (
	"encoding/xml"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Chart is one picture.
type Chart struct {
	// Title is the bold line at the top; Subtitle the grey lines under it
	// (what the picture shows and how to read it).
	Title    string
	Subtitle string
	Lanes    []Lane
	// Now ends open spans (To zero) and is marked on the axis; zero: open
	// spans end at the last instant of the chart.
	Now time.Time
	// Width of the SVG in px (default DefaultWidth). Text sizes are for
	// this width: shown narrower, everything scales down with it.
	Width int
	// TimeFormat formats times on the axis and in the list (default
	// "15:04:05").
	TimeFormat string
	// Styles maps a Class to its colours and its legend text, over the
	// built-in ones (DefaultStyles); a field left empty keeps the default.
	Styles map[string]Style
	// Key is plain lines printed after the legend (what states mean, ...).
	Key []string
	// Notes are lines at the end (a verdict, violations), wrapped.
	Notes []Note
}

// Lane is one row of the chart.
type Lane struct {
	Name string
	// Sub is a second, smaller line under the name.
	Sub    string
	Spans  []Span
	Events []Event
}

// Span is something that held from From to To (zero To: open, to Now).
// Spans of a lane that overlap in time are drawn in separate rows.
type Span struct {
	From, To time.Time
	// Row is the first row of the lane the span may take (0, the top);
	// it goes further down where it would overlap another span.
	Row   int
	Label string
	// Explain, when set, numbers the span like an event: a badge at its
	// start and a line in the list.
	Explain string
	Class   string
}

// Event is something that happened at an instant.
type Event struct {
	At time.Time
	// Label is short ("AUTHORIZED", "B-771"): in the list, before the
	// explanation.
	Label string
	// Explain is the visible sentence in the list; without it the event is
	// an unnumbered dot.
	Explain string
	Class   string
	// Across draws a dashed line across all lanes at the event (a fault).
	Across bool
	// Title is the hover text (<title>); default: Label and Explain.
	Title string
	// Data are data-* attributes of the event's <g class="event">, for
	// tests and scripts.
	Data map[string]string
}

// Note is a closing line.
type Note struct {
	Text string
	Tone Tone
	// Class is added to the class of each of its lines' <text> (which
	// also carry data-note, the note's index), for tests and scripts.
	Class string
}

// Tone colours a Note.
type Tone string

// Tones.
const (
	Plain Tone = ""
	Good  Tone = "good"
	Bad   Tone = "bad"
)

// Style is how a Class is drawn: Fill of the badge or bar, Text colour on
// it, Legend text (no legend entry when empty).
type Style struct {
	Fill   string
	Text   string
	Legend string
}

// DefaultWidth is the width the chart is laid out for, in px: about what
// a README column gives a picture shown at 100%.
const DefaultWidth = 800

// DefaultStyles are the built-in classes: event badges (white text on a
// strong colour) and span bars (dark text on a light one).
var DefaultStyles = map[string]Style{
	// events
	"claim":      {Fill: "#2e7d32", Text: "#ffffff"},
	"lost":       {Fill: "#795548", Text: "#ffffff"},
	"transition": {Fill: "#5e35b1", Text: "#ffffff"},
	"call":       {Fill: "#37474f", Text: "#ffffff"},
	"change":     {Fill: "#1565c0", Text: "#ffffff"},
	"fault":      {Fill: "#d32f2f", Text: "#ffffff"},
	"refused":    {Fill: "#880e4f", Text: "#ffffff"},
	"hold":       {Fill: "#e65100", Text: "#ffffff"},
	"note":       {Fill: "#00695c", Text: "#ffffff"},
	"read":       {Fill: "#9e9e9e", Text: "#ffffff"},
	// spans
	"epoch":   {Fill: "#c8e6c9", Text: "#1b5e20"},
	"state":   {Fill: "#d1c4e9", Text: "#311b92"},
	"pending": {Fill: "#fff59d", Text: "#5d4037"},
	"":        {Fill: "#e0e0e0", Text: "#212121"},
}

// Font sizes (px at Width) and the monospace advance.
const (
	fontFamily   = "DejaVu Sans Mono, monospace"
	advance      = 0.602 // em
	titleSize    = 14.0
	textSize     = 12.0
	smallSize    = 11.0
	lineH        = 16.0 // a line of textSize
	badgeH       = 15.0
	badgeRowH    = 18.0
	spanH        = 15.0
	spanRowH     = 17.0
	lanePad      = 4.0
	dotRowH      = 8.0
	plotPadX     = 10.0
	badgeGap     = 3.0
	tickGap      = 10.0
	legendSwatch = 16.0
)

// RowsBeforeNudge is how many rows of badges a lane stacks before it moves
// a badge right instead.
const RowsBeforeNudge = 3

// textWidth is the width of s in px at size, in the chart's monospace font.
func textWidth(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * size * advance
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func (c *Chart) style(class string) Style {
	s := DefaultStyles[class]
	if _, ok := DefaultStyles[class]; !ok {
		s = Style{Fill: "#616161", Text: "#ffffff"}
	}
	if o, ok := c.Styles[class]; ok {
		if o.Fill != "" {
			s.Fill = o.Fill
		}
		if o.Text != "" {
			s.Text = o.Text
		}
		s.Legend = o.Legend
	}
	return s
}

func (c *Chart) format(t time.Time) string {
	f := c.TimeFormat
	if f == "" {
		f = "15:04:05"
	}
	return t.Format(f)
}

// wrap cuts s into lines of at most n runes, at spaces where it can.
func wrap(s string, n int) []string {
	if n < 8 {
		n = 8
	}
	var out []string
	for utf8.RuneCountInString(s) > n {
		r := []rune(s)
		cut := strings.LastIndex(string(r[:n+1]), " ")
		if cut <= 0 {
			cut = len(string(r[:n]))
		}
		out = append(out, strings.TrimRight(s[:cut], " "))
		s = strings.TrimLeft(s[cut:], " ")
	}
	return append(out, s)
}

// axis maps times to x: quiet gaps longer than a fifth of the chart's time
// are drawn as a tenth of the rest.
type axis struct {
	instants []time.Time
	virt     []float64 // virtual seconds of each instant
	x0, x1   float64
	scale    float64
	breaks   []gapMark
}

type gapMark struct {
	x   float64
	dur time.Duration
}

func newAxis(instants []time.Time, x0, x1 float64) *axis {
	sort.Slice(instants, func(i, j int) bool { return instants[i].Before(instants[j]) })
	var uniq []time.Time
	for _, t := range instants {
		if len(uniq) == 0 || !t.Equal(uniq[len(uniq)-1]) {
			uniq = append(uniq, t)
		}
	}
	a := &axis{instants: uniq, x0: x0 + plotPadX, x1: x1 - plotPadX}
	if len(uniq) == 0 {
		a.scale = 1
		return a
	}
	total := uniq[len(uniq)-1].Sub(uniq[0]).Seconds()
	big := total / 5
	rest := total
	for i := 1; i < len(uniq); i++ {
		if g := uniq[i].Sub(uniq[i-1]).Seconds(); g > big {
			rest -= g
		}
	}
	drawn := rest / 10
	if drawn <= 0 {
		drawn = 1
	}
	v := 0.0
	a.virt = make([]float64, len(uniq))
	var bigAt []int
	for i := 1; i < len(uniq); i++ {
		g := uniq[i].Sub(uniq[i-1]).Seconds()
		if g > big && g > drawn {
			bigAt = append(bigAt, i)
			g = drawn
		}
		v += g
		a.virt[i] = v
	}
	if v > 0 {
		a.scale = (a.x1 - a.x0) / v
	} else {
		a.scale = 1
	}
	for _, i := range bigAt {
		a.breaks = append(a.breaks, gapMark{
			x:   a.x0 + (a.virt[i-1]+a.virt[i])/2*a.scale,
			dur: uniq[i].Sub(uniq[i-1]),
		})
	}
	return a
}

func (a *axis) x(t time.Time) float64 {
	if len(a.instants) == 0 {
		return a.x0
	}
	i := sort.Search(len(a.instants), func(i int) bool { return !a.instants[i].Before(t) })
	if i < len(a.instants) && a.instants[i].Equal(t) {
		return a.x0 + a.virt[i]*a.scale
	}
	// Between instants (not expected: every time is an instant).
	if i == 0 {
		return a.x0
	}
	if i == len(a.instants) {
		return a.x0 + a.virt[len(a.virt)-1]*a.scale
	}
	f := t.Sub(a.instants[i-1]).Seconds() / a.instants[i].Sub(a.instants[i-1]).Seconds()
	return a.x0 + (a.virt[i-1]+f*(a.virt[i]-a.virt[i-1]))*a.scale
}
