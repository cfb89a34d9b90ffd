package collectors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ResourceKinds are the RDMA resource types the kernel tracks per device
// (the `rdma resource show` columns).
var ResourceKinds = []string{"pd", "cq", "qp", "cm_id", "mr", "ctx", "srq"}

// Counts converts netlink summary entries to counts of ResourceKinds
// (missing kinds count 0).
func Counts(entries map[string]uint64) map[string]int {
	m := make(map[string]int, len(ResourceKinds))
	for _, k := range ResourceKinds {
		m[k] = int(entries[k])
	}
	return m
}

// Subtract returns m minus base, key by key (base may be nil).
func Subtract(m, base map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v - base[k]
	}
	return out
}

// ParseSummary parses `rdma -j resource show` output into per-device
// counts.
func ParseSummary(data []byte) (map[string]map[string]int, error) {
	var rows []map[string]any
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("rdma resource summary: %w", err)
	}
	out := map[string]map[string]int{}
	for _, r := range rows {
		name, _ := r["ifname"].(string)
		if name == "" {
			return nil, fmt.Errorf("rdma resource summary: entry without ifname")
		}
		m := map[string]int{}
		for _, k := range ResourceKinds {
			if v, ok := r[k].(float64); ok {
				m[k] = int(v)
			}
		}
		out[name] = m
	}
	return out, nil
}

// ParseObjects counts the objects of `rdma -j resource show KIND` on one
// device by the task that created them (the kernel reports the thread's
// id, not the process's: see Tgid), and sums their "mrlen" (registered
// bytes, MRs only); kernel-owned objects (no pid) count under 0.
func ParseObjects(data []byte, device string) (count map[int]int, bytes map[int]int64, err error) {
	var rows []struct {
		IfName string `json:"ifname"`
		PID    *int   `json:"pid"`
		MRLen  int64  `json:"mrlen"`
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, nil, fmt.Errorf("rdma resource objects: %w", err)
	}
	count, bytes = map[int]int{}, map[int]int64{}
	for _, r := range rows {
		if r.IfName != device {
			continue
		}
		pid := 0
		if r.PID != nil {
			pid = *r.PID
		}
		count[pid]++
		bytes[pid] += r.MRLen
	}
	return count, bytes, nil
}

// byRole dumps QPs, CQs, MRs and PDs object by object with the `rdma`
// tool and counts them by the role of the owning process: "server", or
// "clients" for every load generator; "mr_bytes" sums the registered
// lengths. Objects of other processes are left out.
func (c *rdmaCollector) byRole(procs []Proc) (map[string]map[string]int, error) {
	role := map[int]string{}
	for _, p := range procs {
		r := p.Role
		if r != "server" {
			r = "clients"
		}
		role[p.PID] = r
	}
	out := map[string]map[string]int{}
	tgids := map[int]int{}
	for _, kind := range []string{"qp", "cq", "mr", "pd"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "rdma", "-j", "resource", "show", kind)
		cmd.Stderr = &stderr
		data, err := cmd.Output()
		cancel()
		if err != nil {
			return out, fmt.Errorf("rdma -j resource show %s: %v %s", kind, err, bytes.TrimSpace(stderr.Bytes()))
		}
		byPID, size, err := ParseObjects(data, c.device)
		if err != nil {
			return out, err
		}
		for tid, n := range byPID {
			pid, ok := tgids[tid]
			if !ok {
				pid = Tgid(tid)
				tgids[tid] = pid
			}
			r, ok := role[pid]
			if !ok && pid > 0 {
				// A server command's workers, a generator's client
				// commands: the role of the nearest ancestor that has
				// one.
				if r = roleOfAncestor(pid, role); r != "" {
					role[pid], ok = r, true
				}
			}
			if ok {
				if out[r] == nil {
					out[r] = map[string]int{}
				}
				out[r][kind] += n
				if kind == "mr" {
					out[r]["mr_bytes"] += int(size[tid])
				}
			}
		}
	}
	return out, nil
}

// roleOfAncestor walks pid's parents (at most 16) to one with a role.
func roleOfAncestor(pid int, role map[int]string) string {
	for range 16 {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return ""
		}
		if pid = ParsePPid(data); pid <= 1 {
			return ""
		}
		if r, ok := role[pid]; ok {
			return r
		}
	}
	return ""
}

// ParsePPid reads the parent's PID from a /proc/PID/stat line; the
// command name may hold spaces and parentheses, so fields are counted
// from the last ')'.
func ParsePPid(stat []byte) int {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// Tgid returns the process (thread group) of thread tid, from
// /proc/TID/status; 0 when it cannot be read. RDMA resource tracking
// records the creating thread, and a Go program creates verbs objects
// from whichever thread runs the goroutine.
func Tgid(tid int) int {
	if tid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0
	}
	return ParseTgid(data)
}

// ParseTgid reads the Tgid line of a /proc/PID/status file.
func ParseTgid(status []byte) int {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
