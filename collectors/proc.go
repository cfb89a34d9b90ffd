package collectors

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
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
	// Counting mappings (/proc/PID/maps) and open files (/proc/PID/fd)
	// costs time in proportion to the count: 30,000 mappings of a load
	// generator at 10,000 clients, 10,000 sockets of a server, and slow
	// under emulation, where the sampler shares the CPUs it measures. So
	// ticks reuse a reading until it is older than its minimum age and
	// readingBudget times what it took; explicit samples read afresh.
	maps map[int]reading
	fds  map[int]reading
	// trees are the processes of each Proc with a Tree, as last listed:
	// listing scans /proc, so it is reused like a slow count.
	trees map[int]treeReading
	force bool
}

// treeReading is a process tree as listed at a time.
type treeReading struct {
	pids []int
	reading
}

// reading is a count and what reading it cost.
type reading struct {
	n    int
	at   time.Time
	took time.Duration
}

// readingBudget bounds a slow count to about 1/readingBudget of a CPU per
// watched process.
const readingBudget = 50

// Minimum ages: mappings change with clients, and only a limit diagnosis
// needs them exact (it forces a reading); open files are read every tick
// while that is cheap.
const (
	mapsEvery = 2 * time.Second
	fdsEvery  = 0
)

// stale reports whether r must be read again at now.
func (r reading) stale(now time.Time, minAge time.Duration) bool {
	return now.Sub(r.at) >= max(minAge, readingBudget*r.took)
}

// count returns a fresh or reused count from cache for pid.
func (c *procCollector) count(cache map[int]reading, pid int, minAge time.Duration, read func(int) (int, error)) (int, error) {
	now := time.Now()
	if r, ok := cache[pid]; ok && !c.force && !r.stale(now, minAge) {
		return r.n, nil
	}
	n, err := read(pid)
	if err != nil {
		return 0, err
	}
	cache[pid] = reading{n: n, at: now, took: time.Since(now)}
	return n, nil
}

func newProcCollector(list func() []Proc) *procCollector {
	// Without the cache gopsutil reads the boot time from /proc/stat at
	// every CPU reading of every process (for start times we do not
	// use): a second file, and the kernel's most expensive one to render.
	process.EnableBootTimeCache(true)
	return &procCollector{list: list, procs: map[int]*process.Process{}, maps: map[int]reading{}, fds: map[int]reading{}, trees: map[int]treeReading{}}
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
				delete(c.maps, p.PID)
				delete(c.fds, p.PID)
				delete(c.trees, p.PID)
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
	ps, err := c.readOne(p.Role, p.PID)
	if err != nil || p.Tree == nil {
		return ps, err
	}
	now := time.Now()
	t, ok := c.trees[p.PID]
	if !ok || c.force || t.stale(now, mapsEvery) {
		t = treeReading{pids: p.Tree()}
		t.at, t.took = now, time.Since(now)
		c.trees[p.PID] = t
	}
	ps.Processes = 1
	for _, pid := range t.pids {
		if pid == p.PID {
			continue
		}
		o, err := c.readOne(p.Role, pid)
		if err != nil { // a worker that has exited
			delete(c.procs, pid)
			delete(c.maps, pid)
			delete(c.fds, pid)
			continue
		}
		ps.Processes++
		ps.CPU = roundTo(ps.CPU+o.CPU, 1)
		ps.RSS += o.RSS
		ps.Threads += o.Threads
		ps.FDs = max(ps.FDs, o.FDs)
		ps.Maps = max(ps.Maps, o.Maps)
	}
	return ps, nil
}

// readOne samples one process.
func (c *procCollector) readOne(role string, pid int) (result.ProcSample, error) {
	ps := result.ProcSample{Role: role, PID: pid}
	h := c.procs[pid]
	if h == nil {
		var err error
		if h, err = process.NewProcess(int32(pid)); err != nil {
			return ps, err
		}
		c.procs[pid] = h
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
	if ps.FDs, err = c.count(c.fds, pid, fdsEvery, func(int) (int, error) {
		n, err := h.NumFDs()
		return int(n), err
	}); err != nil {
		return ps, err
	}
	if ps.Maps, err = c.count(c.maps, pid, mapsEvery, countMaps); err != nil {
		return ps, err
	}
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

// ProcessUsage is a process's resources at one instant, with its CPU
// time so far: what a load generator on another host reports of itself.
type ProcessUsage struct {
	RSS     uint64
	CPUSec  float64
	Threads int
	FDs     int
	Maps    int
}

// Process reads pid's usage.
func Process(pid int) (ProcessUsage, error) {
	var u ProcessUsage
	h, err := process.NewProcess(int32(pid))
	if err != nil {
		return u, err
	}
	mi, err := h.MemoryInfo()
	if err != nil {
		return u, err
	}
	u.RSS = mi.RSS
	t, err := h.Times()
	if err != nil {
		return u, err
	}
	u.CPUSec = roundTo(t.User+t.System, 3)
	th, err := h.NumThreads()
	if err != nil {
		return u, err
	}
	u.Threads = int(th)
	fds, err := h.NumFDs()
	if err != nil {
		return u, err
	}
	u.FDs = int(fds)
	u.Maps, err = countMaps(pid)
	return u, err
}

// ProcessCPU is a process's user and system CPU time so far.
func ProcessCPU(pid int) (time.Duration, error) {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return 0, err
	}
	t, err := p.Times()
	if err != nil {
		return 0, err
	}
	return time.Duration((t.User + t.System) * float64(time.Second)), nil
}

// SelfCPU is this process's user and system CPU time so far, and the
// system part: time in the kernel, where a software device such as rxe
// does its work inside the posting calls.
func SelfCPU() (all, sys time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Stime.Nano())
}
