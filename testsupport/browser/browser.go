// Package browser drives a real headless Chromium (Debian's chromium
// package) from Go tests through the Chrome DevTools protocol
// (github.com/chromedp/chromedp), to check what a person sees: load a page,
// an HTML string or an SVG at a given width, read the box of every piece of
// text the browser rendered, report text that overlaps other text or
// renders smaller than a size, and keep a screenshot.
//
//	b := browser.Start(t)                  // skips (or fails in CI) without Chromium
//	p := b.NewPage(t, 800, 600)
//	p.LoadSVG(t, svg, 800)                 // the SVG scaled to 800 CSS px wide
//	boxes := p.TextBoxes(t)
//	for _, o := range browser.Overlapping(boxes) { t.Errorf("%v", o) }
//	for _, s := range browser.SmallerThan(boxes, 10) { t.Errorf("%v", s) }
//	p.Screenshot(t, "incident")            // a PNG in ArtifactDir(t)
//
// Without Chromium a test that calls Start is skipped with a line naming
// `make browser`, which installs it (root, apt-get); with
// LEASEGATE_REQUIRE_BROWSER set (CI sets it) it fails instead. The
// executable is the first of $LEASEGATE_CHROMIUM, chromium,
// chromium-browser, google-chrome on PATH.
//
// Screenshots go to $LEASEGATE_ARTIFACTS/browser/<test name>/ when that is
// set (.ci/run sets it to artifacts/ in the clone), else to the test's
// temporary directory, which is removed when the test ends (the path is
// logged; set LEASEGATE_ARTIFACTS to keep them).
//
// Chromium runs as root here, so with --no-sandbox; each Browser has its
// own profile directory. Options pass more: WithFlag adds a Chromium
// command-line flag, WithEnv sets its environment (HOME decides which NSS
// database, $HOME/.pki/nssdb, holds client certificates), WithUserDataDir
// picks the profile.
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Environment variables the package reads.
const (
	// RequireEnv, when set to anything but "" or "0", makes a missing
	// Chromium a failure instead of a skip.
	RequireEnv = "LEASEGATE_REQUIRE_BROWSER"
	// ArtifactsEnv names the directory screenshots are kept in.
	ArtifactsEnv = "LEASEGATE_ARTIFACTS"
	// ExecEnv names the Chromium executable to use.
	ExecEnv = "LEASEGATE_CHROMIUM"
)

// ExecPath returns the Chromium executable, or "" when there is none.
func ExecPath() string {
	if p := os.Getenv(ExecEnv); p != "" {
		if abs, err := exec.LookPath(p); err == nil {
			return abs
		}
		return ""
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func required() bool {
	v := os.Getenv(RequireEnv)
	return v != "" && v != "0"
}

// Option configures Start.
type Option func(*config)

type config struct {
	flags   map[string]any
	order   []string
	env     []string
	dataDir string
}

// WithFlag adds a Chromium command-line flag (name without the leading
// dashes; value true for a bare flag, or a string), e.g.
// WithFlag("ignore-certificate-errors", true).
func WithFlag(name string, value any) Option {
	return func(c *config) {
		if _, ok := c.flags[name]; !ok {
			c.order = append(c.order, name)
		}
		c.flags[name] = value
	}
}

// WithEnv sets variables ("NAME=value") in Chromium's environment, on top
// of the test's.
func WithEnv(vars ...string) Option {
	return func(c *config) { c.env = append(c.env, vars...) }
}

// WithUserDataDir runs Chromium with this profile directory instead of a
// fresh one in the test's temporary directory.
func WithUserDataDir(dir string) Option {
	return func(c *config) { c.dataDir = dir }
}

// Browser is one running Chromium, stopped when the test ends.
type Browser struct {
	alloc context.Context
	ctx   context.Context // the first tab's, which owns the browser process
}

// Start starts a headless Chromium for the test, stopped at its cleanup.
// Without Chromium it skips the test (fails when LEASEGATE_REQUIRE_BROWSER
// is set).
func Start(t testing.TB, opts ...Option) *Browser {
	t.Helper()
	path := ExecPath()
	if path == "" {
		msg := "headless Chromium not found (chromium on PATH, or $" + ExecEnv + "): run make browser, which installs Debian's chromium"
		if required() {
			t.Fatal(msg + "; " + RequireEnv + " is set, so this fails instead of skipping")
		}
		t.Skip(msg)
	}
	c := &config{flags: map[string]any{}}
	for _, o := range opts {
		o(c)
	}
	if c.dataDir == "" {
		c.dataDir = t.TempDir()
	}
	ao := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI and here
		chromedp.DisableGPU,
		chromedp.UserDataDir(c.dataDir),
		chromedp.Flag("font-render-hinting", "none"),
	)
	for _, name := range c.order {
		ao = append(ao, chromedp.Flag(name, c.flags[name]))
	}
	if len(c.env) > 0 {
		ao = append(ao, chromedp.Env(c.env...))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), ao...)
	ctx, cancel := chromedp.NewContext(alloc)
	// The first action starts the browser, which lives as long as the
	// context of that action. One Chromium starts at a time on the
	// machine (go test runs package binaries in parallel, and a start
	// takes seconds of CPU): the starts queue on a lock file.
	unlock := startLock(t)
	err := firstRun(ctx)
	unlock()
	if err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("browser: starting %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return &Browser{alloc: alloc, ctx: ctx}
}

// StartTimeout bounds starting Chromium or opening a tab: generous, for a
// loaded 2-core machine (a start measured 9-60 s at load average 30-60).
const StartTimeout = 3 * time.Minute

// startLock takes the machine-wide lock that queues Chromium starts,
// $TMPDIR/leasegate-browser-start.lock, and returns its release.
func startLock(t testing.TB) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "leasegate-browser-start.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Logf("browser: no start lock (%v): starting unqueued", err)
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Logf("browser: no start lock (%v): starting unqueued", err)
		return func() {}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

// firstRun runs no action on a fresh chromedp context, which starts its
// browser or opens its tab, bounded by StartTimeout without putting a
// deadline on the context itself (that would end the browser or tab).
func firstRun(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(StartTimeout):
		_ = chromedp.Cancel(ctx)
		return fmt.Errorf("not done within %v", StartTimeout)
	}
}

// Page is one tab.
type Page struct {
	ctx  context.Context
	name string
}

// NewPage opens a tab with a viewport of width × height CSS pixels (device
// scale 1), closed when the test ends.
func (b *Browser) NewPage(t testing.TB, width, height int) *Page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	// The tab lives as long as the context of its first action: open it
	// on the page's own context, not on a bounded one.
	if err := firstRun(ctx); err != nil {
		t.Fatalf("browser: opening a tab: %v", err)
	}
	p := &Page{ctx: ctx, name: t.Name()}
	p.do(t, "set the viewport", chromedp.EmulateViewport(int64(width), int64(height)))
	return p
}

// Context is the tab's chromedp context, for actions this package does not
// wrap (chromedp.Run(p.Context(), chromedp.Click(...))).
func (p *Page) Context() context.Context { return p.ctx }

// Timeout bounds every action of a Page (generous: a loaded machine).
const Timeout = 2 * time.Minute

func (p *Page) do(t testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// Navigate loads a URL (http(s)://, file://) and waits for it to load.
func (p *Page) Navigate(t testing.TB, url string) {
	t.Helper()
	p.do(t, "navigate to "+url, chromedp.Navigate(url))
}

// LoadFile loads a file of the local file system.
func (p *Page) LoadFile(t testing.TB, path string) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	p.Navigate(t, "file://"+abs)
}

// SetContent replaces the page's document with this HTML.
func (p *Page) SetContent(t testing.TB, html string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "page.html")
	if err := os.WriteFile(file, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Navigate(t, "file://"+file)
}

var xmlDecl = regexp.MustCompile(`^\s*<\?xml[^>]*\?>`)

// LoadSVG shows an SVG document scaled to width CSS pixels, its height
// following its aspect ratio: what an <img src=... width=...> shows, with
// the SVG's text in the page's DOM so TextBoxes can read it.
func (p *Page) LoadSVG(t testing.TB, svg []byte, width int) {
	t.Helper()
	body := xmlDecl.ReplaceAllString(string(svg), "")
	html := fmt.Sprintf(`<!doctype html><html><head><meta charset="utf-8"><style>
html,body{margin:0;padding:0;background:white}
#picture{width:%dpx}
#picture>svg{display:block;width:%dpx;height:auto}
</style></head><body><div id="picture">%s</div></body></html>`, width, width, body)
	p.SetContent(t, html)
}

// TextBox is one run of rendered text: its characters, its box in CSS
// pixels of the page, and the size its font renders at (the computed font
// size times the scale its element is drawn at, as an SVG's viewBox
// scales it).
type TextBox struct {
	Text   string  `json:"text"`
	Tag    string  `json:"tag"`
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	W      float64 `json:"w"`
	H      float64 `json:"h"`
	FontPx float64 `json:"font_px"`
}

func (b TextBox) String() string {
	return fmt.Sprintf("%q <%s> at (%.1f,%.1f) %.1f×%.1f px, font %.1f px", b.Text, b.Tag, b.X, b.Y, b.W, b.H, b.FontPx)
}

// textBoxesJS collects every visible, non-blank text node's box: a Range
// around the node (its glyphs' box), the font size of its element scaled
// by the element's screen transform (for SVG). Text in <title>, <desc>,
// <style>, <script> and hidden elements is not rendered and not read.
const textBoxesJS = `(() => {
  const out = [];
  const skip = new Set(["TITLE","title","desc","DESC","STYLE","style","SCRIPT","script","NOSCRIPT","TEMPLATE"]);
  const w = document.createTreeWalker(document.body || document.documentElement, NodeFilter.SHOW_TEXT);
  for (let n = w.nextNode(); n; n = w.nextNode()) {
    const text = n.textContent.replace(/\s+/g, " ").trim();
    if (!text) continue;
    const el = n.parentElement;
    if (!el) continue;
    let hidden = false;
    for (let a = el; a; a = a.parentElement) { if (skip.has(a.tagName)) { hidden = true; break; } }
    if (hidden) continue;
    if (el.checkVisibility && !el.checkVisibility({opacityProperty: true, visibilityProperty: true})) continue;
    const r = document.createRange();
    r.selectNodeContents(n);
    const b = r.getBoundingClientRect();
    if (b.width <= 0 || b.height <= 0) continue;
    let scale = 1;
    if (el instanceof SVGGraphicsElement && el.getScreenCTM) {
      const m = el.getScreenCTM();
      if (m) scale = Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
    }
    const fs = parseFloat(getComputedStyle(el).fontSize) || 0;
    out.push({text, tag: el.tagName, x: b.left + window.scrollX, y: b.top + window.scrollY, w: b.width, h: b.height, font_px: fs * scale});
  }
  return out;
})()`

// TextBoxes reads the box of every piece of text the page renders.
func (p *Page) TextBoxes(t testing.TB) []TextBox {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, Timeout)
	defer cancel()
	boxes, err := chromedp.Run(ctx, chromedp.Evaluate[[]TextBox](textBoxesJS))
	if err != nil {
		t.Fatalf("browser: reading the text boxes: %v", err)
	}
	return boxes
}

// Overlap is two text boxes whose areas intersect.
type Overlap struct{ A, B TextBox }

func (o Overlap) String() string { return fmt.Sprintf("%v overlaps %v", o.A, o.B) }

// Tolerance is how far (CSS px) two boxes may intersect, on both axes,
// before they count as overlapping: rounding of glyph extents, not ink.
const Tolerance = 0.5

// Overlapping returns every pair of boxes that intersect by more than
// Tolerance on both axes.
func Overlapping(boxes []TextBox) []Overlap {
	var out []Overlap
	for i := range boxes {
		a := boxes[i]
		for j := i + 1; j < len(boxes); j++ {
			b := boxes[j]
			dx := min(a.X+a.W, b.X+b.W) - max(a.X, b.X)
			dy := min(a.Y+a.H, b.Y+b.H) - max(a.Y, b.Y)
			if dx > Tolerance && dy > Tolerance {
				out = append(out, Overlap{a, b})
			}
		}
	}
	return out
}

// SmallerThan returns the boxes whose font renders under px CSS pixels.
func SmallerThan(boxes []TextBox, px float64) []TextBox {
	var out []TextBox
	for _, b := range boxes {
		if b.FontPx < px {
			out = append(out, b)
		}
	}
	return out
}

// ArtifactDir is where the test's screenshots go:
// $LEASEGATE_ARTIFACTS/browser/<test name> when set, else a temporary
// directory of the test.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	root := os.Getenv(ArtifactsEnv)
	if root == "" {
		return t.TempDir()
	}
	dir := filepath.Join(root, "browser", safeName(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("browser: artifacts directory: %v", err)
	}
	return dir
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string { return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_") }

// Screenshot writes a PNG of the whole page (beyond the viewport) to
// ArtifactDir(t)/name.png and returns its path.
func (p *Page) Screenshot(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot: %v", err)
	}
	file := filepath.Join(ArtifactDir(t), safeName(name)+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("browser: screenshot %s", file)
	return file
}
