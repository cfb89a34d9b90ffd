// Package collectors samples what bounds capacity while a probe runs:
// RDMA resources, host and process CPU/memory, and the limits in force.
// This file describes the machine once per run.
package collectors

import (
	"os"
	"runtime"

	"github.com/shirou/gopsutil/v3/host"
	"github.com/shirou/gopsutil/v3/mem"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Environment describes this machine. Fields that cannot be read stay
// empty rather than failing the run.
func Environment() result.Environment {
	env := result.Environment{
		Arch:      runtime.GOARCH,
		CPUs:      runtime.NumCPU(),
		GoVersion: runtime.Version(),
	}
	env.Hostname, _ = os.Hostname()
	if hi, err := host.Info(); err == nil {
		env.OS = hi.Platform + " " + hi.PlatformVersion
		env.Kernel = hi.KernelVersion
	}
	if vm, err := mem.VirtualMemory(); err == nil {
		env.MemoryBytes = vm.Total
	}
	return env
}
