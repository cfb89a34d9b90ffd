package report

import (
	"context"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

// chromium runs Debian's headless Chromium on file with extra args and
// returns stdout and stderr. Skips when it is missing (make setup and CI
// install it). Every run gets its own empty profile and the window size
// the layout probe and the screenshot share.
func chromium(t *testing.T, file string, args ...string) (string, string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		parts.Missing(t, "chromium not installed (make setup installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--user-data-dir=" + filepath.Join(home, "profile"),
		"--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=1000,3000",
		"--enable-logging=stderr", "--v=0"}, append(args, "file://"+file)...)...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// The HTML report opens in a real browser: its tables and every plot are
// in the rendered DOM, the page logs no console message and loads
// nothing, and the screenshot is not blank.
func TestHTMLRendersInChromium(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteAll(load(t, "sim-search"), dir, []string{"html"}); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	dom, logs := chromium(t, page, "--dump-dom")
	for _, id := range []string{`id="success-table"`, `id="steps"`, `id="answer"`, `id="limit"`} {
		if !strings.Contains(dom, id) {
			t.Errorf("rendered DOM lacks %s", id)
		}
	}
	figs := regexp.MustCompile(`(?s)<figure class="fig" data-plot="([a-z]+)">(.*?)</figure>`).FindAllStringSubmatch(dom, -1)
	want := map[string]bool{"success": true, "connect": true, "resources": true, "cpu": true, "memory": true}
	for _, f := range figs {
		if !strings.Contains(f[2], "<svg") || strings.Count(f[2], "<path") < 3 {
			t.Errorf("plot %s did not render as SVG with paths", f[1])
		}
		delete(want, f[1])
	}
	if len(want) != 0 {
		t.Errorf("plots missing from the page: %v", want)
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "CONSOLE") || strings.Contains(l, "Uncaught") || strings.Contains(l, "Failed to load resource") {
			t.Errorf("browser log: %s", l)
		}
	}

	img := screenshot(t, page)
	b := img.Bounds()
	inked := 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xe000 || g < 0xe000 || bl < 0xe000 {
				inked++
			}
		}
	}
	total := (b.Dx() / 2) * (b.Dy() / 2)
	if inked < total/50 {
		t.Errorf("screenshot nearly blank: %d of %d sampled pixels inked", inked, total)
	}
	t.Logf("screenshot %dx%d, %.1f%% inked", b.Dx(), b.Dy(), 100*float64(inked)/float64(total))
}

func screenshot(t *testing.T, page string) image.Image {
	t.Helper()
	shot := filepath.Join(t.TempDir(), "shot.png")
	chromium(t, page, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layoutProbe is appended to a copy of a report. It writes where Chromium
// laid out each status mark and each plot's texts and strokes into the
// DOM that --dump-dom prints, in page pixels. The reports themselves
// carry no script.
const layoutProbe = `<script>
(function () {
  const box = r => ({x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height});
  const out = {marks: [], figures: []};
  document.querySelectorAll('[data-mark]').forEach(m =>
    out.marks.push({kind: m.dataset.mark, box: box(m.getBoundingClientRect())}));
  document.querySelectorAll('figure[data-plot]').forEach(f => {
    const svg = f.querySelector('svg');
    if (!svg) return;
    const fig = {name: f.dataset.plot, svg: box(svg.getBoundingClientRect()), texts: [], points: []};
    svg.querySelectorAll('text').forEach(t => fig.texts.push({text: t.textContent, box: box(t.getBoundingClientRect())}));
    const whole = svg.viewBox.baseVal;
    svg.querySelectorAll('path').forEach(p => {
      const bb = p.getBBox();
      if (bb.width >= whole.width && bb.height >= whole.height) return; // the background
      const m = p.getScreenCTM(), n = p.getTotalLength();
      for (let l = 0; l <= n; l += 1.5) {
        const q = p.getPointAtLength(l).matrixTransform(m);
        fig.points.push([q.x + scrollX, q.y + scrollY]);
      }
    });
    out.figures.push(fig);
  });
  const pre = document.createElement('pre');
  pre.id = 'layout-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

type rect struct{ X, Y, W, H float64 }

func (r rect) contains(x, y, inset float64) bool {
	return x > r.X+inset && x < r.X+r.W-inset && y > r.Y+inset && y < r.Y+r.H-inset
}

type layout struct {
	Marks []struct {
		Kind string
		Box  rect
	}
	Figures []struct {
		Name  string
		SVG   rect
		Texts []struct {
			Text string
			Box  rect
		}
		Points [][2]float64
	}
}

// probeLayout renders run's HTML report with layoutProbe appended and
// returns the layout, the rendered DOM and the report's path.
func probeLayout(t *testing.T, fixture string) (layout, string, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := WriteAll(load(t, fixture), dir, []string{"html"}); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	probed := filepath.Join(dir, "probed.html")
	if err := os.WriteFile(probed, []byte(strings.Replace(string(html), "</body>", layoutProbe+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, _ := chromium(t, probed, "--dump-dom")
	m := regexp.MustCompile(`(?s)<pre id="layout-probe">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the layout probe did not run")
	}
	var l layout
	if err := json.Unmarshal([]byte(unescapeHTML(m[1])), &l); err != nil {
		t.Fatal(err)
	}
	return l, dom, probed
}

func unescapeHTML(s string) string {
	return strings.NewReplacer("&quot;", `"`, "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

// emoji matches the code points that need a colour-emoji font (the
// status marks ✅ ⚠️ ❌ and ↯ among them), which servers rarely have.
var emoji = regexp.MustCompile(`[\x{23E9}-\x{23FA}\x{2600}-\x{27BF}\x{1F000}-\x{1FAFF}\x{FE0F}\x{21AF}]`)

// Issue 21.4: the status marks are drawn without any font. The rendered
// DOM holds no emoji, every status cell holds a mark, and the screenshot
// shows each mark in its colour inside its box (an empty box, the
// fallback of a missing glyph, is grey outline on white).
func TestStatusMarksNeedNoFont(t *testing.T) {
	l, dom, page := probeLayout(t, "published")
	if e := emoji.FindAllString(dom, -1); len(e) > 0 {
		t.Errorf("rendered DOM holds %d emoji code points (first %q)", len(e), e[0])
	}
	kinds := map[string]int{}
	for _, m := range l.Marks {
		kinds[m.Kind]++
	}
	// published: 3 passed counts, 4 failed, 3 non-monotonic in the
	// table, and the answer's warning of the non-monotonic counts.
	for kind, n := range map[string]int{"pass": 3, "warning": 1, "fail": 4, "non-monotonic": 3} {
		if kinds[kind] < n {
			t.Errorf("%d %q marks on the page, want at least %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
	img := screenshot(t, page)
	for _, m := range l.Marks {
		b := m.Box
		if b.W < 8 || b.H < 8 {
			t.Errorf("%s mark is %.0fx%.0f px", m.Kind, b.W, b.H)
			continue
		}
		coloured, all := 0, 0
		for y := int(b.Y) + 1; y < int(b.Y+b.H); y++ {
			for x := int(b.X) + 1; x < int(b.X+b.W); x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				hi, lo := max(r, g, bl)>>8, min(r, g, bl)>>8
				if hi-lo > 80 {
					coloured++
				}
				all++
			}
		}
		if coloured*4 < all {
			t.Errorf("%s mark at (%.0f,%.0f): %d of %d pixels in colour, want a quarter", m.Kind, b.X, b.Y, coloured, all)
		}
	}
}

// Issue 21.4: every text of every plot lies inside the plot as Chromium
// lays it out (the last x tick label was cut: "600" read "60"), and no
// legend entry sits on the data or grid.
func TestPlotsFitInChromium(t *testing.T) {
	legends := map[string][]string{
		"connect":   {"p50", "p95", "p99"},
		"resources": {"QPs", "CQs", "MRs"},
		"cpu":       {"host CPU %", "server CPU % (per core)"},
		"memory":    {"server RSS MiB", "host memory used MiB"},
	}
	for _, fixture := range []string{"sim-search", "published"} {
		l, _, _ := probeLayout(t, fixture)
		if len(l.Figures) == 0 {
			t.Fatalf("%s: no plots", fixture)
		}
		for _, f := range l.Figures {
			for _, tx := range f.Texts {
				b := tx.Box
				if b.X < f.SVG.X-0.5 || b.Y < f.SVG.Y-0.5 || b.X+b.W > f.SVG.X+f.SVG.W+0.5 || b.Y+b.H > f.SVG.Y+f.SVG.H+0.5 {
					t.Errorf("%s %s: text %q at x %.1f–%.1f, y %.1f–%.1f leaves the plot (x %.1f–%.1f, y %.1f–%.1f)", fixture, f.Name, tx.Text,
						b.X, b.X+b.W, b.Y, b.Y+b.H, f.SVG.X, f.SVG.X+f.SVG.W, f.SVG.Y, f.SVG.Y+f.SVG.H)
				}
				for _, label := range legends[f.Name] {
					if !strings.HasPrefix(tx.Text, label) {
						continue
					}
					for _, p := range f.Points {
						if b.contains(p[0], p[1], 0.5) {
							t.Errorf("%s %s: legend entry %q is drawn over a line at (%.0f,%.0f)", fixture, f.Name, tx.Text, p[0], p[1])
							break
						}
					}
				}
			}
		}
	}
}

// tableProbe writes, for each table of a report, its width and its
// container's (the element it sits in), whether that container scrolls
// sideways, and the width of the page's content, into the DOM.
const tableProbe = `<script>
(function () {
  const out = {page: document.documentElement.clientWidth, tables: []};
  document.querySelectorAll('table').forEach(t => {
    const c = t.parentElement;
    out.tables.push({id: t.id || (t.closest('section') || {}).id || '', width: t.getBoundingClientRect().width,
      container: c.getBoundingClientRect().width, right: c.getBoundingClientRect().right,
      scrolls: getComputedStyle(c).overflowX === 'auto' || getComputedStyle(c).overflowX === 'scroll'});
  });
  const pre = document.createElement('pre');
  pre.id = 'table-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

// At a 1280 px window no table is wider than its container: the data
// path's figures (two tables, long SLO and CPU cells) fit the page's
// content, and every table sits in a container that scrolls
// sideways, so a narrower window scrolls it rather than cut its last
// columns, and no container reaches past the page.
func TestTablesFitInChromium(t *testing.T) {
	run := load(t, "sim-search")
	run.Config.Traffic = &result.TrafficSetup{DurationSec: 2, MaxDurationSec: 30, Op: "send", Depth: 1, MsgTimeoutSec: 30, BusyPollUS: 2000}
	run.Config.SLO = "p99<=2ms,errors=0"
	for i := range run.Points {
		p := &run.Points[i]
		p.Traffic = &result.Traffic{Op: "send", MsgBytes: 4096, Depth: 1, Clients: p.Connected, Messages: 123456, MsgRate: 61728.5, MBps: 252.84,
			DurationSec: 12.3, MinDurationSec: 2, Unmeasured: 1234, Latency: result.LatencyUS{P50: 17500, P90: 30000, P99: 123456, P999: 234567, Max: 3456789},
			PerClient: result.Spread{Min: 0, Median: 12345, Max: 23456}, ServerCPU: 1.97, ServerSpin: 0.36, GeneratorCPU: 0.98, GeneratorSpin: 0.12, GeneratorCores: 1,
			Errors: map[string]int64{"RETRY_EXC_ERR": 12, "timeout": 3},
			SLO: []slo.Verdict{{SLO: "p99<=2ms", Text: "p99 123ms > 2ms"}, {SLO: "errors=0", Text: "errors 15 > 0"},
				{SLO: "every client measured", Text: "not measured: 1234 of 12345 clients completed no message"}}}
	}
	dir := t.TempDir()
	if _, err := WriteAll(run, dir, []string{"html"}); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	probed := filepath.Join(dir, "probed.html")
	if err := os.WriteFile(probed, []byte(strings.Replace(string(html), "</body>", tableProbe+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, _ := chromium(t, probed, "--dump-dom", "--window-size=1280,3000")
	m := regexp.MustCompile(`(?s)<pre id="table-probe">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the table probe did not run")
	}
	var l struct {
		Page   float64
		Tables []struct {
			ID                      string
			Width, Container, Right float64
			Scrolls                 bool
		}
	}
	if err := json.Unmarshal([]byte(unescapeHTML(m[1])), &l); err != nil {
		t.Fatal(err)
	}
	traffic, cost := false, false
	for _, tb := range l.Tables {
		t.Logf("table %q: %.0f px in a container of %.0f px (scrolls %v)", tb.ID, tb.Width, tb.Container, tb.Scrolls)
		traffic = traffic || tb.ID == "traffic-table"
		cost = cost || tb.ID == "traffic-cost-table"
		if tb.Width > tb.Container+0.5 {
			t.Errorf("table %q is %.0f px wide in a container of %.0f px", tb.ID, tb.Width, tb.Container)
		}
		if !tb.Scrolls {
			t.Errorf("table %q is not in a container that scrolls sideways", tb.ID)
		}
		if tb.Right > l.Page+0.5 {
			t.Errorf("table %q's container ends at %.0f px, past the page's %.0f", tb.ID, tb.Right, l.Page)
		}
	}
	if !traffic || !cost || len(l.Tables) < 5 {
		t.Errorf("%d tables, the data path's among them: %v %v", len(l.Tables), traffic, cost)
	}
}
