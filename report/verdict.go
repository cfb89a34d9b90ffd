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

func verdictFigures(d result.DesignVerdict) string {
	num := func(n int) string {
		if n == 0 {
			return "none"
		}
		return fmt.Sprint(n)
	}
	s := []string{"capacity " + num(d.Capacity), "first failure " + num(d.FirstFail), "highest tested " + num(d.Highest),
		"max connected " + num(d.MaxConnected)}
	if d.MaxSustainable >= 0 {
		s = append(s, "max sustainable "+num(d.MaxSustainable))
	}
	nm := "none"
	if len(d.NonMonotonic) > 0 {
		nm = joinInts(d.NonMonotonic)
	}
	s = append(s, "non-monotonic "+nm)
	if d.Limit != "" {
		s = append(s, fmt.Sprintf("limiting factor %s at %d", d.Limit, d.LimitAt))
	} else {
		s = append(s, "limiting factor none")
	}
	s = append(s, "hard limit from "+num(d.Wall), "MAX_CLIENTS conservative "+num(d.Conservative)+", practical "+num(d.Practical))
	return strings.Join(s, "; ")
}
