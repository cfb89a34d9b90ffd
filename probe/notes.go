package probe

import (
	"fmt"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/analysis"
)

// The probe's notes are phrased like analysis's verdict: rates by
// analysis.Pct, lists of counts by analysis.JoinCounts.

func pct(r float64) string { return analysis.Pct(r) }

func joinInts(ns []int) string { return analysis.JoinCounts(ns) }

func joinClauses(c []string) string { return strings.Join(c, "; ") }

func times(k, counts int) string {
	s := fmt.Sprintf("%d more times", k)
	switch k {
	case 1:
		s = "once more"
	case 2:
		s = "twice more"
	}
	if counts > 1 {
		s += " each"
	}
	return s
}
