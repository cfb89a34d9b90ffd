package runner

import (
	"context"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// sampler watches one point: resources, processes and limits. It starts
// before the server so the RDMA baseline excludes everything the point
// creates.
type sampler struct {
	sess *collectors.Session
	// started is the clock of the samples' T (zero without sampling).
	started time.Time
	mu      sync.Mutex
	procs   []collectors.Proc
	before  result.Limits
	after   result.Limits
	server  int
	// elsewhere: the server runs on another host, out of the
	// collectors' sight; the point is still diagnosed.
	elsewhere bool
	byRole    map[string]map[string]int
	// shared: the server and some of the clients run here, on one device.
	shared bool
	kernel *collectors.KernelWatch
}

// startSampler starts the point's collectors; onSample (may be nil)
// gets each reading as it is taken.
func startSampler(ctx context.Context, interval time.Duration, device string, onSample func(result.Sample)) *sampler {
	s := &sampler{kernel: collectors.WatchKernel()}
	if interval < 0 {
		return s
	}
	s.started = time.Now()
	s.sess = collectors.Start(ctx, collectors.Config{Interval: interval,
		Device: device, Procs: s.list, OnSample: onSample})
	return s
}

func (s *sampler) list() []collectors.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]collectors.Proc(nil), s.procs...)
}

func (s *sampler) add(role string, pid int) {
	s.mu.Lock()
	s.procs = append(s.procs, collectors.Proc{Role: role, PID: pid})
	s.mu.Unlock()
}

// serverUp records the server and the limits in force for it, with the
// caps of the device it opened; tree, if not nil, lists the server's
// process and those it started, which its samples then cover.
func (s *sampler) serverUp(pid int, tree func() []int, dev *result.DeviceInfo) {
	s.server = pid
	s.mu.Lock()
	s.procs = append(s.procs, collectors.Proc{Role: "server", PID: pid, Tree: tree})
	s.mu.Unlock()
	s.before = collectors.ReadLimits(pid)
	s.before.DeviceCaps = collectors.DeviceCaps(dev)
	if s.sess != nil {
		s.sess.Sample() // the server up, before any client: the cost baseline
	}
}

// serverElsewhere records a server on another host: only its device's
// caps are known here.
func (s *sampler) serverElsewhere(dev *result.DeviceInfo) {
	s.elsewhere = true
	s.before.DeviceCaps = collectors.DeviceCaps(dev)
}

// loaded is called when every client has reported and before they are
// released: one sample at full load and, with split, the device's
// objects split by process. The split dumps every object of the device
// one by one, so its cost grows with all the clients held.
func (s *sampler) loaded(split bool) {
	s.kernel.Loaded()
	if s.sess == nil {
		return
	}
	s.sess.Sample()
	if split {
		s.byRole = s.sess.Split(s.list())
	}
}

// serverDone re-reads the limits while the server still runs, so
// per-process limits and the listen-queue counters cover the point.
func (s *sampler) serverDone() {
	if s.server != 0 {
		s.after = collectors.ReadLimits(s.server)
		s.after.DeviceCaps = s.before.DeviceCaps
	}
}

// finish stops sampling and adds samples, cost and, for a failed point,
// the diagnosis. Call after Summarise.
func (s *sampler) finish(pt *result.Point, maxClients int) {
	if s.kernel != nil {
		pt.KernelMemory, s.kernel = s.kernel.Finish(), nil
	}
	if s.sess != nil {
		var errs []string
		pt.Samples, pt.Peak, errs = s.sess.Stop()
		pt.Peak.ByRole = s.byRole
		pt.Peak.Resources = pt.Server.Resources
		if dc := s.sess.DeviceCounters(); dc != nil {
			dc.Shared = s.shared
			pt.DeviceCounters = dc
		}
		pt.SamplerErrors = append(pt.SamplerErrors, errs...)
	}
	if c := pt.Server.DeviceCounters; c != nil && pt.DeviceCounters == nil {
		// A simulated device, opened by the server for this point: it
		// counted from zero.
		before := make(map[string]uint64, len(c))
		for k := range c {
			before[k] = 0
		}
		pt.DeviceCounters = &result.DeviceCounters{Device: "sim", Source: "sim", Before: before, After: c}
		pt.Server.DeviceCounters = nil
	}
	if s.server == 0 && !s.elsewhere {
		return
	}
	before := s.before
	if s.server != 0 {
		pt.Limits = &before
	}
	pt.Cost = analysis.Cost(*pt)
	if !pt.Passed || pt.Error != "" {
		after := s.after
		pt.LimitsAfter = &after
		pt.Diagnosis = analysis.Diagnose(*pt, s.before, s.after, maxClients)
	}
}
