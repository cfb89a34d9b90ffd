// Package live exposes a run while it happens: Prometheus/OpenMetrics
// metrics of each point on an HTTP endpoint (Metrics), the same for a
// standalone server's admission counters (ServeServer), and a stream of
// JSON-line events (Events). Everything here is off unless asked for:
// a nil *Metrics or *Events takes every call and does nothing.
package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Labels are the run's constant labels, on every series of a run.
type Labels struct {
	// Command is search or ramp; the server design is a point's label.
	RunID, Backend, Command string
}

// Classic buckets, which Prometheus 2.42 and histogram_quantile read;
// the native buckets beside them cost little and aggregate exactly.
var (
	phaseBuckets   = result.PhaseBounds                             // the generators' own, 100 µs to 52 s
	latencyBuckets = prometheus.ExponentialBuckets(0.000002, 2, 22) // 2 µs to 8 s
)

const nativeFactor = 1.1

// Metrics is a run's registry and the endpoint that serves it. Its
// methods are safe for concurrent use and do nothing on a nil *Metrics.
type Metrics struct {
	reg *prometheus.Registry
	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	point   prometheus.Labels
	started time.Time
	// seen are the phase bucket counts of the point observed so far.
	seen map[string][]int

	clients, attempted, connected, rate *prometheus.GaugeVec
	failed, objects                     *prometheus.GaugeVec
	cpu, rss                            *prometheus.GaugeVec
	messages, bytes, msgRate            *prometheus.GaugeVec
	phases, latency                     *prometheus.HistogramVec
	points                              *prometheus.CounterVec
	capacity                            *prometheus.GaugeVec
}

// MetricNames are the names a run's registry exposes (histograms by
// their base name): what a dashboard may query.
var MetricNames = []string{
	"rdmaprobe_point_clients", "rdmaprobe_point_attempted", "rdmaprobe_point_connected",
	"rdmaprobe_point_failed", "rdmaprobe_point_connects_per_second",
	"rdmaprobe_connect_phase_seconds", "rdmaprobe_server_objects",
	"rdmaprobe_process_cpu_percent", "rdmaprobe_process_rss_bytes",
	"rdmaprobe_traffic_messages", "rdmaprobe_traffic_bytes", "rdmaprobe_traffic_messages_per_second",
	"rdmaprobe_traffic_latency_seconds", "rdmaprobe_points_total", "rdmaprobe_capacity_clients",
}

// NewRegistry returns a run's metrics without serving them.
func NewRegistry(l Labels) *Metrics {
	m := &Metrics{}
	m.start(l)
	return m
}

func (m *Metrics) start(l Labels) {
	reg := prometheus.NewRegistry()
	cl := prometheus.Labels{"run_id": l.RunID, "backend": l.Backend, "command": l.Command}
	pl := []string{"point", "trial", "design"}
	gauge := func(name, help string, extra ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: cl}, append(append([]string{}, pl...), extra...))
		reg.MustRegister(g)
		return g
	}
	hist := func(name, help string, buckets []float64, extra ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name, Help: help, ConstLabels: cl, Buckets: buckets,
			NativeHistogramBucketFactor: nativeFactor, NativeHistogramMaxBucketNumber: 160,
		}, append(append([]string{}, pl...), extra...))
		reg.MustRegister(h)
		return h
	}
	m.clients = gauge("rdmaprobe_point_clients", "Clients the point launches.")
	m.attempted = gauge("rdmaprobe_point_attempted", "Clients of the point that have an outcome so far.")
	m.connected = gauge("rdmaprobe_point_connected", "Clients of the point connected so far.")
	m.failed = gauge("rdmaprobe_point_failed", "Clients of the point that failed, by outcome class.", "class")
	m.rate = gauge("rdmaprobe_point_connects_per_second", "Clients connected per second since the point's first outcome.")
	m.objects = gauge("rdmaprobe_server_objects", "RDMA objects the server holds, by type (qp, cq, mr, pd, srq, ctx).", "type")
	m.cpu = gauge("rdmaprobe_process_cpu_percent", "CPU of the point's processes, percent of one core, by role (server, clients-N).", "role", "host")
	m.rss = gauge("rdmaprobe_process_rss_bytes", "Resident memory of the point's processes, by role.", "role", "host")
	m.messages = gauge("rdmaprobe_traffic_messages", "Messages the traffic phase verified.")
	m.msgRate = gauge("rdmaprobe_traffic_messages_per_second", "Messages the traffic phase verified per second of its window.")
	m.bytes = gauge("rdmaprobe_traffic_bytes", "Payload bytes of the messages the traffic phase verified.")
	m.phases = hist("rdmaprobe_connect_phase_seconds", "Duration of each connect phase of the point's clients.", phaseBuckets, "phase")
	m.latency = hist("rdmaprobe_traffic_latency_seconds", "Round-trip time of the traffic phase's messages.", latencyBuckets)
	m.points = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rdmaprobe_points_total", Help: "Points finished, by whether they passed.", ConstLabels: cl}, []string{"passed"})
	reg.MustRegister(m.points)
	m.capacity = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rdmaprobe_capacity_clients",
		Help: "The run's verdict at its end, per design: capacity (by the run's criterion), max_connected, max_sustainable (with a traffic phase), performant (with traffic at three counts or more), first_failure (0: none).", ConstLabels: cl},
		[]string{"design", "figure"})
	reg.MustRegister(m.capacity)
	m.reg = reg
}

// Listen binds addr (HOST:PORT; port 0 picks one, Addr says which) and
// serves /metrics there until Close: nothing until Start gives the
// run's labels, then the run's metrics. Binding first lets a bad
// address fail before the run starts.
func Listen(addr string) (*Metrics, error) {
	m := &Metrics{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		reg := m.reg
		m.mu.Unlock()
		if reg == nil {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			return
		}
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}).ServeHTTP(w, r)
	})
	if err := m.listen(addr, h); err != nil {
		return nil, err
	}
	return m, nil
}

// Start creates the run's series, labelled l.
func (m *Metrics) Start(l Labels) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start(l)
}

func (m *Metrics) listen(addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	m.ln = ln
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	return nil
}

// Registry is the registry behind m.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reg
}

// Addr is the address the endpoint listens on; "" when not serving.
func (m *Metrics) Addr() string {
	if m == nil || m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// Close stops the endpoint after linger, so that a last scrape sees the
// final point, or at once when ctx ends first.
func (m *Metrics) Close(ctx context.Context, linger time.Duration) error {
	if m == nil || m.srv == nil {
		return nil
	}
	if linger > 0 {
		t := time.NewTimer(linger)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	err := m.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// PointStarts starts the series of the point of n clients, trial, of
// the server design named.
func (m *Metrics) PointStarts(design string, n, trial int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reg == nil {
		return
	}
	m.point = pointLabels(design, n, trial)
	m.started, m.seen = time.Time{}, map[string][]int{}
	m.clients.With(m.point).Set(float64(n))
	m.attempted.With(m.point).Set(0)
	m.connected.With(m.point).Set(0)
}

// Progress sets the point's counts so far, failed ones by outcome class,
// and adds the connect phases that ended since the last call (phases:
// cumulative counts in result.PhaseBounds' buckets). Generators that
// do not say leave failed and phases nil.
func (m *Metrics) Progress(clients, done, ok int, failed map[string]int, phases map[string][]int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.point == nil {
		return
	}
	if m.started.IsZero() && done > 0 {
		m.started = time.Now()
	}
	m.attempted.With(m.point).Set(float64(done))
	m.connected.With(m.point).Set(float64(ok))
	for class, n := range failed {
		m.failed.With(with(m.point, "class", class)).Set(float64(n))
	}
	for ph, counts := range phases {
		m.observePhases(ph, counts)
	}
	if s := time.Since(m.started).Seconds(); !m.started.IsZero() && s > 0 {
		m.rate.With(m.point).Set(float64(ok) / s)
	}
}

// Sample sets the point in progress's process CPU and memory (by role,
// this host's processes) and the device's RDMA objects from a reading
// just taken, so that they move while the point runs; PointEnds sets
// the point's final figures.
func (m *Metrics) Sample(s result.Sample) {
	m.atPoint(func(p prometheus.Labels) {
		m.setProcs(p, s.Procs)
		m.setObjects(p, s.RDMA)
	})
}

// atPoint calls f with the point in progress's labels, under the lock;
// not at all without a point in progress.
func (m *Metrics) atPoint(f func(p prometheus.Labels)) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.point != nil {
		f(m.point)
	}
}

// setProcs sets the CPU and memory of this host's processes, by role.
func (m *Metrics) setProcs(p prometheus.Labels, procs []result.ProcSample) {
	for _, ps := range procs {
		l := with(with(p, "role", ps.Role), "host", "")
		m.cpu.With(l).Set(ps.CPU)
		m.rss.With(l).Set(float64(ps.RSS))
	}
}

// setObjects sets the RDMA objects held, by type.
func (m *Metrics) setObjects(p prometheus.Labels, objs map[string]int) {
	for typ, c := range objs {
		m.objects.With(with(p, "type", typ)).Set(float64(c))
	}
}

// setTraffic sets a traffic phase's messages, bytes and their rate over
// sec seconds.
func (m *Metrics) setTraffic(p prometheus.Labels, messages, bytes int64, sec float64) {
	m.messages.With(p).Set(float64(messages))
	m.bytes.With(p).Set(float64(bytes))
	if sec > 0 {
		m.msgRate.With(p).Set(float64(messages) / sec)
	}
}

// Traffic sets the point in progress's traffic phase so far: messages
// completed in its window, their bytes, and their rate over sec, the
// time since the phase started.
func (m *Metrics) Traffic(messages, bytes int64, sec float64) {
	m.atPoint(func(p prometheus.Labels) { m.setTraffic(p, messages, bytes, sec) })
}

// PointEnds sets the point's figures from its record: the final counts,
// the outcome classes, the connect phases, the server's objects, the
// processes' CPU and memory, and the traffic phase.
func (m *Metrics) PointEnds(pt result.Point) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reg == nil {
		return
	}
	p := pointLabels(pt.Design, pt.Clients, pt.Trial)
	m.point = nil
	m.clients.With(p).Set(float64(pt.Clients))
	m.attempted.With(p).Set(float64(pt.Attempted))
	m.connected.With(p).Set(float64(pt.Connected))
	if pt.ConnectSec > 0 {
		m.rate.With(p).Set(float64(pt.ConnectedHere()) / pt.ConnectSec)
	}
	// Every class, zeros too, so that a query by class has a series.
	for _, class := range result.Outcomes {
		if class != result.OutcomeOK {
			m.failed.With(with(p, "class", class)).Set(float64(pt.Outcomes[class]))
		}
	}
	m.phases.DeletePartialMatch(p)
	for _, r := range pt.Records {
		for ph, us := range r.PhasesUS {
			m.phases.With(with(p, "phase", ph)).Observe(float64(us) / 1e6)
		}
	}
	objs := pt.Server.Resources
	if pt.Peak != nil && len(pt.Peak.Resources) > 0 {
		objs = pt.Peak.Resources
	}
	m.setObjects(p, objs)
	if n := len(pt.Samples); n > 0 {
		m.setProcs(p, pt.Samples[n-1].Procs)
	}
	// Generators on other hosts measure themselves; the collectors here
	// see only local processes.
	for _, h := range pt.Hosts {
		for _, u := range h.Usage {
			m.rss.With(with(with(p, "role", "clients-"+strconv.Itoa(u.Generator)), "host", h.Host)).Set(float64(u.RSS))
		}
	}
	if t := pt.Traffic; t != nil {
		m.setTraffic(p, t.Messages, t.Bytes, t.DurationSec)
	}
	lat := m.latency.With(p)
	for _, r := range pt.Records {
		for _, us := range r.RTTsUS {
			lat.Observe(us / 1e6)
		}
	}
	m.points.WithLabelValues(strconv.FormatBool(pt.Passed)).Inc()
}

// RunEnds sets the run's verdict (result.Run.Verdict, analysis.Conclude)
// as rdmaprobe_capacity_clients, once the run is saved for the last time.
func (m *Metrics) RunEnds(v *result.Verdict) {
	if m == nil || v == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reg == nil {
		return
	}
	for _, d := range v.Designs {
		set := func(figure string, n int) {
			m.capacity.WithLabelValues(d.Design, figure).Set(float64(n))
		}
		set("capacity", d.Capacity)
		set("max_connected", d.MaxConnected)
		set("first_failure", d.FirstFail)
		if d.MaxSustainable >= 0 {
			set("max_sustainable", d.MaxSustainable)
		}
		if d.Bend != nil {
			set("performant", d.Bend.Performant)
		}
	}
}

// pointLabels are a point's labels: its count, trial and design, so that
// the designs of one run measured at one count stay apart.
func pointLabels(design string, n, trial int) prometheus.Labels {
	return prometheus.Labels{"point": strconv.Itoa(n), "trial": strconv.Itoa(trial), "design": design}
}

func with(l prometheus.Labels, k, v string) prometheus.Labels {
	c := make(prometheus.Labels, len(l)+1)
	for a, b := range l {
		c[a] = b
	}
	c[k] = v
	return c
}

// observePhases adds the clients of phase ph that counts has beyond what
// was seen, each at its bucket's upper bound: the classic buckets come
// out exact, the sum an upper bound until the point's end replaces them
// with the records' own durations.
func (m *Metrics) observePhases(ph string, counts []int) {
	seen := m.seen[ph]
	if seen == nil {
		seen = make([]int, len(counts))
		m.seen[ph] = seen
	}
	o := m.phases.With(with(m.point, "phase", ph))
	for i := range min(len(counts), len(seen)) {
		v := 2 * phaseBuckets[len(phaseBuckets)-1]
		if i < len(phaseBuckets) {
			v = phaseBuckets[i]
		}
		for ; seen[i] < counts[i]; seen[i]++ {
			o.Observe(v)
		}
	}
}
