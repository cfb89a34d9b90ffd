// Package collectors samples what bounds capacity while a probe runs:
// RDMA resources, host and process CPU/memory, and the limits in force.
// This file describes the machine once per run.
package collectors

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"github.com/shirou/gopsutil/v3/host"
	"github.com/shirou/gopsutil/v3/mem"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// osReleaseFile is where systemd-era distributions name themselves.
const osReleaseFile = "/etc/os-release"

// Environment describes this machine. Fields that cannot be read stay
// empty rather than failing the run.
//
// It reads files only. gopsutil's host.Info runs /usr/bin/lsb_release, a
// shell script it kills after 3 s on a loaded host; the script's own
// children then land on rdmaprobe, a child subreaper, as processes no one
// started on purpose and no one reaps.
func Environment() result.Environment {
	env := result.Environment{
		Arch:      runtime.GOARCH,
		CPUs:      runtime.NumCPU(),
		GoVersion: runtime.Version(),
	}
	env.Hostname, _ = os.Hostname()
	env.OS = osRelease(osReleaseFile)
	env.Kernel, _ = host.KernelVersion()
	if vm, err := mem.VirtualMemory(); err == nil {
		env.MemoryBytes = vm.Total
	}
	return env
}

// osRelease reads an os-release file's ID and VERSION_ID ("debian 12"),
// or "" when the file is missing or names neither.
func osRelease(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var id, version string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch k {
		case "ID":
			id = v
		case "VERSION_ID":
			version = v
		}
	}
	return strings.TrimSpace(id + " " + version)
}
