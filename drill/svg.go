package drill

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// SVG draws a trajectory as a timeline, hand-written SVG: one lane per
// actor — the workers first, each with its epochs as bands from claim to
// lease end, then the commander, the operator, the providers and the rest
// — every event a marker in its actor's lane (its full line, as Render
// prints it canonically, in the marker's <title>; transitions labelled
// with their state), the providers' state over time as bands (Aurora's
// writer and a promotion in progress; Route 53's record value and each
// change's PENDING/INSYNC), faults as red markers with a dashed line
// across the lanes, and the graders' violations listed under the chart.
//
// Simulated time runs left to right, 12 px a second; a gap of more than 8 s
// with nothing happening is drawn 8 s wide with a break mark, so that a
// trial's minutes of waiting do not push its events apart. The output is
// a function of the trajectory alone (epochs are named by order), so the
// same trial draws the same picture.
func (t *Trajectory) SVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	d := newDrawing(t)
	d.write(bw)
	return bw.Flush()
}

const (
	svgPxPerSec  = 12.0
	svgMaxGap    = 8 * time.Second
	svgBreak     = 18.0
	svgLeft      = 150.0
	svgTop       = 46.0
	svgLaneH     = 34.0
	svgRight     = 40.0
	svgViolLineH = 15.0
)

type drawing struct {
	t     *Trajectory
	order map[int64]int
	lanes []string
	lane  map[string]int
	xs    []float64 // by event
	width float64
	// breaks are the x of compressed gaps.
	breaks []float64
}

func newDrawing(t *Trajectory) *drawing {
	d := &drawing{t: t, order: t.epochOrder(), lane: map[string]int{}}
	var workers, others []string
	for _, e := range t.Events {
		a := e.Actor
		if _, ok := d.lane[a]; ok {
			continue
		}
		d.lane[a] = -1
		if strings.HasPrefix(a, "worker-") {
			workers = append(workers, a)
		} else {
			others = append(others, a)
		}
	}
	sort.Strings(workers)
	rank := func(a string) int {
		for i, x := range []string{"commander", "operator", "temporal", "aurora", "route53", "audit", "network"} {
			if a == x {
				return i
			}
		}
		return 99
	}
	sort.SliceStable(others, func(i, j int) bool { return rank(others[i]) < rank(others[j]) })
	for _, want := range []string{"aurora", "route53"} { // the providers' state bands need their lanes
		if _, ok := d.lane[want]; !ok {
			others = append(others, want)
		}
	}
	sort.SliceStable(others, func(i, j int) bool { return rank(others[i]) < rank(others[j]) })
	d.lanes = append(workers, others...)
	for i, a := range d.lanes {
		d.lane[a] = i
	}
	// x of each event: time, long gaps compressed; events at one instant
	// in one lane spread a few pixels apart.
	x, last := svgLeft+10, time.Duration(0)
	seen := map[string]int{}
	for i, e := range t.Events {
		if i == 0 {
			last = e.At
		}
		gap := e.At - last
		if gap > svgMaxGap {
			d.breaks = append(d.breaks, x+svgMaxGap.Seconds()*svgPxPerSec/2)
			x += svgMaxGap.Seconds()*svgPxPerSec + svgBreak
		} else {
			x += gap.Seconds() * svgPxPerSec
		}
		if gap > 0 {
			seen = map[string]int{}
		}
		k := e.Actor
		d.xs = append(d.xs, x+float64(seen[k])*4)
		seen[k]++
		last = e.At
	}
	d.width = x + 60 + svgRight
	for _, xi := range d.xs {
		d.width = max(d.width, xi+svgRight+60)
	}
	return d
}

func (d *drawing) laneY(a string) float64 { return svgTop + float64(d.lane[a])*svgLaneH }

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// colour of a cluster or record value.
func colour(v string) string {
	switch v {
	case clusterPrimary:
		return "#9e9e9e"
	case clusterSecondary:
		return "#1e88e5"
	case maintenance:
		return "#fb8c00"
	case staticFallback:
		return "#8e24aa"
	}
	return "#bdbdbd"
}

func (d *drawing) write(w *bufio.Writer) {
	t := d.t
	vs := Grade(t)
	chartBottom := svgTop + float64(len(d.lanes))*svgLaneH
	height := chartBottom + 50 + float64(len(vs)+1)*svgViolLineH + 20
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="monospace" font-size="10">`+"\n",
		d.width, height, d.width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	what := fmt.Sprintf("trial %d", t.Trial)
	if t.Scenario != "" {
		what = fmt.Sprintf("scenario %s", t.Scenario)
	}
	fmt.Fprintf(w, `<text x="10" y="18" font-size="13" font-weight="bold">%s</text>`+"\n",
		esc(fmt.Sprintf("%s, %s design: writer before the incident %s; ends writer %s, traffic %s", what, t.Design, t.Original, t.FinalWriter, t.FinalTraffic)))
	fmt.Fprintf(w, `<text x="10" y="34" fill="#555">%s</text>`+"\n",
		esc("simulated time left to right (12 px/s; a break mark is a quiet gap drawn 8 s wide); hover a marker for its event"))
	// Lanes.
	for i, a := range d.lanes {
		y := d.laneY(a)
		fill := "#fafafa"
		if i%2 == 1 {
			fill = "#f0f0f0"
		}
		fmt.Fprintf(w, `<rect x="0" y="%.1f" width="%.0f" height="%.0f" fill="%s"/>`+"\n", y, d.width, svgLaneH, fill)
		fmt.Fprintf(w, `<text x="8" y="%.1f" font-weight="bold">%s</text>`+"\n", y+svgLaneH/2+4, esc(a))
	}
	d.epochBands(w)
	d.providerBands(w)
	for _, x := range d.breaks {
		fmt.Fprintf(w, `<path d="M%.1f %.1f l-4 8 l8 4 l-8 4 l4 8" fill="none" stroke="#777"/>`+"\n", x, svgTop-20)
	}
	// Time ticks: the clock at every event time that starts a new second
	// past the last tick by 40 px.
	lastTick := -1e9
	for i, e := range t.Events {
		if d.xs[i]-lastTick < 70 {
			continue
		}
		lastTick = d.xs[i]
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", d.xs[i], svgTop, d.xs[i], chartBottom)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" fill="#555" text-anchor="middle">%s</text>`+"\n", d.xs[i], chartBottom+14, esc(clock(e.At)))
	}
	// Faults: a dashed line across the lanes.
	for i, e := range t.Events {
		if e.Kind == KindFault {
			fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e53935" stroke-dasharray="3,3" opacity="0.5"/>`+"\n",
				d.xs[i], svgTop, d.xs[i], chartBottom)
		}
	}
	// Every event.
	for i, e := range t.Events {
		d.marker(w, i, e)
	}
	// Legend and violations.
	y := chartBottom + 34
	fmt.Fprintf(w, `<text x="10" y="%.1f">%s</text>`+"\n", y, esc("● call  ■ provider changed the world  ◆ transition  ▲ fault  ✕ refused  ⏸ hold  ○ other; bands: epochs (workers), writer / promoting (aurora), record value and change status (route53)"))
	y += svgViolLineH + 4
	if len(vs) == 0 {
		fmt.Fprintf(w, `<text x="10" y="%.1f" fill="#2e7d32" font-weight="bold" class="verdict">graders: no violation</text>`+"\n", y)
	}
	for _, v := range vs {
		fmt.Fprintf(w, `<text x="10" y="%.1f" fill="#c62828" class="violation">%s</text>`+"\n", y,
			esc("VIOLATION "+string(v.Grader)+": "+canonicalEpochs(d.order, v.Detail)))
		y += svgViolLineH
	}
	fmt.Fprintln(w, `</svg>`)
}

// epochBands draws each worker's grants: from its claim to the end of its
// grant (lease expired, released), or the end of the trial.
func (d *drawing) epochBands(w *bufio.Writer) {
	start := map[string]int{}
	end := d.xs[len(d.xs)-1] + 20
	band := func(actor string, from int, to float64) {
		e := d.t.Events[from]
		y := d.laneY(actor)
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="#c8e6c9" opacity="0.8" class="epoch"/>`+"\n",
			d.xs[from], y+3, max(to-d.xs[from], 2), svgLaneH-6)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" fill="#2e7d32">%s</text>`+"\n", d.xs[from]+3, y+12, esc(fmt.Sprintf("epoch e%d", d.order[e.Epoch])))
	}
	for i, e := range d.t.Events {
		switch e.Kind {
		case KindClaim:
			start[e.Actor] = i
		case KindLost:
			if from, ok := start[e.Actor]; ok {
				band(e.Actor, from, d.xs[i])
				delete(start, e.Actor)
			}
		}
	}
	open := make([]string, 0, len(start))
	for a := range start {
		open = append(open, a)
	}
	sort.Strings(open) // the same picture every time
	for _, a := range open {
		band(a, start[a], end)
	}
}

// providerBands draws Aurora's writer (and a promotion in progress) and
// Route 53's record value and each change's status over time.
func (d *drawing) providerBands(w *bufio.Writer) {
	t := d.t
	end := d.xs[len(d.xs)-1] + 20
	seg := func(lane string, x0, x1 float64, dy, h float64, fill, label, class string) {
		if x1 <= x0 {
			x1 = x0 + 1
		}
		y := d.laneY(lane)
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.35" class="%s"><title>%s</title></rect>`+"\n",
			x0, y+dy, x1-x0, h, fill, class, esc(label))
	}
	// Aurora: the writer.
	writer, from := t.Original, svgLeft
	promoting, pFrom := "", 0.0
	for i, e := range t.Events {
		if e.Kind != KindApplied {
			continue
		}
		switch e.Effect {
		case "promotion-accepted":
			promoting, pFrom = e.Value, d.xs[i]
		case "writer":
			seg("aurora", from, d.xs[i], svgLaneH-9, 6, colour(writer), "writer "+writer, "writer")
			if promoting != "" {
				seg("aurora", pFrom, d.xs[i], svgLaneH-15, 5, colour(promoting), "promoting "+promoting, "promoting")
				promoting = ""
			}
			writer, from = e.Value, d.xs[i]
		}
	}
	seg("aurora", from, end, svgLaneH-9, 6, colour(writer), "writer "+writer, "writer")
	// Route 53: the record's value, and each change PENDING then INSYNC.
	value, vFrom := t.Original, svgLeft
	pending := map[string]float64{}
	for i, e := range t.Events {
		if e.Kind != KindApplied {
			continue
		}
		switch e.Effect {
		case "record":
			seg("route53", vFrom, d.xs[i], svgLaneH-9, 6, colour(value), "record "+value, "record")
			value, vFrom = e.Value, d.xs[i]
			if len(e.Evidence) > 0 {
				pending[e.Evidence[0]] = d.xs[i]
			}
		case "insync":
			if len(e.Evidence) > 0 {
				if x0, ok := pending[e.Evidence[0]]; ok {
					seg("route53", x0, d.xs[i], svgLaneH-15, 5, "#fdd835", e.Evidence[0]+" PENDING", "pending")
					delete(pending, e.Evidence[0])
				}
			}
		}
	}
	seg("route53", vFrom, end, svgLaneH-9, 6, colour(value), "record "+value, "record")
	ids := make([]string, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		seg("route53", pending[id], end, svgLaneH-15, 5, "#fdd835", id+" PENDING", "pending")
	}
}

// marker draws event i in its actor's lane, with its whole line as title.
func (d *drawing) marker(w *bufio.Writer, i int, e Event) {
	x, y := d.xs[i], d.laneY(e.Actor)+svgLaneH/2-2
	title := esc(strings.TrimSpace(eventLine(e, d.order, true)))
	open := fmt.Sprintf(`<g class="event" data-index="%d" data-kind="%s" data-at="%.3f"><title>%s</title>`, i, esc(string(e.Kind)), e.At.Seconds(), title)
	var shape, label string
	switch e.Kind {
	case KindCall:
		fill := "#90a4ae"
		if isMutation(e) {
			fill = "#37474f"
		}
		shape = fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x, y, fill)
	case KindApplied:
		shape = fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"/>`, x-3.5, y-3.5, colour(e.Value))
		if e.Effect == "record" || e.Effect == "writer" {
			label = strings.Join(e.Evidence, ",") + " " + e.Value
		}
	case KindTransition:
		shape = fmt.Sprintf(`<path d="M%.1f %.1f l4 4 l-4 4 l-4 -4 z" fill="#5e35b1"/>`, x, y-4)
		label = e.To
	case KindFault:
		shape = fmt.Sprintf(`<path d="M%.1f %.1f l5 9 l-10 0 z" fill="#e53935"/>`, x, y-5)
		label = e.Effect
	case KindRefused:
		shape = fmt.Sprintf(`<path d="M%.1f %.1f l8 8 M%.1f %.1f l-8 8" stroke="#c62828" stroke-width="2"/>`, x-4, y-4, x+4, y-4)
		label = "refused"
	case KindHold, KindResume:
		shape = fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="8" height="8" fill="#ff6f00"/>`, x-4, y-4)
		label = string(e.Kind)
	case KindClaim, KindLost:
		shape = fmt.Sprintf(`<path d="M%.1f %.1f l0 12" stroke="#2e7d32" stroke-width="2"/>`, x, y-6)
	default:
		shape = fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="none" stroke="#757575"/>`, x, y)
	}
	fmt.Fprint(w, open, shape)
	if label != "" {
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="8" fill="#333">%s</text>`, x+4, y+12, esc(label))
	}
	fmt.Fprintln(w, `</g>`)
}
