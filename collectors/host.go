package collectors

import (
	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/mem"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// hostCollector reads the machine's CPU use and memory in use (for the
// vm backend, run inside the guest, the guest's).
type hostCollector struct{}

func newHostCollector() *hostCollector {
	cpu.Percent(0, false) // prime: the next call measures since now
	return &hostCollector{}
}

func (*hostCollector) Name() string { return "host" }

func (*hostCollector) Collect(s *result.Sample) error {
	pct, err := cpu.Percent(0, false)
	if err != nil {
		return err
	}
	if len(pct) > 0 {
		s.HostCPU = roundTo(pct[0], 1)
	}
	vm, err := mem.VirtualMemory()
	if err != nil {
		return err
	}
	s.HostMemUsed = vm.Used
	return nil
}
