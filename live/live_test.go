package live

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// committedSim is a committed sim run with a traffic phase: real
// records, samples and round trips to feed the registry.
const committedSim = "../results/20261126T231340Z-sim/run.json"

// fed is a registry fed every point of the committed sim run, as a
// run's callbacks feed it.
func fed(t *testing.T) (*Metrics, *result.Run) {
	t.Helper()
	run, err := result.Load(committedSim)
	if err != nil {
		t.Fatal(err)
	}
	m := NewRegistry(Labels{RunID: "r1", Backend: run.Backend.Name, Command: run.Mode})
	for _, pt := range run.Points {
		m.PointStarts(pt.Design, pt.Clients, pt.Trial)
		m.Progress(pt.Clients, pt.Attempted/2, pt.Connected/2, nil, nil)
		m.PointEnds(pt)
	}
	v := analysis.Conclude(run)
	m.RunEnds(&v)
	return m, run
}

func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestRegistryHoldsEveryPoint(t *testing.T) {
	m, run := fed(t)
	fams := gather(t, m)
	for _, name := range MetricNames {
		if fams[name] == nil {
			t.Errorf("%s not gathered after a run with a traffic phase", name)
		}
	}
	for _, pt := range run.Points {
		var got float64 = -1
		for _, s := range fams["rdmaprobe_point_connected"].GetMetric() {
			if label(s, "point") == itoa(pt.Clients) && label(s, "run_id") == "r1" && label(s, "backend") == "sim" {
				got = s.GetGauge().GetValue()
			}
		}
		if got != float64(pt.Connected) {
			t.Errorf("point %d: connected %v, run.json says %d", pt.Clients, got, pt.Connected)
		}
	}
	h := fams["rdmaprobe_traffic_latency_seconds"]
	var n uint64
	for _, s := range h.GetMetric() {
		n += s.GetHistogram().GetSampleCount()
		if len(s.GetHistogram().GetBucket()) == 0 {
			t.Error("latency histogram without classic buckets")
		}
	}
	want := 0
	for _, pt := range run.Points {
		for _, r := range pt.Records {
			want += len(r.RTTsUS)
		}
	}
	if n != uint64(want) || want == 0 {
		t.Errorf("latency histogram counts %d round trips, the records hold %d", n, want)
	}
}

// TestDashboardQueriesExist parses the Grafana dashboard and checks that
// every metric its queries name is one the registry exposes.
func TestDashboardQueriesExist(t *testing.T) {
	b, err := os.ReadFile("../grafana/rdmaprobe.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title, Description string
			FieldConfig        struct{ Defaults struct{ Unit string } }
			Targets            []struct{ Expr, LegendFormat string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	m, _ := fed(t)
	fams := gather(t, m)
	name := regexp.MustCompile(`rdmaprobe_[a-z_]+`)
	queried := 0
	by := regexp.MustCompile(`(?:sum|avg|max|min) by \(([^)]*)\)`)
	legend := regexp.MustCompile(`\{\{(\w+)\}\}`)
	for _, p := range d.Panels {
		if p.Description == "" || len(p.Targets) == 0 || p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q: no description, no query or no unit", p.Title)
		}
		// One unit a panel: its metrics measure one kind of thing.
		kinds := map[string]bool{}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				kinds[unitOf(n)] = true
			}
			// An aggregation keeps design, and every label the legend
			// prints.
			for _, m := range by.FindAllStringSubmatch(tg.Expr, -1) {
				kept := strings.Split(strings.ReplaceAll(m[1], " ", ""), ",")
				need := []string{"design"}
				for _, l := range legend.FindAllStringSubmatch(tg.LegendFormat, -1) {
					need = append(need, l[1])
				}
				for _, l := range need {
					if !slices.Contains(kept, l) {
						t.Errorf("panel %q: %q drops %s", p.Title, tg.Expr, l)
					}
				}
			}
		}
		if len(kinds) != 1 {
			t.Errorf("panel %q mixes %v on one axis", p.Title, kinds)
		}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				queried++
				base := n
				if fams[n] == nil {
					for _, suf := range []string{"_bucket", "_sum", "_count"} {
						base = strings.TrimSuffix(base, suf)
					}
					if f := fams[base]; f == nil || (base != n && f.GetType() != dto.MetricType_HISTOGRAM) {
						t.Errorf("panel %q queries %s, which the registry does not expose", p.Title, n)
					}
				}
			}
		}
	}
	if queried < len(d.Panels) {
		t.Errorf("%d metric names in %d panels", queried, len(d.Panels))
	}
	// The dashboard covers every series but the points counter and the
	// verdict, which are counts at the run's end, not series in time.
	for _, n := range MetricNames {
		if n != "rdmaprobe_points_total" && n != "rdmaprobe_capacity_clients" && !bytes.Contains(b, []byte(n)) {
			t.Errorf("dashboard does not show %s", n)
		}
	}
}

func TestEventsLines(t *testing.T) {
	run, err := result.Load(committedSim)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	e := NewEvents(&buf)
	e.RunStarts("r1", run)
	e.PointStarts(run.Points[0].Design, run.Points[0].Clients, 1)
	e.PointEnds(run.Points[0])
	e.RunEnds(run, "x/run.json", nil)
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var ev Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if ev.TS.IsZero() {
			t.Errorf("%s without ts", ev.Type)
		}
		if ev.Point != nil && (ev.Point.Records != nil || ev.Point.Samples != nil) {
			t.Error("point_end carries records or samples")
		}
		types = append(types, ev.Type)
	}
	if want := []string{EventRunStart, EventPointStart, EventPointEnd, EventRunEnd}; !slices.Equal(types, want) {
		t.Errorf("types %v, want %v", types, want)
	}
	if run.Points[0].Records == nil {
		t.Error("PointEnds changed the caller's point")
	}
}

// TestOffIsNil: every call on the views that are off does nothing.
func TestOffIsNil(t *testing.T) {
	var m *Metrics
	var e *Events
	m.Start(Labels{})
	m.PointStarts("per-client", 1, 1)
	m.Progress(1, 1, 1, map[string]int{"timeout": 1}, nil)
	m.PointEnds(result.Point{})
	e.RunStarts("", nil)
	e.PointStarts("per-client", 1, 1)
	e.Progress(1, 1, nil)
	e.PointEnds(result.Point{})
	e.Decision(1, "")
	e.Note("")
	e.RunEnds(nil, "", nil)
	if m.Addr() != "" || m.Registry() != nil || m.Close(context.Background(), 0) != nil || e.Err() != nil {
		t.Error("a nil view answered")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A remote generator's memory is labelled with its host.
func TestRemoteGeneratorHost(t *testing.T) {
	m := NewRegistry(Labels{RunID: "r1", Backend: "sim", Command: "ramp"})
	m.PointStarts("per-client", 4, 1)
	m.PointEnds(result.Point{Clients: 4, Trial: 1, Hosts: []result.HostPoint{
		{Host: "node7", Generators: []int{1}, Usage: []result.GeneratorUsage{{Generator: 1, RSS: 12345}}}}})
	for _, s := range gather(t, m)["rdmaprobe_process_rss_bytes"].GetMetric() {
		if label(s, "host") == "node7" && label(s, "role") == "clients-1" && s.GetGauge().GetValue() == 12345 {
			return
		}
	}
	t.Error("no rdmaprobe_process_rss_bytes{host=\"node7\",role=\"clients-1\"} 12345")
}

// Phase counts streamed during a point fill the classic buckets once
// each, however often the same cumulative counts arrive.
func TestProgressPhasesStream(t *testing.T) {
	m := NewRegistry(Labels{RunID: "r1", Backend: "sim", Command: "ramp"})
	m.PointStarts("per-client", 10, 1)
	counts := make([]int, len(result.PhaseBounds)+1)
	counts[5] = 3
	m.Progress(10, 3, 3, nil, map[string][]int{"tls": slices.Clone(counts)})
	m.Progress(10, 3, 3, nil, map[string][]int{"tls": slices.Clone(counts)})
	counts[5], counts[len(counts)-1] = 4, 1
	m.Progress(10, 5, 5, nil, map[string][]int{"tls": counts})
	var h *dto.Histogram
	for _, s := range gather(t, m)["rdmaprobe_connect_phase_seconds"].GetMetric() {
		if label(s, "phase") == "tls" && label(s, "point") == "10" {
			h = s.GetHistogram()
		}
	}
	if h == nil || h.GetSampleCount() != 5 {
		t.Fatalf("tls histogram %v, want 5 clients", h)
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= result.PhaseBounds[5] {
			want = 4
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%g: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

// A reading during the point sets its processes' CPU and memory and the
// device's objects at once; outside a point it is dropped.
func TestSampleDuringPoint(t *testing.T) {
	m := NewRegistry(Labels{RunID: "r1", Backend: "vm", Command: "ramp"})
	reading := result.Sample{RDMA: map[string]int{"qp": 40}, Procs: []result.ProcSample{{Role: "server", CPU: 55, RSS: 7 << 20}}}
	m.Sample(reading) // no point yet
	if n := len(gather(t, m)["rdmaprobe_process_rss_bytes"].GetMetric()); n != 0 {
		t.Fatalf("a reading outside a point made %d series", n)
	}
	m.PointStarts("per-client", 100, 1)
	m.Sample(reading)
	mfs := gather(t, m)
	rss := mfs["rdmaprobe_process_rss_bytes"].GetMetric()
	if len(rss) != 1 || label(rss[0], "point") != "100" || label(rss[0], "role") != "server" || rss[0].GetGauge().GetValue() != 7<<20 {
		t.Errorf("rss series %v", rss)
	}
	if cpu := mfs["rdmaprobe_process_cpu_percent"].GetMetric(); len(cpu) != 1 || cpu[0].GetGauge().GetValue() != 55 {
		t.Errorf("cpu series %v", cpu)
	}
	objs := mfs["rdmaprobe_server_objects"].GetMetric()
	if len(objs) != 1 || label(objs[0], "type") != "qp" || objs[0].GetGauge().GetValue() != 40 {
		t.Errorf("objects series %v", objs)
	}
}

// The traffic phase so far sets the point's messages, bytes and rate.
func TestTrafficDuringPoint(t *testing.T) {
	m := NewRegistry(Labels{RunID: "r1", Backend: "sim", Command: "ramp"})
	m.Traffic(10, 640, 1) // no point yet: dropped
	m.PointStarts("per-client", 8, 1)
	m.Traffic(3000, 3000*64, 1.5)
	mfs := gather(t, m)
	for name, want := range map[string]float64{"rdmaprobe_traffic_messages": 3000, "rdmaprobe_traffic_bytes": 3000 * 64, "rdmaprobe_traffic_messages_per_second": 2000} {
		ms := mfs[name].GetMetric()
		if len(ms) != 1 || label(ms[0], "point") != "8" || ms[0].GetGauge().GetValue() != want {
			t.Errorf("%s: %v, want one series of point 8 at %g", name, ms, want)
		}
	}
}

// Two designs measured at one count are two series, not one overwritten,
// and their events say which design each is.
func TestDesignsAtOneCountStayApart(t *testing.T) {
	m := NewRegistry(Labels{RunID: "r2", Backend: "sim", Command: "srq,ud"})
	var buf bytes.Buffer
	e := NewEvents(&buf)
	for i, d := range []string{"srq", "ud"} {
		m.PointStarts(d, 100, 1)
		e.PointStarts(d, 100, 1)
		pt := result.Point{Clients: 100, Trial: 1, Design: d, Attempted: 100, Connected: 90 + i}
		m.PointEnds(pt)
		e.PointEnds(pt)
	}
	got := map[string]float64{}
	for _, s := range gather(t, m)["rdmaprobe_point_connected"].GetMetric() {
		got[label(s, "design")] = s.GetGauge().GetValue()
	}
	if got["srq"] != 90 || got["ud"] != 91 || len(got) != 2 {
		t.Errorf("connected by design: %v, want srq 90 and ud 91", got)
	}
	var designs []string
	dec := json.NewDecoder(&buf)
	for {
		var ev Event
		if err := dec.Decode(&ev); err != nil {
			break
		}
		designs = append(designs, ev.Type+":"+ev.Design)
	}
	if want := "point_start:srq point_end:srq point_start:ud point_end:ud"; strings.Join(designs, " ") != want {
		t.Errorf("events %q, want %q", strings.Join(designs, " "), want)
	}
}

// unitOf is what a metric measures, by its name's suffix: the kinds a
// dashboard panel must not mix on one axis.
func unitOf(metric string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		metric = strings.TrimSuffix(metric, suf)
	}
	for _, u := range []string{"_bytes", "_per_second", "_seconds", "_percent"} {
		if strings.HasSuffix(metric, u) {
			return u
		}
	}
	return "count"
}
