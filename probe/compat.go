package probe

import "github.com/rdmaprobe/rdmaprobe/analysis"

// Z95 and Wilson moved to package analysis. They stay here only because
// app/probe.go still passes probe.Wilson to report.Terminal; delete them
// when the session package (issue 17) stops calling them.
const Z95 = analysis.Z95

// Wilson is analysis.Wilson.
func Wilson(successes, n int, z float64) (lo, hi float64) { return analysis.Wilson(successes, n, z) }
