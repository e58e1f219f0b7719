package drill_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/browser"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// svgEvents parses an SVG timeline and returns the title of every event
// marker by its data-index, and the texts of the violations it lists.
func svgEvents(t *testing.T, svg []byte) (map[int]string, []string, int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	events := map[int]string{}
	var violations []string
	notes := map[string]bool{}
	faultLines := 0
	cur, inTitle, inViolation := -1, false, false
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("the SVG does not parse: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case el.Name.Local == "g" && attr["class"] == "event":
				n, err := strconv.Atoi(attr["data-index"])
				if err != nil {
					t.Fatalf("event marker without an index: %v", attr)
				}
				cur = n
			case el.Name.Local == "title" && cur >= 0:
				inTitle = true
			case el.Name.Local == "text" && strings.Contains(attr["class"], "violation"):
				// A violation's note may wrap over several lines, each
				// with the note's index.
				inViolation = !notes[attr["data-note"]]
				notes[attr["data-note"]] = true
			case el.Name.Local == "line" && attr["class"] == "across":
				faultLines++
			}
		case xml.CharData:
			if inTitle {
				events[cur] += string(el)
			}
			if inViolation {
				violations = append(violations, string(el))
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "title":
				inTitle = false
			case "g":
				cur = -1
			case "text":
				inViolation = false
			}
		}
	}
	return events, violations, faultLines
}

// checkSVG: every event of the trajectory is drawn, once, with its line
// as Render prints it; every fault is marked across the lanes; every
// violation is listed.
func checkSVG(t *testing.T, tr *drill.Trajectory) {
	t.Helper()
	var b bytes.Buffer
	if err := tr.SVG(&b); err != nil {
		t.Fatal(err)
	}
	events, violations, faultLines := svgEvents(t, b.Bytes())
	lines := strings.Split(strings.TrimSuffix(tr.Render(true), "\n"), "\n")
	lines = lines[1 : len(lines)-1] // the header and the end line
	if len(events) != len(tr.Events) || len(lines) != len(tr.Events) {
		t.Fatalf("%s: %d events drawn, %d in the trajectory", tr.Design, len(events), len(tr.Events))
	}
	faults := 0
	for i, e := range tr.Events {
		if got, want := events[i], strings.TrimSpace(lines[i]); got != want {
			t.Errorf("%s: event %d drawn as %q, want %q", tr.Design, i, got, want)
		}
		if e.Kind == drill.KindFault {
			faults++
		}
	}
	if faultLines != faults {
		t.Errorf("%s: %d fault lines for %d faults", tr.Design, faultLines, faults)
	}
	if vs := drill.Grade(tr); len(violations) != len(vs) {
		t.Errorf("%s: %d violations listed, the graders found %d", tr.Design, len(violations), len(vs))
	}
}

// TestSVGHasEveryEvent draws the incident scenario and a randomized
// trial of each design, and checks every picture against its trajectory.
func TestSVGHasEveryEvent(t *testing.T) {
	naive, fenced := runIncident(t)
	checkSVG(t, naive)
	checkSVG(t, fenced)
	cli := embedtest.NewCluster(t).Client(t)
	rep, err := drill.Run(lgtest.Ctx(t), cli, drill.WithSeed(2026), drill.WithReplay(7), drill.WithPrefix("/svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Replayed {
		checkSVG(t, tr)
	}
}

// TestPicturesAreCurrent: the incident's pictures in docs/img are what
// the drill draws now (make pictures redraws them).
func TestPicturesAreCurrent(t *testing.T) {
	naive, fenced := runIncident(t)
	for _, tr := range []*drill.Trajectory{naive, fenced} {
		file := "../docs/img/incident-" + string(tr.Design) + ".svg"
		committed, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := tr.SVG(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(committed, b.Bytes()) {
			t.Errorf("%s is not what the drill draws now: run make pictures", file)
		}
	}
}

// readmeWidth is the width, in CSS px, the pictures are checked at: the
// README shows them one under the other at 100% of its column, about 830
// px on a desktop; 800 leaves a margin.
const readmeWidth = 800

// readabilityProblems shows an SVG at width px in the browser's page, reads
// every piece of text it renders, and returns each pair of texts that
// overlap and each text under 10 px.
func readabilityProblems(t *testing.T, p *browser.Page, svg []byte, width int) []string {
	t.Helper()
	p.LoadSVG(t, svg, width)
	boxes := p.TextBoxes(t)
	if len(boxes) < 10 {
		return []string{fmt.Sprintf("only %d texts rendered", len(boxes))}
	}
	var out []string
	for _, o := range browser.Overlapping(boxes) {
		out = append(out, "overlap: "+o.String())
	}
	for _, s := range browser.SmallerThan(boxes, 10) {
		out = append(out, "under 10 px: "+s.String())
	}
	return out
}

// TestPicturesReadableInABrowser loads each committed picture of the
// README in headless Chromium at the README's width and fails when two of
// its texts overlap or one renders under 10 px, keeping a screenshot of
// each (LEASEGATE_ARTIFACTS); and shows, in the same browser, that the
// check catches a label printed over another and a picture whose text is
// too small at that width.
func TestPicturesReadableInABrowser(t *testing.T) {
	b := browser.Start(t)
	t.Run("committed pictures", func(t *testing.T) {
		p := b.NewPage(t, readmeWidth, 900)
		for _, d := range []string{"naive", "fenced"} {
			file := "../docs/img/incident-" + d + ".svg"
			svg, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, problem := range readabilityProblems(t, p, svg, readmeWidth) {
				t.Errorf("%s at %d px: %s", file, readmeWidth, problem)
			}
			p.Screenshot(t, "incident-"+d)
		}
	})
	t.Run("the check catches overlap and tiny text", func(t *testing.T) {
		_, fenced := runIncident(t)
		c := fenced.Chart()
		var good bytes.Buffer
		if err := c.SVG(&good); err != nil {
			t.Fatal(err)
		}
		// A second label on the baseline of the first lane's name.
		overprinted := bytes.Replace(good.Bytes(), []byte(`</svg>`), []byte(`<text x="20" y="`+laneNameY(t, good.Bytes())+`">stale_topology_cache</text></svg>`), 1)
		// The same chart laid out for 1600 px: shown at 800, 11 px text is 5.5 px.
		c.Width = 1600
		var wide bytes.Buffer
		if err := c.SVG(&wide); err != nil {
			t.Fatal(err)
		}
		p := b.NewPage(t, readmeWidth, 900)
		if got := readabilityProblems(t, p, good.Bytes(), readmeWidth); len(got) != 0 {
			t.Fatalf("the fenced picture itself: %v", got)
		}
		got := readabilityProblems(t, p, overprinted, readmeWidth)
		withName := false
		for _, g := range got {
			if !strings.HasPrefix(g, "overlap") || !strings.Contains(g, "stale_topology_cache") {
				t.Errorf("overprinted label: %s, want only the overprinted label's overlaps", g)
			}
			withName = withName || strings.Contains(g, `"worker A"`)
		}
		if !withName {
			t.Errorf("overprinted label: %v, want its overlap with the lane name worker A", got)
		}
		got = readabilityProblems(t, p, wide.Bytes(), readmeWidth)
		small := 0
		for _, g := range got {
			if strings.HasPrefix(g, "under 10 px") {
				small++
			}
		}
		if small < 10 || small != len(got) {
			t.Errorf("picture laid out for 1600 px shown at 800: %d texts under 10 px of %d problems, want every text: %v", small, len(got), got)
		}
	})
}

// laneNameY is the y of the first lane's name ("worker A") in a picture.
func laneNameY(t *testing.T, svg []byte) string {
	t.Helper()
	i := bytes.Index(svg, []byte(`>worker A</text>`))
	if i < 0 {
		t.Fatal("no lane worker A in the picture")
	}
	j := bytes.LastIndex(svg[:i], []byte(`y="`))
	k := bytes.IndexByte(svg[j+3:], '"')
	return string(svg[j+3 : j+3+k])
}

// TestWorldDecisionsAreExplained: a decision of the world's commander is a
// numbered step in its own lane, with what was decided and why.
func TestWorldDecisionsAreExplained(t *testing.T) {
	tr := &drill.Trajectory{Design: drill.Fenced, Original: "aurora-use1", FinalWriter: "aurora-use1", FinalTraffic: "aurora-use1",
		Events: []drill.Event{{At: time.Second, Kind: "decision", Actor: "incident-commander", Operation: "promote/x", Effect: "reject", Value: "loss_bound", Detail: "lag 9s past the bound"}}}
	var b bytes.Buffer
	if err := tr.SVG(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">commander</text>", "commander decides: reject promote/x (loss_bound): lag 9s past the bound", "the world&#39;s commander or traffic policy decides"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("the picture lacks %q", want)
		}
	}
}
