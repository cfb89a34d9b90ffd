package report

import (
	"fmt"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// RequireLine is how search and ramp end on the --require outcome of
// run's verdict: "requirement met: ..." or, with the counts each design
// held, "requirement not met: ..."; "" for a run without --require.
func RequireLine(run *result.Run) (line string, met bool) {
	v := run.Verdict
	if v == nil {
		c := analysis.Conclude(run)
		v = &c
	}
	r := v.Require
	if r == nil {
		return "", true
	}
	every := ""
	if run.DesignModes() != nil {
		// Each design is required to hold N on its own.
		every = " in every design"
	}
	if r.Met {
		return fmt.Sprintf("requirement met: %d clients by %s%s", r.Clients, r.Criterion, every), true
	}
	what := "max connected"
	if r.Criterion == result.CriterionTraffic {
		what = "max sustainable (--slo " + run.Config.SLO + ")"
	}
	var held []string
	for _, d := range v.Designs {
		switch got := d.HeldBy(r.Criterion); {
		case every == "":
			held = append(held, fmt.Sprint(got))
		case got < r.Clients:
			held = append(held, fmt.Sprintf("%s %d", d.Design, got))
		}
	}
	return fmt.Sprintf("requirement not met: %d clients by %s%s; %s among the counts tested: %s",
		r.Clients, r.Criterion, every, what, strings.Join(held, ", ")), false
}
