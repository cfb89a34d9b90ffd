package collectors

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/shirou/gopsutil/v3/process"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// procCollector reads CPU, RSS, threads, open fds and memory mappings of
// each watched process. A process that has exited is skipped silently:
// the point's processes come and go.
type procCollector struct {
	list  func() []Proc
	procs map[int]*process.Process
	// Reading /proc/PID/maps costs time in proportion to the mappings (40k
	// lines at 10,000 clients, slow under emulation), so ticks reuse a
	// reading younger than mapsEvery; explicit samples read afresh.
	maps  map[int]mapsReading
	force bool
}

type mapsReading struct {
	n  int
	at time.Time
}

const mapsEvery = 2 * time.Second

func newProcCollector(list func() []Proc) *procCollector {
	return &procCollector{list: list, procs: map[int]*process.Process{}, maps: map[int]mapsReading{}}
}

// Force makes the next Collect read everything afresh.
func (c *procCollector) Force() { c.force = true }

func (*procCollector) Name() string { return "process" }

func (c *procCollector) Collect(s *result.Sample) error {
	defer func() { c.force = false }()
	var firstErr error
	for _, p := range c.list() {
		ps, err := c.read(p)
		if err != nil {
			if _, statErr := os.Stat(fmt.Sprintf("/proc/%d", p.PID)); statErr != nil {
				delete(c.procs, p.PID)
				continue // exited
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("%s (pid %d): %w", p.Role, p.PID, err)
			}
			continue
		}
		s.Procs = append(s.Procs, ps)
	}
	return firstErr
}

func (c *procCollector) read(p Proc) (result.ProcSample, error) {
	ps := result.ProcSample{Role: p.Role, PID: p.PID}
	h := c.procs[p.PID]
	if h == nil {
		var err error
		if h, err = process.NewProcess(int32(p.PID)); err != nil {
			return ps, err
		}
		c.procs[p.PID] = h
		h.Percent(0) // prime
	}
	pct, err := h.Percent(0)
	if err != nil {
		return ps, err
	}
	ps.CPU = roundTo(pct, 1)
	mi, err := h.MemoryInfo()
	if err != nil {
		return ps, err
	}
	ps.RSS = mi.RSS
	th, err := h.NumThreads()
	if err != nil {
		return ps, err
	}
	ps.Threads = int(th)
	fds, err := h.NumFDs()
	if err != nil {
		return ps, err
	}
	ps.FDs = int(fds)
	if r, ok := c.maps[p.PID]; ok && !c.force && time.Since(r.at) < mapsEvery {
		ps.Maps = r.n
		return ps, nil
	}
	if ps.Maps, err = countMaps(p.PID); err != nil {
		return ps, err
	}
	c.maps[p.PID] = mapsReading{n: ps.Maps, at: time.Now()}
	return ps, nil
}

// countMaps counts the lines of /proc/PID/maps: the mappings that
// vm.max_map_count bounds.
func countMaps(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return countLines(f)
}

func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
