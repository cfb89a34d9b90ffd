package probe

import (
	"sort"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// failureKey names a failed client's class and errno, and whether it is
// a resource's refusal (result.WallRefusal).
func failureKey(class, errno string) (key string, wall bool) {
	wall = result.WallRefusal(class, errno)
	if errno == "" || class == result.OutcomeRefused || class == result.OutcomeTimeout {
		return class, wall
	}
	return class + " " + errno, wall
}

// evidence is what the points at one failing count say about why it
// failed.
type evidence struct {
	// wall: every failed client of every trial was refused by a resource,
	// and no point itself failed.
	wall bool
	// held is the fewest clients connected at once over the trials: the
	// clients stay connected until the point ends, so the server held
	// them together.
	held int
	// cause lists the failures by kind, most first ("8,179 qp-create
	// ENOMEM"), with the limit the diagnosis named.
	cause string
	// why is, when not a wall, what makes the failures ambiguous.
	why string
}

// readEvidence reads the failures of the trials at one count.
func readEvidence(points []result.Point) evidence {
	if len(points) == 0 {
		return evidence{why: "no points"}
	}
	kinds := map[string]int{}
	walls := map[string]bool{}
	var limit string
	e := evidence{held: -1}
	for _, pt := range points {
		if pt.Error != "" {
			return evidence{why: "the point itself failed (" + pt.Error + ")"}
		}
		if pt.Traffic.Failed() {
			// Its clients held; their traffic did not meet the SLOs,
			// which depends on the load, not on a limit.
			return evidence{why: "its traffic phase missed the SLOs (" + missed(pt.Traffic) + ")"}
		}
		if e.held < 0 || pt.Connected < e.held {
			e.held = pt.Connected
		}
		if d := pt.Diagnosis; d != nil && d.Limit != "" && d.Limit != "unknown" && limit == "" {
			limit = d.Limit
		}
		if len(pt.Records) == 0 {
			// A run kept without its records: only the classes are left,
			// and of those only a refusal says which limit it was.
			for class, n := range pt.Outcomes {
				if class == result.OutcomeOK || class == result.OutcomeUnlaunched || n == 0 {
					continue
				}
				k, _ := failureKey(class, "")
				kinds[k] += n
				walls[k] = class == result.OutcomeRefused
			}
			continue
		}
		for _, r := range pt.Records {
			if r.Outcome == result.OutcomeOK {
				continue
			}
			k, w := failureKey(r.Outcome, r.Errno)
			kinds[k]++
			walls[k] = w
		}
	}
	if len(kinds) == 0 {
		return evidence{why: "its failed clients left no outcome to read"}
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if kinds[keys[i]] != kinds[keys[j]] {
			return kinds[keys[i]] > kinds[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var all, ambiguous []string
	for _, k := range keys {
		s := analysis.Thousands(kinds[k]) + " " + k
		all = append(all, s)
		if !walls[k] {
			ambiguous = append(ambiguous, s)
		}
	}
	e.cause = strings.Join(all, ", ")
	if limit != "" {
		e.cause += "; " + limit
	}
	switch {
	case len(ambiguous) == len(all):
		e.why = "its failures (" + e.cause + ") are not a resource's refusal"
	case len(ambiguous) > 0:
		e.why = "its failures are mixed (" + e.cause + ")"
	default:
		e.wall = true
	}
	return e
}

// missed lists a traffic phase's failed objectives, or its error.
func missed(t *result.Traffic) string {
	if t.Error != "" {
		return t.Error
	}
	var out []string
	for _, v := range t.SLO {
		if !v.Passed {
			out = append(out, v.Text)
		}
	}
	return strings.Join(out, ", ")
}
