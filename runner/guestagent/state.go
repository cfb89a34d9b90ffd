package guestagent

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
)

// state is vm.OpState: what the guest holds that a run could have left.
func (a *agent) state() (vm.GuestState, error) {
	s := vm.GuestState{RDMA: map[string]map[string]int{}, Sysctls: map[string]string{}, Peer: a.ssh != nil}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return s, err
	}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// The kernel's threads are kthreadd (2) and its children.
		if pid == 2 || collectors.ParsePPid(stat) == 2 {
			continue
		}
		name := string(stat)
		if i, j := strings.IndexByte(name, '('), strings.LastIndexByte(name, ')'); i >= 0 && j > i {
			name = name[i+1 : j]
		}
		s.Processes = append(s.Processes, e.Name()+" "+name)
	}
	devs, _ := os.ReadDir("/sys/class/infiniband")
	for _, d := range devs {
		counts, err := collectors.DeviceResources(d.Name())
		if err != nil {
			return s, err
		}
		s.RDMA[d.Name()] = counts
	}
	err = filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil // a file gone while walking
		case p == "/proc" || p == "/sys" || p == "/dev":
			return filepath.SkipDir
		case !d.IsDir():
			s.Files = append(s.Files, p)
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	slices.Sort(s.Files)
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		s.Sysctls["vm.max_map_count"] = strings.TrimSpace(string(b))
	}
	return s, nil
}
