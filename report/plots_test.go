package report

import (
	"regexp"
	"strings"
	"testing"
)

// Issue 21.4: in per-client mode the CQ and MR lines of the resources
// plot coincide. Each line gets its own dash pattern and marker, and the
// legend says which one it lies on.
func TestCoincidingSeriesStayVisible(t *testing.T) {
	run := load(t, "sim-search")
	m := NewModel(run)
	var svg string
	for _, p := range Figures(run, m) {
		if p.Name == "resources" {
			svg = string(p.SVG)
		}
	}
	if svg == "" {
		t.Fatal("no resources plot")
	}
	if !regexp.MustCompile(`>MRs \(= CQs\)</text>`).MatchString(svg) {
		t.Error("the legend does not say the MR line lies on the CQ line")
	}
	dashes := map[string]bool{}
	for _, d := range regexp.MustCompile(`stroke-dasharray:([0-9.,]+)`).FindAllStringSubmatch(svg, -1) {
		dashes[d[1]] = true
	}
	if len(dashes) < 2 {
		t.Errorf("dash patterns %v: the CQ and MR lines are drawn alike", dashes)
	}
}

func TestLegendLabel(t *testing.T) {
	a := Series{Label: "CQs", X: []float64{1, 2}, Y: []float64{2, 4}}
	for _, tc := range []struct {
		name   string
		series []Series
		want   string
	}{
		{"alone", []Series{a}, "CQs"},
		{"equal", []Series{a, {Label: "MRs", X: []float64{1, 2}, Y: []float64{2, 4}}}, "MRs (= CQs)"},
		{"differs in one y", []Series{a, {Label: "MRs", X: []float64{1, 2}, Y: []float64{2, 5}}}, "MRs"},
		{"shorter", []Series{a, {Label: "MRs", X: []float64{1}, Y: []float64{2}}}, "MRs"},
		{"both empty", []Series{{Label: "CQs"}, {Label: "MRs"}}, "MRs"},
	} {
		if got := legendLabel(tc.series, len(tc.series)-1); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A log axis cannot draw 0 (a run.json edited by hand, a phase whose
// latencies read 0): those points are left out, and a plot with none
// left says so instead of stopping the report.
func TestLogPlotLeavesOutZero(t *testing.T) {
	p := logLinePlot("latency", "t", "x", "y", []Series{{Label: "p50", X: []float64{1, 2}, Y: []float64{0, 40}}})
	if p.Empty != "" || len(p.SVG) == 0 {
		t.Errorf("one positive point: empty %q, %d bytes of SVG", p.Empty, len(p.SVG))
	}
	p = logLinePlot("latency", "t", "x", "y", []Series{{Label: "p50", X: []float64{1}, Y: []float64{0}}})
	if p.Empty != "no value above 0 to draw on a log scale" {
		t.Errorf("only zero: empty %q", p.Empty)
	}
}

// A label draws every character it holds that the font has: "×" and
// "#" came out as "?" before.
func TestPlotLabelsKeepTheirCharacters(t *testing.T) {
	series := []Series{{Label: "MB/s ×1000", X: []float64{1, 2}, Y: []float64{1, 2}},
		{Label: "per-client #2 ≥ 3", X: []float64{1, 2}, Y: []float64{2, 3}}}
	svg := string(linePlot("l", "t", "x", "y", series).SVG)
	for _, want := range []string{">MB/s ×1000</text>", ">per-client #2 ≥ 3</text>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	if got := safeLabel("a\x01b"); got != "a?b" {
		t.Errorf("safeLabel(a\\x01b) = %q, want a?b", got)
	}
}

// The success plot has a tick at 100, even when every point is lower.
func TestSuccessPlotTicksAt100(t *testing.T) {
	for _, ys := range [][]float64{{40, 60}, {99, 100}} {
		svg := string(percentLinePlot("s", "t", "x", "success %", []Series{{X: []float64{1, 2}, Y: ys}}).SVG)
		if !regexp.MustCompile(`>100</text>`).MatchString(svg) {
			t.Errorf("success %v: no tick labelled 100", ys)
		}
	}
}
