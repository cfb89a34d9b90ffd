package analysis

import (
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// HardLimit says whether a diagnosis (result.Diagnosis.Limit) names a
// hard limit: a device cap, --max-clients, a map, file or locked-memory
// limit, the listen queue. Such a limit refuses the same client at any
// load, so no advice may reach past the count where it first did.
func HardLimit(limit string) bool {
	switch limit {
	case "max-clients", "vm.max_map_count", "rlimit-nofile", "memlock", "listen-backlog":
		return true
	}
	return strings.HasPrefix(limit, "device-cap:")
}

// Wall is the smallest tested client count at which a hard limit refused
// a client, 0 if none did: a client refused at capacity or by a
// resource's errno (result.WallRefusal), or a point whose diagnosis
// names a hard limit (HardLimit). A run saved without records is read
// by its outcome classes.
func Wall(points []result.Point) (n int, limit string) {
	for _, p := range points {
		if n > 0 && p.Clients >= n || !refusedByLimit(p) {
			continue
		}
		n, limit = p.Clients, ""
		if d := p.Diagnosis; d != nil && HardLimit(d.Limit) {
			limit = d.Limit
		}
	}
	return n, limit
}

func refusedByLimit(p result.Point) bool {
	if d := p.Diagnosis; d != nil && HardLimit(d.Limit) {
		return true
	}
	if len(p.Records) == 0 {
		return p.Outcomes[result.OutcomeRefused] > 0
	}
	for _, r := range p.Records {
		if r.Outcome != result.OutcomeOK && result.WallRefusal(r.Outcome, r.Errno) {
			return true
		}
	}
	return false
}
