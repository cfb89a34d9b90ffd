package softroce

import (
	"strconv"
	"strings"
)

// ParseDevinfoCaps extracts the integer "key: value" lines of
// `ibv_devinfo -v` (max_qp, max_cq, max_mr, ...). Hex and non-numeric
// values are skipped; the first occurrence of a key wins, which keeps the
// device-level figures over later per-port ones of the same name.
func ParseDevinfoCaps(out string) map[string]int64 {
	caps := map[string]int64{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || strings.ContainsAny(k, " \t") || k == "" {
			continue
		}
		v = strings.TrimSpace(v)
		if f := strings.Fields(v); len(f) > 0 {
			v = f[0]
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		if _, seen := caps[k]; !seen {
			caps[k] = n
		}
	}
	return caps
}

func parseMeminfo(s string) (total, avail uint64) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			avail = v
		}
	}
	return total, avail
}
