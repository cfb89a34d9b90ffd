package live

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// ServerSource is what a standalone server's metrics are read from at
// each scrape: its counters (ok is false until it exists) and, where
// the fabric counts them, the objects it holds now (nil otherwise).
type ServerSource struct {
	Stats func() (st result.ServerStats, ok bool)
	InUse func() map[string]int
}

// ServeServer serves a standalone server's admission counters and the
// RDMA objects it holds at /metrics on addr until Close. They are read
// when scraped, so the server pays nothing between scrapes.
func ServeServer(addr string, src ServerSource) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(serverCollector{src})
	m := &Metrics{reg: reg}
	if err := m.listen(addr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})); err != nil {
		return nil, err
	}
	return m, nil
}

// ServeMetricNames are the names ServeServer exposes.
var ServeMetricNames = []string{
	"rdmaprobe_serve_accepted_total", "rdmaprobe_serve_connected_total", "rdmaprobe_serve_refused_total",
	"rdmaprobe_serve_released_total", "rdmaprobe_serve_failed_total", "rdmaprobe_serve_peak_active",
	"rdmaprobe_serve_objects_peak", "rdmaprobe_serve_objects",
}

var (
	serveAccepted  = prometheus.NewDesc("rdmaprobe_serve_accepted_total", "Clients admitted.", nil, nil)
	serveConnected = prometheus.NewDesc("rdmaprobe_serve_connected_total", "Clients that reached RTS.", nil, nil)
	serveRefused   = prometheus.NewDesc("rdmaprobe_serve_refused_total", "Clients refused at capacity.", nil, nil)
	serveReleased  = prometheus.NewDesc("rdmaprobe_serve_released_total", "Clients whose resources were freed.", nil, nil)
	serveFailed    = prometheus.NewDesc("rdmaprobe_serve_failed_total", "Clients that failed, by outcome class.", []string{"class"}, nil)
	servePeak      = prometheus.NewDesc("rdmaprobe_serve_peak_active", "Most clients held at once.", nil, nil)
	serveObjsPeak  = prometheus.NewDesc("rdmaprobe_serve_objects_peak", "RDMA objects held at the peak, by type.", []string{"type"}, nil)
	serveObjs      = prometheus.NewDesc("rdmaprobe_serve_objects", "RDMA objects held now, by type (fabrics that count them).", []string{"type"}, nil)
)

type serverCollector struct{ src ServerSource }

func (serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{serveAccepted, serveConnected, serveRefused, serveReleased, serveFailed, servePeak, serveObjsPeak, serveObjs} {
		ch <- d
	}
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.src.Stats()
	if !ok {
		return
	}
	counter := func(d *prometheus.Desc, v int, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge := func(d *prometheus.Desc, v int, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), l...)
	}
	counter(serveAccepted, st.Accepted)
	counter(serveConnected, st.Connected)
	counter(serveRefused, st.Refused)
	counter(serveReleased, st.Released)
	gauge(servePeak, st.PeakActive)
	for class, n := range st.Failures {
		counter(serveFailed, n, class)
	}
	for typ, n := range st.Resources {
		gauge(serveObjsPeak, n, typ)
	}
	if c.src.InUse != nil {
		for typ, n := range c.src.InUse() {
			gauge(serveObjs, n, typ)
		}
	}
}
