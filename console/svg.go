package console

import (
	"fmt"
	"html"
	"io"
	"time"
	"unicode/utf8"
)

// chart, lane, span and event are the operation's timeline: lanes of
// spans and point events on one time axis.
type (
	chart struct {
		Title string
		Lanes []lane
		Now   time.Time
	}
	lane struct {
		Name   string
		Spans  []span
		Events []event
	}
	span struct {
		From, To       time.Time
		Label, Explain string
	}
	event struct {
		At                    time.Time
		Label, Explain, Title string
	}
)

// Drawing constants: monospace text, whose width is known from its length.
const (
	svgW        = 960.0
	svgLeft     = 80.0
	svgRight    = 24.0
	svgBand     = 14.0 // a lane's bar
	svgRowH     = 28.0 // a label row: label and explanation
	svgMaxRows  = 6    // label rows under a lane; labels that fit in none are left to the marker's title
	svgFont     = 11.0
	svgSmall    = 10.0
	svgCharW    = 0.62 // of the font size, monospace, with a margin
	svgLabelGap = 6.0
)

func textW(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * size * svgCharW
}

// svg writes the chart. Every label sits in the first row under its lane
// where it overlaps no label before it; a label that fits in no row is not
// drawn (its marker's <title> still names it), and the count of those is
// written under the lane.
func (c chart) svg(w io.Writer) {
	lo, hi := c.Now, c.Now
	for _, l := range c.Lanes {
		for _, s := range l.Spans {
			lo, hi = minT(lo, s.From), maxT(hi, s.To)
		}
		for _, e := range l.Events {
			lo, hi = minT(lo, e.At), maxT(hi, e.At)
		}
	}
	if !hi.After(lo) {
		hi = lo.Add(time.Second)
	}
	plot := svgW - svgLeft - svgRight
	x := func(t time.Time) float64 { return svgLeft + plot*float64(t.Sub(lo))/float64(hi.Sub(lo)) }
	type placed struct{ x0, x1 float64 }
	var body []string
	y := 28.0
	for _, l := range c.Lanes {
		top := y
		body = append(body, fmt.Sprintf(`<text x="8" y="%.1f" font-size="%.0f" font-weight="bold" fill="#333">%s</text>`, top+svgBand-3, svgFont, esc(l.Name)))
		body = append(body, fmt.Sprintf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc"/>`, svgLeft, top+svgBand/2, svgW-svgRight, top+svgBand/2))
		rows := make([][]placed, svgMaxRows)
		hidden := 0
		put := func(x0 float64, label, explain string) (float64, bool) {
			wd := max(textW(label, svgFont), textW(explain, svgSmall))
			x1 := min(x0+wd, svgW-2)
			x0 = x1 - wd
			for i := range rows {
				free := true
				for _, p := range rows[i] {
					if x0 < p.x1+svgLabelGap && p.x0 < x1+svgLabelGap {
						free = false
						break
					}
				}
				if free {
					rows[i] = append(rows[i], placed{x0, x1})
					ly := top + svgBand + 12 + float64(i)*svgRowH
					body = append(body, fmt.Sprintf(`<text x="%.1f" y="%.1f" font-size="%.0f" fill="#111">%s</text>`, x0, ly, svgFont, esc(label)))
					if explain != "" {
						body = append(body, fmt.Sprintf(`<text x="%.1f" y="%.1f" font-size="%.0f" fill="#666">%s</text>`, x0, ly+12, svgSmall, esc(explain)))
					}
					return x0, true
				}
			}
			hidden++
			return 0, false
		}
		for i, s := range l.Spans {
			x0, x1 := x(s.From), max(x(s.To), x(s.From)+3)
			fill := []string{"#8fb8de", "#f2b36b", "#9fd49a", "#d7a3d9"}[i%4]
			body = append(body, fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
				x0, top, x1-x0, svgBand, fill, esc(s.Label+": "+s.From.UTC().Format(time.RFC3339Nano)+" – "+s.To.UTC().Format(time.RFC3339Nano))))
			put(x0, s.Label, s.Explain)
		}
		for _, e := range l.Events {
			ex := x(e.At)
			body = append(body, fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="4" fill="#1f4e79"><title>%s</title></circle>`, ex, top+svgBand/2, esc(e.Title)))
			put(ex, e.Label, e.Explain)
		}
		used := 0
		for i := range rows {
			if len(rows[i]) > 0 {
				used = i + 1
			}
		}
		y = top + svgBand + 12 + float64(used)*svgRowH
		if hidden > 0 {
			body = append(body, fmt.Sprintf(`<text x="%.1f" y="%.1f" font-size="%.0f" fill="#a00">%d more labels not drawn (hover the markers, or read the journal below)</text>`, svgLeft, y, svgSmall, hidden))
			y += 16
		}
		y += 14
	}
	// The axis: a time every 120 px or more.
	axis := y
	body = append(body, fmt.Sprintf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`, svgLeft, axis, svgW-svgRight, axis))
	n := int(plot / 120)
	for i := 0; i <= n; i++ {
		t := lo.Add(time.Duration(float64(hi.Sub(lo)) * float64(i) / float64(n)))
		tx := x(t)
		label := t.UTC().Format("15:04:05.000")
		lx := min(max(tx-textW(label, svgSmall)/2, 2), svgW-2-textW(label, svgSmall))
		body = append(body, fmt.Sprintf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/><text x="%.1f" y="%.1f" font-size="%.0f" fill="#555">%s</text>`,
			tx, axis, tx, axis+4, lx, axis+16, svgSmall, label))
	}
	h := axis + 24
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="monospace" role="img" aria-label="%s">`, svgW, h, svgW, h, esc(c.Title))
	for _, b := range body {
		io.WriteString(w, b)
	}
	io.WriteString(w, `</svg>`)
}

func esc(s string) string { return html.EscapeString(s) }

func minT(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func maxT(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
