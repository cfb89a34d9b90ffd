package report

import (
	"regexp"
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
