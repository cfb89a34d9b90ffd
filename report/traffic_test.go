package report

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

// TestTrafficReferenceBeforeAfter: perftest measured before and after
// the points is shown both times, each with rdmaprobe's ratio to it; a
// run measured once (or before When was recorded) reads as it did.
func TestTrafficReferenceBeforeAfter(t *testing.T) {
	lat := func(when string, typ float64) result.Reference {
		return result.Reference{Tool: "ib_send_lat", Command: "ib_send_lat -s 4096", When: when,
			Figures: map[string]float64{"t_typical": typ, "99%": 2 * typ}}
	}
	bw := func(when string, rate float64) result.Reference {
		return result.Reference{Tool: "ib_send_bw", Command: "ib_send_bw -s 4096", When: when,
			Figures: map[string]float64{"msg/s": rate, "BW average": rate * 4096 / 1e6}}
	}
	run := &result.Run{Points: []result.Point{
		{Clients: 1, Traffic: &result.Traffic{Messages: 100, MsgRate: 10000, Latency: result.LatencyUS{P50: 60}}},
		{Clients: 10, Traffic: &result.Traffic{Messages: 100, MsgRate: 13000, Latency: result.LatencyUS{P50: 600}}},
	}}
	run.Environment.DataPath = []result.Reference{lat("before", 30), bw("before", 26000), lat("after", 40),
		{Tool: "ib_send_bw", Command: "ib_send_bw -s 4096", When: "after", Error: "timed out"}}
	got := trafficReference(run)
	for _, want := range []string{
		"t_typical 30us before the points and 40us after the points",
		"p50 60us, 2.00× and 1.50×; t_typical is half perftest's round trip, so 2× matches it",
		"ib_send_bw failed after the points: timed out",
		"`ib_send_bw -s 4096`: 26000 msg/s, 106.5 MB/s (rdmaprobe's peak: 13000 msg/s at 10 clients, 50%)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	run.Environment.DataPath = []result.Reference{lat("", 30)}
	if got, want := trafficReference(run), "perftest on the same device: `ib_send_lat -s 4096`: t_typical 30us, p99 60us (rdmaprobe at 1 client: p50 60us, 2.00×; t_typical is half perftest's round trip, so 2× matches it)."; got != want {
		t.Errorf("measured once:\n got %s\nwant %s", got, want)
	}
	// ib_write_lat's t_typical is one way, with no acknowledgement; a
	// 1-client peak is "at 1 client".
	write := lat("", 30)
	write.Tool, write.Command = "ib_write_lat", "ib_write_lat -s 4096"
	wbw := bw("", 26000)
	wbw.Tool, wbw.Command = "ib_write_bw", "ib_write_bw -s 4096"
	run.Environment.DataPath = []result.Reference{write, wbw}
	got = trafficReference(run)
	for _, want := range []string{"p50 60us, 2.00×; t_typical is a WRITE's one way; rdmaprobe's latency waits for its acknowledgement too)",
		"(rdmaprobe's peak: 13000 msg/s at 10 clients, 50%)"} {
		if !strings.Contains(got, want) {
			t.Errorf("ib_write_*: missing %q in %s", want, got)
		}
	}
	one := &result.Run{Points: run.Points[:1], Environment: run.Environment}
	if got := trafficReference(one); !strings.Contains(got, "(rdmaprobe's peak: 10000 msg/s at 1 client, 38.5%)") {
		t.Errorf("1-client peak: %s", got)
	}
	// ib_read_lat's t_typical is a whole READ.
	read := lat("", 30)
	read.Tool, read.Command = "ib_read_lat", "ib_read_lat -s 4096"
	run.Environment.DataPath = []result.Reference{read}
	if got := trafficReference(run); !strings.Contains(got, "p50 60us, 2.00×; t_typical is a whole READ, so 1× matches it)") {
		t.Errorf("ib_read_lat: %s", got)
	}
	// Without a 1-client point there is nothing like ib_send_lat to set
	// beside it: no ratio.
	run.Environment.DataPath = []result.Reference{lat("", 30)}
	run.Points = run.Points[1:]
	if got, want := trafficReference(run), "perftest on the same device: `ib_send_lat -s 4096`: t_typical 30us, p99 60us (rdmaprobe at 10 clients: p50 600us; only a 1-client point compares with it)."; got != want {
		t.Errorf("smallest count 10:\n got %s\nwant %s", got, want)
	}
}

// TestTrafficReferenceWhere: each reference names where it ran and a
// cross-link one is set against the cross-link traffic; a --vm-peer run
// saved before references said where (in one guest) gets no ratio.
func TestTrafficReferenceWhere(t *testing.T) {
	const across = "across the link: client in the generators' guest (169.254.77.2), server in the server's guest (169.254.77.1), rxe2"
	bw := result.Reference{Tool: "ib_send_bw", Command: "ib_send_bw -s 4096 169.254.77.1", Where: across,
		Figures: map[string]float64{"msg/s": 5000, "BW average": 20.48}}
	run := &result.Run{Backend: result.Backend{Name: "vm"}, Hosts: []result.Host{{Name: "peer"}},
		Points: []result.Point{{Clients: 100, Traffic: &result.Traffic{Messages: 100, MsgRate: 2500}}}}
	run.Environment.DataPath = []result.Reference{bw}
	if got, want := trafficReference(run), "perftest at the traffic's message size: `ib_send_bw -s 4096 169.254.77.1` "+across+
		": 5000 msg/s, 20.48 MB/s (rdmaprobe's peak: 2500 msg/s at 100 clients, 50%)."; got != want {
		t.Errorf("across the link:\n got %s\nwant %s", got, want)
	}
	bw.Where = ""
	run.Environment.DataPath = []result.Reference{bw}
	got := trafficReference(run)
	if !strings.Contains(got, "in one guest, not across the link the traffic crossed: 5000 msg/s") ||
		!strings.Contains(got, "no ratio") || strings.Contains(got, "50%") {
		t.Errorf("an old --vm-peer run's in-guest reference: %s", got)
	}
	run.Environment.Reference = &result.Reference{Tool: "ibv_rc_pingpong", Command: "ibv_rc_pingpong", Where: across,
		Figures: map[string]float64{"usec/iter": 90}}
	m := &Model{}
	m.env(run)
	if !strings.HasSuffix(m.Reference, across) {
		t.Errorf("environment reference %q does not say where it ran", m.Reference)
	}
}

// TestTrafficReferenceHosts: with --hosts on the verbs backend each
// generator host's reference names its path, a host without the tool is
// said, and the ratio is given only when the traffic crossed that one
// path (one generator host).
func TestTrafficReferenceHosts(t *testing.T) {
	const where = "server host srv ↔ generator host h1"
	bw := result.Reference{Tool: "ib_send_bw", Command: "ib_send_bw -F -x 3 -p 18516 -s 4096 -n 5000 10.0.0.1", Where: where,
		Figures: map[string]float64{"msg/s": 5000, "BW average": 20.48}}
	absent := result.Reference{Tool: "ib_send_bw", Where: "server host srv ↔ generator host h2", Absent: true,
		Error: "h2 has no ib_send_bw: no reference across that path"}
	run := &result.Run{Backend: result.Backend{Name: "verbs"}, Hosts: []result.Host{{Name: "h1"}},
		Points: []result.Point{{Clients: 100, Traffic: &result.Traffic{Messages: 100, MsgRate: 2500}}}}
	run.Environment.DataPath = []result.Reference{bw}
	if got, want := trafficReference(run), "perftest at the traffic's message size: `"+bw.Command+"` "+where+
		": 5000 msg/s, 20.48 MB/s (rdmaprobe's peak: 2500 msg/s at 100 clients, 50%)."; got != want {
		t.Errorf("one generator host:\n got %s\nwant %s", got, want)
	}
	run.Hosts = append(run.Hosts, result.Host{Name: "h2"})
	run.Environment.DataPath = []result.Reference{bw, absent}
	got := trafficReference(run)
	if !strings.Contains(got, where+": 5000 msg/s") || strings.Contains(got, "50%") ||
		!strings.Contains(got, "no ratio: rdmaprobe's traffic is the sum over 2 generator hosts") ||
		!strings.Contains(got, "; h2 has no ib_send_bw: no reference across that path.") {
		t.Errorf("two generator hosts, one without ib_send_bw: %s", got)
	}
}

// TestTrafficReferenceInTurns: each 1-client point is set against the
// latency tool's reading taken just before it, with the median ratio;
// a failed reading is said, points of more clients are left out, and a
// run without such readings reads as before.
func TestTrafficReferenceInTurns(t *testing.T) {
	ref := func(typ float64, err string) *result.Reference {
		return &result.Reference{Tool: "ib_send_lat", Command: "ib_send_lat -s 4096", When: result.ReferencePoint,
			Figures: map[string]float64{"t_typical": typ}, Error: err}
	}
	pt := func(n int, p50 float64, r *result.Reference) result.Point {
		return result.Point{Clients: n, LatencyReference: r,
			Traffic: &result.Traffic{Messages: 100, MsgRate: 10000, Latency: result.LatencyUS{P50: p50}}}
	}
	run := &result.Run{Points: []result.Point{pt(1, 60, ref(30, "")), pt(1, 66, ref(30, "")), pt(1, 58, ref(31, "")),
		pt(1, 70, ref(0, "timed out")), pt(10, 600, nil)}}
	run.Environment.DataPath = []result.Reference{{Tool: "ib_send_lat", Command: "ib_send_lat -s 4096", When: "before",
		Figures: map[string]float64{"t_typical": 30}}}
	got := trafficReference(run)
	want := " In turns, each 1-client point against ib_send_lat run just before it: p50 60us against t_typical 30us (2.00×); " +
		"p50 66us against t_typical 30us (2.20×); p50 58us against t_typical 31us (1.87×); " +
		"p50 70us without its reading (ib_send_lat failed); median 2.00×."
	if !strings.HasSuffix(got, want) {
		t.Errorf("in turns:\n got %s\nwant suffix %s", got, want)
	}
	run.Points = []result.Point{pt(1, 60, nil), pt(10, 600, nil)}
	if got := trafficReference(run); strings.Contains(got, "In turns") {
		t.Errorf("no readings in turns, yet: %s", got)
	}
	// One reading: its ratio, no median.
	run.Points = []result.Point{pt(1, 60, ref(30, ""))}
	if got := trafficReference(run); !strings.HasSuffix(got, "just before it: p50 60us against t_typical 30us (2.00×).") {
		t.Errorf("one reading: %s", got)
	}
}

// The generator's and the server's CPU columns say how much of it went
// to polling empty CQs when the process counted it, and read as before
// otherwise.
func TestTrafficRowsGeneratorSpin(t *testing.T) {
	run := &result.Run{Points: []result.Point{
		{Clients: 1, Traffic: &result.Traffic{Messages: 100, GeneratorCPU: 0.99, GeneratorCores: 1, GeneratorSpin: 0.45,
			ServerCPU: 1.01, ServerSpin: 0.93}},
		{Clients: 10, Traffic: &result.Traffic{Messages: 100, GeneratorCPU: 0.5, GeneratorCores: 2, GeneratorSys: 0.2, ServerCPU: 0.25, ServerSys: 0.1, HostCPU: 1.92, HostSoftirq: 0.41}},
	}}
	rows := trafficRows(run)
	if len(rows) != 2 || rows[0].ServerCPU != "1.01 (0.93 polling empty CQs)" || rows[1].ServerCPU != "0.25 (0.1 in the kernel)" || rows[1].GenCPU != "0.5 of 2 (0.2 in the kernel)" || rows[0].HostCPU != "–" || rows[1].HostCPU != "1.92 (0.41 softirq)" {
		t.Errorf("server CPU %q, %q", rows[0].ServerCPU, rows[1].ServerCPU)
	}
	if len(rows) != 2 || rows[0].GenCPU != "0.99 of 1 (0.45 polling empty CQs)" || rows[1].GenCPU != "0.5 of 2 (0.2 in the kernel)" {
		t.Errorf("generator CPU %q", func() (s []string) {
			for _, r := range rows {
				s = append(s, r.GenCPU)
			}
			return
		}())
	}
}

// A busy-polled run's note says what its CPU columns hold.
func TestTrafficNoteBusyPoll(t *testing.T) {
	run := &result.Run{}
	run.Config.PayloadBytes = 4096
	run.Config.Traffic = &result.TrafficSetup{DurationSec: 10, Op: "send", Depth: 1, MsgTimeoutSec: 30}
	if got := trafficNote(run); strings.Contains(got, "busy-polled") || !strings.Contains(got, "closed loop, 1 outstanding per client") {
		t.Errorf("without --busy-poll: %s", got)
	}
	run.Config.Traffic.BusyPollUS = 2000
	got := trafficNote(run)
	for _, want := range []string{"for up to 2000us after each completion", "the CPU columns include the polling", "polling empty CQs"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %s", want, got)
		}
	}
}

// TestCompareTrafficReference: a comparison lists each run's data path
// against perftest, with its ratios in turns, under the run's label; a
// run without perftest's figures is left out.
func TestCompareTrafficReference(t *testing.T) {
	mk := func(p50, typ float64) *result.Run {
		r := &result.Run{Backend: result.Backend{Name: "vm"}, Points: []result.Point{{Clients: 1,
			LatencyReference: &result.Reference{Tool: "ib_send_lat", When: result.ReferencePoint, Figures: map[string]float64{"t_typical": typ}},
			Traffic:          &result.Traffic{Messages: 100, MsgRate: 10000, Latency: result.LatencyUS{P50: p50}}}}}
		r.Environment.DataPath = []result.Reference{{Tool: "ib_send_lat", Command: "ib_send_lat -s 4096", When: "before",
			Figures: map[string]float64{"t_typical": typ}}}
		return r
	}
	bare := mk(60, 30)
	bare.Environment.DataPath, bare.Points[0].LatencyReference = nil, nil
	c := NewComparison([]*result.Run{mk(63, 30), mk(60, 30), bare})
	if len(c.Refs) != 2 || c.Refs[0].Label != "vm" || c.Refs[1].Label != "vm #2" {
		t.Fatalf("refs %+v", c.Refs)
	}
	md, err := c.Document().Markdown()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## The data path against perftest",
		"- **vm**: perftest on the same device: `ib_send_lat -s 4096`: t_typical 30us",
		"just before it: p50 63us against t_typical 30us (2.10×).",
		"- **vm #2**: perftest on the same device", "p50 60us against t_typical 30us (2.00×)."} {
		if !strings.Contains(string(md), want) {
			t.Errorf("missing %q in\n%s", want, md)
		}
	}
	html, err := c.Document().HTML()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<h2>The data path against perftest</h2>") || !strings.Contains(string(html), "<li><b>vm #2</b>: perftest") {
		t.Errorf("HTML lacks the section:\n%s", html)
	}
}

// The connect storm's round trips are labelled as such and come after
// the data path, and the answer quotes the data path's latency only; a
// point with unmeasured clients says so in its row and names them.
func TestConnectStormRoundTripsAfterDataPath(t *testing.T) {
	run := &result.Run{Mode: "ramp", Config: result.Config{Threshold: 1, SLO: "errors=0",
		Traffic: &result.TrafficSetup{DurationSec: 1, MaxDurationSec: 30, Op: "send", Depth: 1}},
		Points: []result.Point{{Clients: 300, Attempted: 300, Connected: 300, SuccessRate: 1,
			RTT: result.Percentiles{N: 900, P50: 122797, P95: 150000, P99: 160000, Max: 170000},
			Traffic: &result.Traffic{Op: "send", Clients: 300, Messages: 5000, MsgRate: 2500, DurationSec: 2.4, MinDurationSec: 1,
				Unmeasured: 12, UnmeasuredIDs: []int{3, 7}, Latency: result.LatencyUS{P50: 17500, P99: 40000},
				SLO: []slo.Verdict{{SLO: "errors=0", Passed: true, Text: "errors 0 = 0"},
					{SLO: "every client measured", Text: "not measured: 12 of 300 clients completed no message"}}}}}}
	m := NewModel(run)
	md, err := Markdown(m)
	if err != nil {
		t.Fatal(err)
	}
	s := string(md)
	data, storm := strings.Index(s, "## Data path with N held"), strings.Index(s, "## Round trips during the connect storm (µs)")
	if data < 0 || storm < data || strings.Contains(s, "Message round trip") {
		t.Errorf("data path at %d, connect storm at %d:\n%s", data, storm, s)
	}
	answer := s[:strings.Index(s, "## Environment")]
	if !strings.Contains(answer, "latency p50 17.5ms") || strings.Contains(answer, "122797") || strings.Contains(answer, "122.8") {
		t.Errorf("the answer must quote the data path's latency only:\n%s", answer)
	}
	for _, want := range []string{"| 2.4      | 12         |", "❌ not measured: 12 of 300 clients completed no message",
		"300 clients: the window extended from its minimum of 1 s to 2.4 s.",
		"❌ 300 clients: not measured: 12 of 300 clients completed no message inside the 2.4 s window (clients 3, 7, … (the first 2 of 12))"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
}

// TestTrafficLineReference: a point with perftest's reading taken just
// before it says its p50's ratio to it on its traffic line; a failed
// reading, or none, adds nothing.
func TestTrafficLineReference(t *testing.T) {
	pt := result.Point{Clients: 1, Traffic: &result.Traffic{Op: "send", MsgBytes: 4096, Depth: 1, DurationSec: 5,
		Messages: 100, MsgRate: 16000, Latency: result.LatencyUS{P50: 61.2, P99: 300, Max: 900}}}
	if got := TrafficLine(pt); strings.Contains(got, "read just before") {
		t.Errorf("no reading: %s", got)
	}
	pt.LatencyReference = &result.Reference{Tool: "ib_send_lat", Figures: map[string]float64{"t_typical": 30.6}, When: result.ReferencePoint}
	if got, want := TrafficLine(pt), "latency p50 61.2us p99 300us max 900us; per client 0..0 msg/s; p50 2.00 × ib_send_lat's t_typical 30.6us, read just before"; !strings.Contains(got, want) {
		t.Errorf("got %s\nwant it to contain %s", got, want)
	}
	pt.LatencyReference.Error = "timed out"
	if got := TrafficLine(pt); strings.Contains(got, "read just before") {
		t.Errorf("failed reading: %s", got)
	}
}

// The rate plot marks the performant-client count: a line at it, up to
// the peak; a run with no bend stated has none.
func TestRatePlotMarksPerformant(t *testing.T) {
	run := &result.Run{Config: result.Config{Traffic: &result.TrafficSetup{DurationSec: 1}, Threshold: 1}}
	for _, c := range []struct {
		n    int
		rate float64
	}{{15, 30000}, {30, 40000}, {60, 42000}, {120, 8000}} {
		run.Points = append(run.Points, result.Point{Clients: c.n, Attempted: c.n, Connected: c.n, Passed: true,
			Traffic: &result.Traffic{MsgRate: c.rate, Messages: int64(c.rate), DurationSec: 1}})
	}
	marked := func(r *result.Run) bool {
		for _, p := range trafficFigures(r) {
			if p.Name == "throughput" {
				return strings.Contains(string(p.SVG), "performant: 60")
			}
		}
		t.Fatal("no throughput plot")
		return false
	}
	if !marked(run) {
		t.Error("the rate plot does not mark performant 60")
	}
	run.Points = run.Points[:2]
	if marked(run) {
		t.Error("two counts marked a performant count")
	}
}
