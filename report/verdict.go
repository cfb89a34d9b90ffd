package report

import (
	"fmt"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// VerdictLines state a run's verdict (analysis.Conclude) in the same
// words in every view: a line per design, then the point cut short and
// the --require outcome when there are any.
func VerdictLines(v result.Verdict) []string {
	var out []string
	for _, d := range v.Designs {
		of := ""
		if d.Design != "" {
			of = " (" + d.Design + ")"
		}
		out = append(out, fmt.Sprintf("Verdict%s at the %s threshold: %s.", of, Pct(v.Threshold), verdictFigures(d)))
	}
	if v.Interrupted > 0 {
		of := ""
		if v.InterruptedDesign != "" {
			of = " of " + v.InterruptedDesign
		}
		out = append(out, fmt.Sprintf("Interrupted point%s: %d clients, counted nowhere.", of, v.Interrupted))
	}
	if r := v.Require; r != nil {
		met := "met"
		if !r.Met {
			met = "not met"
		}
		out = append(out, fmt.Sprintf("Requirement %d clients by %s: %s.", r.Clients, r.Criterion, met))
	}
	return out
}

// verdictFigures are a design's figures, leaving out those it has none
// of (no failure, no wall, no recommendation…): capacity, highest tested
// and max connected are always said, as 0 when nothing passed.
func verdictFigures(d result.DesignVerdict) string {
	s := []string{"capacity " + fmt.Sprint(d.Capacity)}
	if d.FirstFail > 0 {
		s = append(s, "first failure "+fmt.Sprint(d.FirstFail))
	}
	s = append(s, "highest tested "+fmt.Sprint(d.Highest), "max connected "+fmt.Sprint(d.MaxConnected))
	if d.MaxSustainable >= 0 {
		ms := "max sustainable " + fmt.Sprint(d.MaxSustainable)
		if d.SLOCause != "" {
			ms += fmt.Sprintf(" (%d missed the SLOs; why: %s)", d.SLOMissedAt, d.SLOCause)
		}
		s = append(s, ms)
	}
	if b := d.Bend; b != nil {
		s = append(s, PerformantText(*b))
	}
	if len(d.NonMonotonic) > 0 {
		s = append(s, "non-monotonic "+joinInts(d.NonMonotonic))
	}
	if d.Limit != "" {
		s = append(s, fmt.Sprintf("limiting factor %s at %d", d.Limit, d.LimitAt))
	}
	if d.Wall > 0 {
		s = append(s, "hard limit from "+fmt.Sprint(d.Wall))
	}
	if d.Conservative > 0 || d.Practical > 0 {
		s = append(s, fmt.Sprintf("MAX_CLIENTS conservative %d, practical %d", d.Conservative, d.Practical))
	}
	return strings.Join(s, "; ")
}

// PerformantText is a design's performant-client count (result.Bend)
// in a few words: "performant 60 (>= 50% of the peak 45600 msg/s at
// 60; 120 fell to 5100)".
func PerformantText(b result.Bend) string {
	fell := "; no count fell below it"
	if b.BendAt > 0 {
		fell = fmt.Sprintf("; %d fell to %.0f", b.BendAt, b.BendRate)
	}
	s := fmt.Sprintf("performant %d (>= %s of the peak %.0f msg/s at %d%s)", b.Performant, Pct(1-b.Epsilon), b.Peak, b.PeakAt, fell)
	if b.Cause != "" {
		s += "; why it bent: " + b.Cause
	}
	return s
}
