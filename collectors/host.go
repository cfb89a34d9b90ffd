package collectors

import (
	"errors"
	"time"

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

// CPUTimes is the machine's CPU time so far, all CPUs together: busy
// (user, system, interrupts; not idle, iowait or time stolen by a
// hypervisor) and the part of it in softirq, where
// the kernel's deferred work runs outside any process (rxe's tasklets
// among it). For the vm backend, read in the guest, the guest's.
func CPUTimes() (busy, softirq time.Duration, err error) {
	t, err := cpu.Times(false)
	if err != nil {
		return 0, 0, err
	}
	if len(t) == 0 {
		return 0, 0, errors.New("no CPU times")
	}
	c := t[0]
	sec := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	return sec(c.User + c.Nice + c.System + c.Irq + c.Softirq), sec(c.Softirq), nil
}
