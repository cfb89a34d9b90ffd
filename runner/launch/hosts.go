// Package launch places load generators on other hosts: SSH runs them
// on named hosts, Slurm under srun in an allocation. Each is a
// runner.RemoteLauncher; the generators speak the same protocol over the
// launcher's pipes as they do here (runner/protocol).
package launch

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Host is a machine load generators may run on, as --hosts or a hostfile
// names it.
type Host struct {
	// Name is the launcher's name for it: an SSH destination
	// ([user@]host, or an alias of the user's ssh_config) or a Slurm
	// node.
	Name string
	// Slots is how many generator processes it takes before the next
	// host is used, as mpirun's slots; at least 1.
	Slots int
	// Exe is rdmaprobe's path on the host; "" lets the launcher choose
	// (SSH copies this binary when the host's OS and architecture match;
	// Slurm runs this binary's path, as on a shared file system).
	Exe string
}

// ParseHosts reads --hosts: comma-separated host[:slots] (an IPv6
// address in brackets: [fe80::1%eth0]:2).
func ParseHosts(s string) ([]Host, error) {
	var hosts []Host
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		h := Host{Name: f, Slots: 1}
		if i := strings.LastIndex(f, ":"); i > 0 && (!strings.Contains(f[:i], ":") || strings.HasSuffix(f[:i], "]")) {
			n, err := strconv.Atoi(f[i+1:])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--hosts %q: slots of %q must be a positive number", s, f)
			}
			h.Name, h.Slots = f[:i], n
		}
		h.Name = strings.TrimSuffix(strings.TrimPrefix(h.Name, "["), "]")
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("--hosts %q names no host", s)
	}
	return hosts, nil
}

// ReadHostfile reads an mpirun-style hostfile: one host per line,
// "name [slots=N] [exe=PATH]"; '#' starts a comment.
func ReadHostfile(path string) ([]Host, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hostfile: %w", err)
	}
	defer f.Close()
	var hosts []Host
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		h := Host{Name: fields[0], Slots: 1}
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			switch {
			case ok && (k == "slots" || k == "max_slots"):
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return nil, fmt.Errorf("%s:%d: %s must be a positive number", path, line, kv)
				}
				if k == "slots" {
					h.Slots = n
				}
			case ok && k == "exe":
				h.Exe = v
			default:
				return nil, fmt.Errorf("%s:%d: %q is not slots=N or exe=PATH", path, line, kv)
			}
		}
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hostfile %s: %w", path, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("hostfile %s names no host", path)
	}
	return hosts, nil
}

// Slots is the hosts' slots together: the generators they take in one
// round.
func Slots(hosts []Host) int {
	n := 0
	for _, h := range hosts {
		n += h.Slots
	}
	return n
}

// placement maps each of procs generators to its host's index, filling
// each host's slots in turn (mpirun's by-slot mapping); more generators
// than slots start another round.
func placement(hosts []Host, procs int) []int {
	var order []int
	for i, h := range hosts {
		for range h.Slots {
			order = append(order, i)
		}
	}
	out := make([]int, procs)
	for i := range out {
		out[i] = order[i%len(order)]
	}
	return out
}
