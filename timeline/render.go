package timeline

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// item is a numbered thing: an event or a span with an explanation.
type item struct {
	lane, idx int
	span      bool
	at        time.Time
	num       int
}

type placedBadge struct {
	x, y, w float64 // left, top, width
	trueX   float64
}

type laneLayout struct {
	top, height float64
	spanRows    int
	spanRow     []int // by span index
	spanTo      []time.Time
	badgeRows   int
	badges      map[int]placedBadge // by event index
}

// SVG writes the chart.
func (c Chart) SVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	c.write(bw)
	return bw.Flush()
}

func (c *Chart) width() float64 {
	if c.Width > 0 {
		return float64(c.Width)
	}
	return DefaultWidth
}

// end of the chart's time: Now, or its last instant.
func (c *Chart) instants() (all []time.Time, last time.Time) {
	for _, l := range c.Lanes {
		for _, e := range l.Events {
			all = append(all, e.At)
		}
		for _, s := range l.Spans {
			all = append(all, s.From)
			if !s.To.IsZero() {
				all = append(all, s.To)
			}
		}
	}
	for _, t := range all {
		if t.After(last) {
			last = t
		}
	}
	if !c.Now.IsZero() {
		all = append(all, c.Now)
		if c.Now.After(last) {
			last = c.Now
		}
	}
	return all, last
}

func badgeWidth(num int) float64 { return textWidth(strconv.Itoa(num), smallSize) + 8 }

func (c *Chart) write(w *bufio.Writer) {
	W := c.width()
	var body bytes.Buffer
	b := bufio.NewWriter(&body)

	// Numbering: every explained event and span, in time order (lane
	// order, then input order, at one instant).
	var items []item
	for li, l := range c.Lanes {
		for si, s := range l.Spans {
			if s.Explain != "" {
				items = append(items, item{lane: li, idx: si, span: true, at: s.From})
			}
		}
		for ei, e := range l.Events {
			if e.Explain != "" {
				items = append(items, item{lane: li, idx: ei, at: e.At})
			}
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].at.Before(items[j].at) })
	spanNum := map[[2]int]int{}
	eventNum := map[[2]int]int{}
	for i := range items {
		items[i].num = i + 1
		k := [2]int{items[i].lane, items[i].idx}
		if items[i].span {
			spanNum[k] = i + 1
		} else {
			eventNum[k] = i + 1
		}
	}

	// Header.
	y := 6.0
	for _, line := range wrap(c.Title, int((W-16)/(titleSize*advance))) {
		if line == "" {
			continue
		}
		y += titleSize + 4
		fmt.Fprintf(b, `<text x="8" y="%.1f" font-size="%.0f" font-weight="bold" fill="#212121">%s</text>`+"\n", y, titleSize, esc(line))
	}
	if c.Subtitle != "" {
		for _, para := range strings.Split(c.Subtitle, "\n") {
			for _, line := range wrap(para, int((W-16)/(textSize*advance))) {
				y += lineH
				fmt.Fprintf(b, `<text x="8" y="%.1f" fill="#555555">%s</text>`+"\n", y, esc(line))
			}
		}
	}
	y += 10

	// Lane names' column.
	nameW := 70.0
	for _, l := range c.Lanes {
		nameW = max(nameW, textWidth(l.Name, textSize)+16, textWidth(l.Sub, smallSize)+16)
	}
	nameW = min(nameW, W/4)
	nameChars := int((nameW - 12) / (textSize * advance))
	subChars := int((nameW - 12) / (smallSize * advance))

	all, last := c.instants()
	ax := newAxis(all, nameW, W-4)

	// Lane layout.
	plotTop := y
	layouts := make([]laneLayout, len(c.Lanes))
	for li, l := range c.Lanes {
		ll := &layouts[li]
		ll.top = y
		// Spans into rows.
		order := make([]int, len(l.Spans))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(i, j int) bool {
			a, b := l.Spans[order[i]], l.Spans[order[j]]
			if a.Row != b.Row {
				return a.Row < b.Row
			}
			return a.From.Before(b.From)
		})
		ll.spanRow = make([]int, len(l.Spans))
		ll.spanTo = make([]time.Time, len(l.Spans))
		var rowEnd []float64
		for _, si := range order {
			s := l.Spans[si]
			to := s.To
			if to.IsZero() {
				to = last
			}
			ll.spanTo[si] = to
			x0 := ax.x(s.From)
			r := max(s.Row, 0)
			for ; r < len(rowEnd); r++ {
				if x0 >= rowEnd[r] {
					break
				}
			}
			for r >= len(rowEnd) {
				rowEnd = append(rowEnd, 0)
			}
			rowEnd[r] = max(ax.x(to), x0+2)
			ll.spanRow[si] = r
		}
		ll.spanRows = len(rowEnd)
		// Badges into rows.
		ll.badges = map[int]placedBadge{}
		var rowRight []float64
		xmax := W - 4
		evOrder := make([]int, 0, len(l.Events))
		for ei, e := range l.Events {
			if e.Explain != "" {
				evOrder = append(evOrder, ei)
			}
		}
		sort.SliceStable(evOrder, func(i, j int) bool { return l.Events[evOrder[i]].At.Before(l.Events[evOrder[j]].At) })
		for _, ei := range evOrder {
			e := l.Events[ei]
			bw := badgeWidth(eventNum[[2]int{li, ei}])
			tx := ax.x(e.At)
			left := min(max(tx-bw/2, nameW+2), xmax-bw)
			r := -1
			for i := range rowRight {
				if left >= rowRight[i]+badgeGap {
					r = i
					break
				}
			}
			if r < 0 && len(rowRight) < RowsBeforeNudge {
				rowRight = append(rowRight, -1e9)
				r = len(rowRight) - 1
			}
			if r < 0 { // nudge right along the row that frees up first
				best := 0
				for i := range rowRight {
					if rowRight[i] < rowRight[best] {
						best = i
					}
				}
				if rowRight[best]+badgeGap+bw <= xmax {
					r, left = best, rowRight[best]+badgeGap
				} else { // no room to the right: a row of its own
					rowRight = append(rowRight, -1e9)
					r = len(rowRight) - 1
				}
			}
			rowRight[r] = left + bw
			ll.badges[ei] = placedBadge{x: left, y: float64(r), w: bw, trueX: tx}
		}
		ll.badgeRows = len(rowRight)
		h := lanePad + float64(ll.spanRows)*spanRowH + float64(max(ll.badgeRows, 1))*badgeRowH + dotRowH + lanePad
		nameLines := 1.0
		if l.Sub != "" {
			nameLines = 2
		}
		ll.height = max(h, nameLines*lineH+2*lanePad+4)
		y += ll.height
	}
	plotBottom := y

	// Lanes' backgrounds and names.
	for li, l := range c.Lanes {
		ll := layouts[li]
		fill := "#fafafa"
		if li%2 == 1 {
			fill = "#f0f0f0"
		}
		fmt.Fprintf(b, `<rect x="0" y="%.1f" width="%.0f" height="%.1f" fill="%s"/>`+"\n", ll.top, W, ll.height, fill)
		ny := ll.top + lanePad + textSize + 1
		fmt.Fprintf(b, `<text x="8" y="%.1f" font-weight="bold" fill="#212121">%s</text>`+"\n", ny, esc(cut(l.Name, nameChars)))
		if l.Sub != "" {
			fmt.Fprintf(b, `<text x="8" y="%.1f" font-size="%.0f" fill="#616161">%s</text>`+"\n", ny+lineH-1, smallSize, esc(cut(l.Sub, subChars)))
		}
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bdbdbd"/>`+"\n", nameW, plotTop, nameW, plotBottom)

	// Ticks under the axis: breaks first, then now, then the times of
	// numbered things, then every other instant, where they fit.
	type label struct {
		x0, x1 float64
		text   string
		cx     float64
		line   bool
	}
	var labels []label
	tickY := plotBottom + smallSize + 4
	tryLabel := func(cx float64, text string, line bool) {
		wd := textWidth(text, smallSize)
		x0 := min(max(cx-wd/2, nameW+2), W-4-wd)
		x1 := x0 + wd
		for _, l := range labels {
			if x0 < l.x1+tickGap && x1 > l.x0-tickGap {
				return
			}
		}
		labels = append(labels, label{x0: x0, x1: x1, text: text, cx: cx, line: line})
	}
	for _, g := range ax.breaks {
		tryLabel(g.x, "("+shortDur(g.dur)+")", false)
	}
	if !c.Now.IsZero() {
		tryLabel(ax.x(c.Now), "now "+c.format(c.Now), true)
	}
	for _, it := range items {
		tryLabel(ax.x(it.at), c.format(it.at), true)
	}
	for _, t := range ax.instants {
		tryLabel(ax.x(t), c.format(t), true)
	}
	sort.SliceStable(labels, func(i, j int) bool { return labels[i].x0 < labels[j].x0 })
	for _, l := range labels {
		if l.line {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", l.cx, plotTop, l.cx, plotBottom+3)
		}
	}
	// Breaks: a white gap with zigzag edges across the lanes.
	for _, g := range ax.breaks {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="8" height="%.1f" fill="#ffffff"/>`+"\n", g.x-4, plotTop, plotBottom-plotTop)
		for _, dx := range []float64{-4, 4} {
			var d strings.Builder
			fmt.Fprintf(&d, "M%.1f %.1f", g.x+dx, plotTop)
			for yy, k := plotTop, 0; yy < plotBottom; yy, k = yy+6, k+1 {
				off := 2.0
				if k%2 == 1 {
					off = -2
				}
				fmt.Fprintf(&d, " L%.1f %.1f", g.x+dx+off, min(yy+6, plotBottom))
			}
			fmt.Fprintf(b, `<path d="%s" fill="none" stroke="#9e9e9e"/>`+"\n", d.String())
		}
	}
	if !c.Now.IsZero() {
		x := ax.x(c.Now)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#1565c0" stroke-dasharray="2,2"/>`+"\n", x, plotTop, x, plotBottom)
	}
	// Events across the lanes (faults).
	for _, l := range c.Lanes {
		for _, e := range l.Events {
			if e.Across {
				fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4,3" opacity="0.6" class="across"/>`+"\n",
					ax.x(e.At), plotTop, ax.x(e.At), plotBottom, c.style(e.Class).Fill)
			}
		}
	}

	// Spans.
	for li, l := range c.Lanes {
		ll := layouts[li]
		for si, s := range l.Spans {
			st := c.style(s.Class)
			x0, x1 := ax.x(s.From), ax.x(ll.spanTo[si])
			if s.To.IsZero() && c.Now.IsZero() {
				x1 = W - 4 // open to the end of the chart
			}
			x1 = max(x1, x0+2)
			sy := ll.top + lanePad + float64(ll.spanRow[si])*spanRowH
			title := s.Label
			if s.Explain != "" {
				title += ": " + s.Explain
			}
			fmt.Fprintf(b, `<g class="span" data-class="%s"><title>%s</title>`, esc(s.Class), esc(title))
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" rx="2" fill="%s"/>`, x0, sy, x1-x0, spanH, st.Fill)
			tx := x0 + 4
			if n, ok := spanNum[[2]int{li, si}]; ok {
				bwd := badgeWidth(n)
				if x1-x0 >= bwd+2 {
					fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" rx="3" fill="#424242"/>`, x0+1, sy+1, bwd, spanH-2)
					fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%.0f" font-weight="bold" fill="#ffffff" text-anchor="middle">%d</text>`,
						x0+1+bwd/2, sy+spanH-3.5, smallSize, n)
					tx = x0 + bwd + 5
				}
			}
			room := int((x1 - tx - 3) / (smallSize * advance))
			if lbl := cut(s.Label, room); lbl != "" && room >= 3 {
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%.0f" fill="%s">%s</text>`, tx, sy+spanH-3.5, smallSize, st.Text, esc(lbl))
			}
			fmt.Fprintln(b, `</g>`)
		}
	}

	// Stems from badges to their instants, under every badge.
	for li, l := range c.Lanes {
		ll := layouts[li]
		dotY := ll.top + ll.height - lanePad - dotRowH/2
		badgeTop := ll.top + lanePad + float64(ll.spanRows)*spanRowH
		for ei, e := range l.Events {
			if pb, ok := ll.badges[ei]; ok {
				by := badgeTop + pb.y*badgeRowH + (badgeRowH-badgeH)/2
				fmt.Fprintf(b, `<path d="M%.1f %.1f L%.1f %.1f" stroke="%s" stroke-width="1"/>`+"\n", ax.x(e.At), dotY, pb.x+pb.w/2, by+badgeH, c.style(e.Class).Fill)
			}
		}
	}
	// Events.
	for li, l := range c.Lanes {
		ll := layouts[li]
		dotY := ll.top + ll.height - lanePad - dotRowH/2
		badgeTop := ll.top + lanePad + float64(ll.spanRows)*spanRowH
		for ei, e := range l.Events {
			st := c.style(e.Class)
			title := e.Title
			if title == "" {
				title = strings.TrimSpace(e.Label + " " + e.Explain)
			}
			fmt.Fprintf(b, `<g class="event" data-class="%s"%s><title>%s</title>`, esc(e.Class), dataAttrs(e.Data), esc(title))
			x := ax.x(e.At)
			if pb, ok := ll.badges[ei]; ok {
				n := eventNum[[2]int{li, ei}]
				by := badgeTop + pb.y*badgeRowH + (badgeRowH-badgeH)/2
				fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" rx="4" fill="%s"/>`, pb.x, by, pb.w, badgeH, st.Fill)
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%.0f" font-weight="bold" fill="%s" text-anchor="middle">%d</text>`,
					pb.x+pb.w/2, by+badgeH-4, smallSize, st.Text, n)
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`, x, dotY, st.Fill)
			} else {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s" opacity="0.7"/>`, x, dotY, st.Fill)
			}
			fmt.Fprintln(b, `</g>`)
		}
	}

	// Time labels.
	for _, l := range labels {
		fill := "#555555"
		if !l.line {
			fill = "#9e9e9e"
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%.0f" fill="%s">%s</text>`+"\n", l.x0, tickY, smallSize, fill, esc(l.text))
	}
	y = tickY + 14

	// Legend: every class the chart uses that has a legend text, spans'
	// first; entries flow left to right and wrap.
	type entry struct {
		class string
		span  bool
	}
	var entries []entry
	seen := map[string]bool{}
	add := func(class string, span bool) {
		if seen[class] || c.style(class).Legend == "" {
			return
		}
		seen[class] = true
		entries = append(entries, entry{class, span})
	}
	for _, l := range c.Lanes {
		for _, s := range l.Spans {
			add(s.Class, true)
		}
	}
	for _, l := range c.Lanes {
		for _, e := range l.Events {
			add(e.Class, false)
		}
	}
	if len(entries) > 0 {
		y += lineH
		fmt.Fprintf(b, `<text x="8" y="%.1f" font-weight="bold" fill="#212121">Legend</text>`+"\n", y)
		x := 8.0
		y += 4
		rowTop := y
		maxChars := int((W - 16 - legendSwatch - 6) / (textSize * advance))
		for _, en := range entries {
			st := c.style(en.class)
			lines := wrap(st.Legend, maxChars)
			wd := legendSwatch + 6 + textWidth(lines[0], textSize) + 18
			if len(lines) > 1 || x+wd > W-8 {
				if x > 8 {
					rowTop += lineH + 2
				}
				x = 8
			}
			sy := rowTop + 3
			if en.span {
				fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.0f" height="11" rx="2" fill="%s"/>`, x, sy, legendSwatch, st.Fill)
			} else {
				fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.0f" height="11" rx="4" fill="%s"/>`, x, sy, legendSwatch, st.Fill)
			}
			for i, line := range lines {
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#212121">%s</text>`, x+legendSwatch+6, rowTop+textSize+float64(i)*lineH, esc(line))
			}
			fmt.Fprintln(b)
			if len(lines) > 1 {
				rowTop += float64(len(lines)) * lineH
				x = 8
				continue
			}
			x += wd
		}
		if x > 8 {
			rowTop += lineH + 2
		}
		y = rowTop
	}
	for _, k := range c.Key {
		for _, line := range wrap(k, int((W-16)/(textSize*advance))) {
			y += lineH
			fmt.Fprintf(b, `<text x="8" y="%.1f" fill="#424242">%s</text>`+"\n", y, esc(line))
		}
	}

	// The numbered list.
	if len(items) > 0 {
		y += lineH + 8
		fmt.Fprintf(b, `<text x="8" y="%.1f" font-weight="bold" fill="#212121">What happened</text>`+"\n", y)
		y += 4
		numW := badgeWidth(len(items))
		clockX := 8 + numW + 6
		textX := clockX + textWidth(c.format(last), textSize) + 10
		chars := int((W - textX - 8) / (textSize * advance))
		for _, it := range items {
			var label, explain, class string
			if it.span {
				s := c.Lanes[it.lane].Spans[it.idx]
				label, explain, class = s.Label, s.Explain, ""
			} else {
				e := c.Lanes[it.lane].Events[it.idx]
				label, explain, class = e.Label, e.Explain, e.Class
			}
			fill, text := "#424242", "#ffffff"
			if !it.span {
				st := c.style(class)
				fill, text = st.Fill, st.Text
			}
			line := explain
			if label != "" {
				line = label + ": " + explain
			}
			lines := wrap(line, chars)
			top := y + 3
			bwd := badgeWidth(it.num)
			fmt.Fprintf(b, `<g class="item" data-number="%d"><rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" rx="4" fill="%s"/>`, it.num, 8+numW-bwd, top, bwd, badgeH, fill)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%.0f" font-weight="bold" fill="%s" text-anchor="middle">%d</text>`,
				8+numW-bwd/2, top+badgeH-4, smallSize, text, it.num)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#616161">%s</text>`, clockX, top+textSize, esc(c.format(it.at)))
			for i, ln := range lines {
				ty := top + textSize + float64(i)*lineH
				if i == 0 && label != "" && strings.HasPrefix(ln, label+":") {
					fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#212121"><tspan font-weight="bold">%s</tspan>%s</text>`,
						textX, ty, esc(label+":"), esc(strings.TrimPrefix(ln, label+":")))
					continue
				}
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#212121">%s</text>`, textX, ty, esc(ln))
			}
			fmt.Fprintln(b, `</g>`)
			y += float64(len(lines))*lineH + 3
		}
	}

	// Notes.
	if len(c.Notes) > 0 {
		y += 8
	}
	for ni, n := range c.Notes {
		fill, weight := "#212121", ""
		switch n.Tone {
		case Good:
			fill, weight = "#2e7d32", ` font-weight="bold"`
		case Bad:
			fill = "#c62828"
		}
		for _, line := range wrap(n.Text, int((W-16)/(textSize*advance))) {
			y += lineH
			fmt.Fprintf(b, `<text x="8" y="%.1f" fill="%s"%s class="%s" data-note="%d" data-tone="%s">%s</text>`+"\n",
				y, fill, weight, esc(strings.TrimSpace("note "+n.Class)), ni, n.Tone, esc(line))
		}
	}
	y += 12
	_ = b.Flush()

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="%s" font-size="%.0f">`+"\n",
		W, y, W, y, fontFamily, textSize)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	_, _ = w.Write(body.Bytes())
	fmt.Fprintln(w, `</svg>`)
}

// cut shortens s to n runes, ending in "…" when cut; "" when n < 2.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 2 {
		return ""
	}
	return string(r[:n-1]) + "…"
}

func dataAttrs(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, ` data-%s="%s"`, esc(k), esc(m[k]))
	}
	return b.String()
}

// shortDur prints a gap: 45s, 6m26s, 2h05m.
func shortDur(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
