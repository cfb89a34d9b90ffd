package analysis

import (
	"sort"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// maxErrorTexts bounds the distinct error texts kept per point.
const maxErrorTexts = 20

// SummarisePoint fills a point's counts, outcome classes, error texts, phase and
// RTT percentiles, success rate and confidence interval from its records
// and its unlaunched clients.
func SummarisePoint(pt *result.Point, threshold float64) {
	pt.Attempted = len(pt.Records) + pt.Unlaunched
	pt.Connected = 0
	pt.TLSResumed = 0
	pt.Outcomes = map[string]int{}
	errs := map[string]int{}
	phases := map[string][]float64{}
	var connect, rtt []float64
	type qp struct {
		proc int
		qpn  uint32
	}
	qps := map[qp]bool{}
	for _, r := range pt.Records {
		pt.Outcomes[r.Outcome]++
		if r.TLSResumed {
			pt.TLSResumed++
		}
		if r.Outcome == result.OutcomeOK {
			pt.Connected++
			if r.Logical != 0 {
				qps[qp{r.Proc, r.LocalQPN}] = true
			}
			connect = append(connect, float64(r.ConnectUS)/1e3)
		} else if r.Error != "" {
			errs[r.Error]++
		}
		for name, us := range r.PhasesUS {
			phases[name] = append(phases[name], float64(us)/1e3)
		}
		rtt = append(rtt, r.RTTsUS...)
	}
	if pt.Unlaunched > 0 {
		pt.Outcomes[result.OutcomeUnlaunched] = pt.Unlaunched
	}
	pt.QPs = len(qps)
	pt.Errors = topErrors(errs, maxErrorTexts)
	pt.Phases = map[string]result.Percentiles{}
	for name, s := range phases {
		pt.Phases[name] = Percentiles(s)
	}
	pt.Connect = Percentiles(connect)
	pt.RTT = Percentiles(rtt)
	Judge(pt, threshold)
}

func topErrors(m map[string]int, k int) map[string]int {
	if len(m) <= k {
		if len(m) == 0 {
			return nil
		}
		return m
	}
	type kv struct {
		s string
		n int
	}
	var all []kv
	for s, n := range m {
		all = append(all, kv{s, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].s < all[j].s
	})
	out := map[string]int{}
	for _, e := range all[:k] {
		out[e.s] = e.n
	}
	return out
}
