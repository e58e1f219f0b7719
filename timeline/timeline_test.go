package timeline_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/testsupport/browser"
	"github.com/leasegate/leasegate/timeline"
)

var t0 = time.Date(2026, 3, 14, 2, 13, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// operation is the console's picture of one operation: the task's owners
// and the record's journal on one axis.
func operation() timeline.Chart {
	return timeline.Chart{
		Title:    "promote/incident-seed003 (promote aurora-usw2)",
		Subtitle: "the record's journal beside the task's owners",
		Lanes: []timeline.Lane{
			{Name: "owner", Spans: []timeline.Span{
				{From: at(0), To: at(33), Label: "epoch 7 · worker-a", Class: "epoch"},
				{From: at(40), Label: "epoch 9 · worker-b", Class: "epoch", Explain: "worker-b took the task over"},
			}},
			{Name: "record", Events: []timeline.Event{
				{At: at(0), Label: "PROPOSED", Explain: "worker-a proposed <promote> & waited", Class: "transition"},
				{At: at(18), Label: "AUTHORIZED", Explain: "approved by commander", Class: "transition"},
				{At: at(24), Label: "DISPATCHING", Explain: "the call is going out", Class: "transition"},
				{At: at(25), Class: "read"},
				{At: at(27), Label: "CONFIRMED", Explain: "rds-req-1", Class: "transition"},
			}},
		},
		Styles: map[string]timeline.Style{"epoch": {Legend: "who held the task"}, "transition": {Legend: "the record's state changes"}},
		Notes:  []timeline.Note{{Text: "confirmed", Tone: timeline.Good}},
	}
}

func render(t *testing.T, c timeline.Chart) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := c.SVG(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// texts returns the SVG's rendered texts (not <title>s), each <text>
// element's character data joined.
func texts(t *testing.T, svg []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out []string
	depth, inTitle := 0, false
	var cur strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "text":
				depth++
			case "title":
				inTitle = true
			case "style", "script":
				t.Fatalf("the SVG has a <%s>", el.Name.Local)
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "text":
				depth--
				if depth == 0 {
					out = append(out, cur.String())
					cur.Reset()
				}
			case "title":
				inTitle = false
			}
		case xml.CharData:
			if depth > 0 && !inTitle {
				cur.Write(el)
			}
		}
	}
	return out
}

// TestEveryExplanationIsVisibleAndNumberedInTimeOrder: each explained
// event and span is a numbered line of the list, in time order, with its
// time and label; an event without an explanation has no number; the
// legend names the classes used that have a legend and no other.
func TestEveryExplanationIsVisibleAndNumberedInTimeOrder(t *testing.T) {
	all := strings.Join(texts(t, render(t, operation())), "\n")
	want := []string{
		"1\n02:13:00\nPROPOSED: worker-a proposed <promote> & waited",
		"2\n02:13:18\nAUTHORIZED: approved by commander",
		"3\n02:13:24\nDISPATCHING: the call is going out",
		"4\n02:13:27\nCONFIRMED: rds-req-1",
		"5\n02:13:40\nepoch 9 · worker-b: worker-b took the task over",
	}
	pos := 0
	for _, w := range want {
		i := strings.Index(all[pos:], w)
		if i < 0 {
			t.Fatalf("the list lacks %q after position %d:\n%s", w, pos, all)
		}
		pos += i + len(w)
	}
	if strings.Contains(all, "\n6\n") {
		t.Errorf("a sixth number: the unexplained read got one:\n%s", all)
	}
	for _, w := range []string{"Legend", "who held the task", "the record's state changes", "confirmed", "epoch 7 · worker-a"} {
		if !strings.Contains(all, w) {
			t.Errorf("no %q in the picture:\n%s", w, all)
		}
	}
	if strings.Contains(all, "changed the world") || strings.Contains(all, "read or") {
		t.Errorf("legend names a class the chart does not use:\n%s", all)
	}
}

func TestSameChartSameBytes(t *testing.T) {
	a, b := render(t, operation()), render(t, operation())
	if !bytes.Equal(a, b) {
		t.Fatal("two renderings of one chart differ")
	}
}

// dense is a chart whose badges cannot all sit at their instants: 40
// events in one second on one lane, bursts on another, long labels, a long
// quiet gap and an open span.
func dense(n int) timeline.Chart {
	var burst, spread []timeline.Event
	for i := 0; i < 40; i++ {
		burst = append(burst, timeline.Event{At: at(10 + float64(i)/40), Label: "STATE_" + fmt.Sprint(i), Explain: strings.Repeat("a long explanation that wraps ", 4), Class: "transition"})
	}
	for i := 0; i < n; i++ {
		spread = append(spread, timeline.Event{At: at(float64(i%97) * 0.7), Label: "x", Explain: "event " + fmt.Sprint(i), Class: []string{"call", "change", "fault", "note"}[i%4], Across: i%50 == 0})
	}
	spread = append(spread, timeline.Event{At: at(3600), Label: "much later", Explain: "after an hour", Class: "note"})
	return timeline.Chart{
		Title: strings.Repeat("a very long title that must wrap ", 5),
		Lanes: []timeline.Lane{
			{Name: "a lane with a name far too long for its column", Sub: "and a second line as long as it", Events: burst,
				Spans: []timeline.Span{
					{From: at(0), To: at(5), Label: "a span with a label longer than it can show"},
					{From: at(5), To: at(6), Label: "next to it"},
					{From: at(6), Label: "open span with a label longer than it can show " + strings.Repeat("x", 80)},
					{From: at(2), To: at(8), Label: "overlapping the others in time, a row of its own"},
				}},
			{Name: "spread", Events: spread},
		},
		Key: []string{strings.Repeat("key text ", 30)},
	}
}

// TestDenseChartReadableInABrowser: a chart that crowds its lanes renders
// in Chromium at its width with no two texts overlapping and none under
// 10 px.
func TestDenseChartReadableInABrowser(t *testing.T) {
	b := browser.Start(t)
	p := b.NewPage(t, timeline.DefaultWidth, 900)
	for _, n := range []int{0, 300} {
		svg := render(t, dense(n))
		p.LoadSVG(t, svg, timeline.DefaultWidth)
		boxes := p.TextBoxes(t)
		if want := len(texts(t, svg)); len(boxes) < want {
			t.Errorf("n=%d: %d texts rendered of %d", n, len(boxes), want)
		}
		for _, o := range browser.Overlapping(boxes) {
			t.Errorf("n=%d: %v", n, o)
		}
		for _, s := range browser.SmallerThan(boxes, 10) {
			t.Errorf("n=%d: under 10 px: %v", n, s)
		}
		p.Screenshot(t, fmt.Sprintf("dense-%d", n))
	}
}
