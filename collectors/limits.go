package collectors

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// ReadLimits reads the limits in force for process pid (0: this
// process) and the system-wide ones that bound capacity. A limit that
// cannot be read stays 0.
func ReadLimits(pid int) result.Limits {
	var l result.Limits
	path := "/proc/self/limits"
	if pid > 0 {
		path = fmt.Sprintf("/proc/%d/limits", pid)
	}
	if data, err := os.ReadFile(path); err == nil {
		pl := ParseProcLimits(data)
		l.NoFile = pl["Max open files"]
		l.MemlockBytes = pl["Max locked memory"]
	}
	l.MaxMapCount = readInt("/proc/sys/vm/max_map_count")
	l.Somaxconn = readInt("/proc/sys/net/core/somaxconn")
	l.ThreadsMax = readInt("/proc/sys/kernel/threads-max")
	l.PidMax = readInt("/proc/sys/kernel/pid_max")
	if data, err := os.ReadFile("/proc/net/netstat"); err == nil {
		ext := ParseNetstat(data)["TcpExt"]
		l.ListenOverflows = ext["ListenOverflows"]
		l.ListenDrops = ext["ListenDrops"]
	}
	return l
}

func readInt(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return v
}

// ParseProcLimits parses /proc/PID/limits into soft limits by name
// ("Max open files"); "unlimited" is -1.
func ParseProcLimits(data []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		// Columns: name (padded to 26), soft, hard, units.
		if len(line) < 26 || strings.HasPrefix(line, "Limit") {
			continue
		}
		name := strings.TrimSpace(line[:26])
		f := strings.Fields(line[26:])
		if len(f) < 2 {
			continue
		}
		if f[0] == "unlimited" {
			out[name] = -1
		} else if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// ParseNetstat parses /proc/net/netstat (and /proc/net/snmp): pairs of
// header and value lines per prefix, e.g. "TcpExt".
func ParseNetstat(data []byte) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) == 0 || len(h) != len(v) || h[0] != v[0] {
			continue
		}
		prefix := strings.TrimSuffix(h[0], ":")
		m := map[string]int64{}
		for j := 1; j < len(h); j++ {
			n, err := strconv.ParseInt(v[j], 10, 64)
			if err == nil {
				m[h[j]] = n
			}
		}
		out[prefix] = m
	}
	return out
}

// DeviceCaps lists the caps that bound client counts, keyed as the
// diagnosis names them ("max_qp").
func DeviceCaps(d *result.DeviceInfo) map[string]int64 {
	if d == nil {
		return nil
	}
	c := d.Caps
	return map[string]int64{"max_qp": int64(c.MaxQP), "max_cq": int64(c.MaxCQ),
		"max_mr": int64(c.MaxMR), "max_pd": int64(c.MaxPD), "max_srq": int64(c.MaxSRQ),
		"max_ah": int64(c.MaxAH)}
}
