package report

import (
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium runs Debian's headless Chromium on file with extra args and
// returns stdout and stderr. Skips when it is missing (make setup and CI
// install it).
func chromium(t *testing.T, file string, args ...string) (string, string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (make setup installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--user-data-dir=" + filepath.Join(home, "profile"),
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

	shot := filepath.Join(dir, "shot.png")
	chromium(t, page, "--hide-scrollbars", "--window-size=900,2400", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
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
