package browser_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/leasegate/leasegate/testsupport/browser"
)

// A picture of three labels: two printed on one baseline, one apart.
const overprinted = `<svg xmlns="http://www.w3.org/2000/svg" width="400" height="100" viewBox="0 0 400 100" font-family="monospace" font-size="12">
<title>not rendered</title>
<text x="10" y="20">PROPOSED</text>
<text x="40" y="20">AUTHORIZED</text>
<text x="10" y="60">apart</text>
</svg>`

// TestInHeadlessChromium runs the checks that need a browser in one
// Chromium (each start costs seconds).
func TestInHeadlessChromium(t *testing.T) {
	b := browser.Start(t)
	t.Run("text boxes read rendered text and find overlap", func(t *testing.T) { textBoxesReadRenderedTextAndFindOverlap(t, b) })
	t.Run("smaller than measures text at the width shown", func(t *testing.T) { smallerThanMeasuresTextAtTheWidthShown(t, b) })
	t.Run("screenshot writes a PNG", func(t *testing.T) { screenshotWritesAPNG(t, b) })
}

func textBoxesReadRenderedTextAndFindOverlap(t *testing.T, b *browser.Browser) {
	p := b.NewPage(t, 400, 300)
	p.LoadSVG(t, []byte(overprinted), 400)
	boxes := p.TextBoxes(t)
	var texts []string
	for _, bx := range boxes {
		texts = append(texts, bx.Text)
		if bx.W <= 0 || bx.H <= 0 {
			t.Errorf("empty box %v", bx)
		}
		if bx.FontPx < 11.9 || bx.FontPx > 12.1 {
			t.Errorf("%v: font %.2f px at scale 1, want 12", bx, bx.FontPx)
		}
	}
	if got := strings.Join(texts, "|"); got != "PROPOSED|AUTHORIZED|apart" {
		t.Fatalf("text read %q, want the three rendered labels (the <title> is not rendered)", got)
	}
	o := browser.Overlapping(boxes)
	if len(o) != 1 || o[0].A.Text != "PROPOSED" || o[0].B.Text != "AUTHORIZED" {
		t.Fatalf("overlaps %v, want PROPOSED over AUTHORIZED alone", o)
	}
}

// An SVG drawn 1600 wide with 16 px text, shown 800 wide: its text renders
// at 8 px, which SmallerThan(10) reports; at 1600 it is 16 px.
func smallerThanMeasuresTextAtTheWidthShown(t *testing.T, b *browser.Browser) {
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="1600" height="100" viewBox="0 0 1600 100" font-family="monospace">
<text x="10" y="40" font-size="16">scaled down</text><text x="800" y="40" font-size="24">large</text></svg>`
	for _, c := range []struct {
		width int
		small []string
	}{{800, []string{"scaled down"}}, {1600, nil}} {
		p := b.NewPage(t, c.width, 300)
		p.LoadSVG(t, []byte(svg), c.width)
		small := browser.SmallerThan(p.TextBoxes(t), 10)
		var got []string
		for _, s := range small {
			got = append(got, s.Text)
		}
		if strings.Join(got, "|") != strings.Join(c.small, "|") {
			t.Errorf("at %d px: under 10 px %v, want %v", c.width, small, c.small)
		}
	}
}

func screenshotWritesAPNG(t *testing.T, b *browser.Browser) {
	t.Setenv(browser.ArtifactsEnv, t.TempDir())
	p := b.NewPage(t, 400, 300)
	p.SetContent(t, `<!doctype html><p style="font:14px sans-serif">hello</p>`)
	file := p.Screenshot(t, "hello page")
	if !strings.HasPrefix(file, os.Getenv(browser.ArtifactsEnv)) || !strings.HasSuffix(file, "hello_page.png") {
		t.Errorf("screenshot at %s, want under $%s named hello_page.png", file, browser.ArtifactsEnv)
	}
	png, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Errorf("screenshot is not a PNG of a page (%d bytes)", len(png))
	}
	boxes := p.TextBoxes(t)
	if len(boxes) != 1 || boxes[0].Text != "hello" || boxes[0].FontPx != 14 {
		t.Errorf("HTML text boxes %v, want hello at 14 px", boxes)
	}
}

func TestOverlappingIgnoresBoxesThatOnlyTouch(t *testing.T) {
	a := browser.TextBox{Text: "a", X: 0, Y: 0, W: 10, H: 10}
	touching := browser.TextBox{Text: "b", X: 10, Y: 0, W: 10, H: 10}
	grazing := browser.TextBox{Text: "c", X: 0, Y: 9.7, W: 10, H: 10}
	inside := browser.TextBox{Text: "d", X: 2, Y: 2, W: 3, H: 3}
	got := browser.Overlapping([]browser.TextBox{a, touching, grazing, inside})
	if len(got) != 1 || got[0].A.Text != "a" || got[0].B.Text != "d" {
		t.Errorf("overlaps %v, want a/d only", got)
	}
}

// TestStartWithoutChromium runs this package's test binary on
// TestStartHelper with no Chromium to be found: it skips naming make
// browser, and fails when LEASEGATE_REQUIRE_BROWSER is set.
func TestStartWithoutChromium(t *testing.T) {
	for _, c := range []struct {
		require string
		want    string
	}{{"", "--- SKIP: TestStartHelper"}, {"1", "--- FAIL: TestStartHelper"}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestStartHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "LEASEGATE_START_HELPER=1", browser.ExecEnv+"=/nonexistent/chromium", browser.RequireEnv+"="+c.require)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "make browser") {
			t.Errorf("%s=%q: want %q naming make browser, got:\n%s", browser.RequireEnv, c.require, c.want, out)
		}
	}
}

func TestStartHelper(t *testing.T) {
	if os.Getenv("LEASEGATE_START_HELPER") == "" {
		t.Skip("run by TestStartWithoutChromium")
	}
	browser.Start(t)
	t.Log("started a browser")
}
