package collectors

import (
	"errors"
	"fmt"

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

// CPUShare is the machine's CPU use between two readings of CPUTimes,
// in cores: busy (user, system, interrupts; not idle, iowait or time
// stolen by a hypervisor) and the part of it in softirq, where the
// kernel's deferred work runs outside any process (rxe's tasklets among
// it). For the vm backend, read in the guest, the guest's.
//
// The kernel counts these times by sampling its timer tick, and a TCG
// guest whose host is busy misses ticks: in one phase the ticks of the
// guest's two CPUs added up to the time of one, while its two processes
// alone used 1.8 CPUs. So the shares are taken of the ticks counted, not
// of the wall time, and scaled by the CPUs.
type CPUShare struct {
	busy, softirq, total float64 // seconds, all CPUs together
	cpus                 int
}

// CPUTimes reads the machine's CPU times so far.
func CPUTimes() (CPUShare, error) {
	t, err := cpu.Times(false)
	if err != nil {
		return CPUShare{}, err
	}
	if len(t) == 0 {
		return CPUShare{}, errors.New("no CPU times")
	}
	n, err := cpu.Counts(true)
	if err != nil || n < 1 {
		return CPUShare{}, fmt.Errorf("count CPUs: %v", err)
	}
	c := t[0]
	busy := c.User + c.Nice + c.System + c.Irq + c.Softirq
	return CPUShare{busy: busy, softirq: c.Softirq, total: busy + c.Idle + c.Iowait + c.Steal, cpus: n}, nil
}

// Since is the cores busy, and in softirq, from start to c; ok is false
// when no tick was counted between them.
func (c CPUShare) Since(start CPUShare) (busy, softirq float64, ok bool) {
	d := c.total - start.total
	if d <= 0 {
		return 0, 0, false
	}
	k := float64(c.cpus) / d
	return (c.busy - start.busy) * k, (c.softirq - start.softirq) * k, true
}
