package analysis

import "github.com/rdmaprobe/rdmaprobe/result"

// Capacity is the largest tested client count that passed by criterion
// (result.CriterionConnect or CriterionTraffic) with every smaller
// tested count passing too, 0 if the smallest failed. By
// CriterionTraffic a count passes when it connected at the threshold and
// its traffic phase met the run's SLOs (and completed); a count without
// a traffic phase fails it. This is how a run answers "max connected"
// and "max sustainable" among the counts it tested, whichever criterion
// its search followed, and what --require checks.
func Capacity(points []result.Point, threshold float64, criterion string) int {
	judged := make([]result.Point, len(points))
	for i, p := range points {
		judged[i] = p
		if criterion == result.CriterionTraffic {
			t := result.Traffic{Judged: true}
			if p.Traffic != nil {
				t = *p.Traffic
				t.Judged = true
			}
			judged[i].Traffic = &t
		} else if p.Traffic != nil {
			t := *p.Traffic
			t.Judged = false
			judged[i].Traffic = &t
		}
	}
	capacity := 0
	for _, c := range Pool(judged, threshold) {
		if !c.Passed {
			break
		}
		capacity = c.Clients
	}
	return capacity
}
