package collectors

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// DefaultInterval is the sampling period when Config.Interval is zero.
const DefaultInterval = 500 * time.Millisecond

// A Collector adds one kind of reading to a sample. Collectors are
// independent, in the manner of node_exporter's: one failing records its
// error and the others go on.
type Collector interface {
	Name() string
	Collect(s *result.Sample) error
}

// Proc is a process to watch, with the role it plays in the point.
type Proc struct {
	Role string // "server", "clients-0", "qemu"
	PID  int
	// Tree, when set, lists PID and every process it started (a server
	// command's workers, or the server under an `sh -c`): the sample
	// then covers them all (see result.ProcSample.Processes).
	Tree func() []int
}

// Config says what a session samples.
type Config struct {
	Interval time.Duration
	// Device is the RDMA device whose resources are counted; "" skips
	// the RDMA collector (sim has no device outside the server process).
	Device string
	// Procs lists the processes to watch; called at every sample, so
	// processes started during the point are picked up.
	Procs func() []Proc
	// NoHost skips the host CPU and memory collector (the vm backend's
	// host-side session only watches QEMU).
	NoHost bool
	// OnSample, if set, is given each reading as it is taken (live
	// metrics); it must not call back into the session.
	OnSample func(result.Sample)
}

// Session samples until Stop.
type Session struct {
	start      time.Time
	collectors []Collector
	rdma       *rdmaCollector
	counters   *counterCollector
	// deviceCounters are the port's counters before and after, read by Stop.
	deviceCounters *result.DeviceCounters

	// collect serialises readings: the ticker and explicit Sample calls
	// share the collectors' state. last and took are when the last
	// reading started and how long it took (guarded by collect).
	collect sync.Mutex
	last    time.Time
	took    time.Duration
	mu      sync.Mutex
	samples []result.Sample
	errs    map[string]string // first error per collector

	cancel   context.CancelFunc
	done     chan struct{}
	onSample func(result.Sample)
}

// Start takes the RDMA baseline and a first sample, then samples every
// cfg.Interval until Stop or ctx ends.
func Start(ctx context.Context, cfg Config) *Session {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	s := &Session{start: time.Now(), errs: map[string]string{}, done: make(chan struct{}), onSample: cfg.OnSample}
	if cfg.Device != "" {
		s.rdma = newRDMACollector(cfg.Device)
		if err := s.rdma.baseline(); err != nil {
			s.errs["rdma"] = err.Error()
		}
		s.collectors = append(s.collectors, s.rdma)
		var err error
		if s.counters, err = newCounterCollector(cfg.Device); err != nil {
			s.errs["device-counters"] = err.Error()
		}
		s.collectors = append(s.collectors, s.counters)
	}
	if !cfg.NoHost {
		s.collectors = append(s.collectors, newHostCollector())
	}
	if cfg.Procs != nil {
		s.collectors = append(s.collectors, newProcCollector(cfg.Procs))
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.Sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sample(false)
			}
		}
	}()
	return s
}

// sampleBudget bounds the sampler to about 1/sampleBudget of a CPU: a
// tick is skipped while less than sampleBudget times what the last
// reading took has passed since it started. A reading costs the same
// work however fast the machine is, so on a slow or loaded one (a TCG
// guest on a busy host reads /proc 20 times slower) a fixed period
// would take a growing share of the CPUs the point measures: 16% of
// the guest at 1000 clients on a host loaded to 5 handshakes/s, where
// the same sampler took 2% on a quiet one.
const sampleBudget = 50

// due reports whether a tick at now may read again, the last reading
// having started at last and taken took.
func due(now, last time.Time, took time.Duration) bool {
	return now.Sub(last) >= sampleBudget*took
}

// Sample takes one full reading now. The runner calls it when every
// client has reported, so the sample at full load is never missed between
// ticks.
func (s *Session) Sample() { s.sample(true) }

func (s *Session) sample(full bool) {
	s.collect.Lock()
	defer s.collect.Unlock()
	now := time.Now()
	if !full && !due(now, s.last, s.took) {
		return
	}
	defer func() { s.last, s.took = now, time.Since(now) }()
	smp := result.Sample{T: now.Sub(s.start).Seconds()}
	for _, c := range s.collectors {
		if f, ok := c.(interface{ Force() }); ok && full {
			f.Force()
		}
		if err := c.Collect(&smp); err != nil {
			s.mu.Lock()
			if _, ok := s.errs[c.Name()]; !ok {
				s.errs[c.Name()] = err.Error()
			}
			s.mu.Unlock()
		}
	}
	smp.T = roundTo(smp.T, 3)
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
	if s.onSample != nil {
		s.onSample(smp)
	}
}

// Split dumps the device's resources by process and maps them to the
// roles of procs (see ByRole). No-op without a device.
func (s *Session) Split(procs []Proc) map[string]map[string]int {
	if s.rdma == nil {
		return nil
	}
	s.collect.Lock()
	defer s.collect.Unlock()
	m, err := s.rdma.byRole(procs)
	if err != nil {
		s.mu.Lock()
		s.errs["rdma-by-process"] = err.Error()
		s.mu.Unlock()
	}
	return m
}

// Stop ends sampling and returns the samples, their peaks and the
// collectors' errors ("name: text", sorted).
func (s *Session) Stop() ([]result.Sample, *result.Peak, []string) {
	s.cancel()
	<-s.done
	if s.rdma != nil {
		s.rdma.close()
	}
	if s.counters != nil {
		s.deviceCounters = s.counters.result()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	peak := Peaks(s.samples)
	if s.rdma != nil {
		peak.Baseline = s.rdma.base
	}
	var errs []string
	for name, e := range s.errs {
		errs = append(errs, fmt.Sprintf("%s: %s", name, e))
	}
	sort.Strings(errs)
	return s.samples, peak, errs
}

// DeviceCounters are the device port's counters when the session started
// and when it stopped (nil without a device, or where none could be
// read). Call after Stop.
func (s *Session) DeviceCounters() *result.DeviceCounters { return s.deviceCounters }

// Peaks summarises samples: the highest RDMA counts, the server's
// highest RSS, mappings, fds and threads, and the host's highest CPU and
// memory.
func Peaks(samples []result.Sample) *result.Peak {
	p := &result.Peak{}
	for _, s := range samples {
		for k, v := range s.RDMA {
			if p.RDMA == nil {
				p.RDMA = map[string]int{}
			}
			if v > p.RDMA[k] {
				p.RDMA[k] = v
			}
		}
		p.HostCPU = max(p.HostCPU, s.HostCPU)
		p.HostMemUsed = max(p.HostMemUsed, s.HostMemUsed)
		for _, pr := range s.Procs {
			if pr.Role != "server" {
				continue
			}
			p.ServerRSS = max(p.ServerRSS, pr.RSS)
			p.ServerMaps = max(p.ServerMaps, pr.Maps)
			p.ServerFDs = max(p.ServerFDs, pr.FDs)
			p.ServerThreads = max(p.ServerThreads, pr.Threads)
		}
	}
	return p
}

func roundTo(x float64, digits int) float64 {
	f := 1.0
	for range digits {
		f *= 10
	}
	return float64(int64(x*f+0.5)) / f
}
