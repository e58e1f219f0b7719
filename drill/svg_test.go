package drill_test

import (
	"bytes"
	"encoding/xml"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// svgEvents parses an SVG timeline and returns the title of every event
// marker by its data-index, and the texts of the violations it lists.
func svgEvents(t *testing.T, svg []byte) (map[int]string, []string, int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	events := map[int]string{}
	var violations []string
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
			case el.Name.Local == "text" && attr["class"] == "violation":
				inViolation = true
			case el.Name.Local == "line" && attr["stroke"] == "#e53935":
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
