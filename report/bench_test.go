package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// benchRun is a small bench run: serially the full connect costs 1.25 ×
// its parts and runs at 64% of the TLS rate (both targets met); with 8 in
// flight 2.00 × and 42% (both missed).
func benchRun(simulated bool, started time.Time) *bench.Run {
	m := func(name string, c int, costMS float64) bench.Measurement {
		return bench.Measurement{Name: name, Concurrency: c, Attempted: 20, OK: 20, PerSec: 1000 / costMS, CostMS: costMS,
			LatencyMS: result.Percentiles{N: 20, P50: costMS * float64(c), P99: 2 * costMS * float64(c)}}
	}
	r := &bench.Run{SchemaVersion: bench.SchemaVersion, Tool: bench.Tool, Kind: bench.Kind, ToolVersion: "test",
		Command:   []string{"rdmaprobe", "bench", "--n", "20", "--concurrency", "8"},
		StartedAt: started, FinishedAt: started.Add(3 * time.Second),
		Backend: result.Backend{Name: "vm", Description: "vm: rxe0 on Linux 6.1 (Soft-RoCE)", Reason: "requested"},
		Host:    bench.Environment{Kernel: "6.18", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, GoVersion: "go1.26"},
		Config:  bench.Config{N: 20, Concurrency: 8, Warmup: 2, PayloadBytes: 4096, Rounds: 1, Certificate: "Ed25519, TLS 1.3"},
		Measurements: []bench.Measurement{
			m(bench.TLSHandshakeName, 1, 1.0), m(bench.RawVerbsName, 1, 0.25), m(bench.FullConnectName, 1, 1.5625),
			m(bench.TLSHandshakeName, 8, 0.5), m(bench.RawVerbsName, 8, 0.1), m(bench.FullConnectName, 8, 1.2),
		},
		Complete: true}
	if simulated {
		r.Backend = result.Backend{Name: "sim", Simulated: true, Description: "sim: pure Go", Reason: "requested"}
	}
	r.Measured = r.Host
	r.Measured.Device = &result.DeviceInfo{Name: "rxe0"}
	r.Measurements[2].PhasesMS = map[string]result.Percentiles{result.PhaseTLS: {P50: 0.9, Mean: 1}}
	r.Measurements[1].PhasesMS = map[string]result.Percentiles{bench.VerbCreateQP: {P50: 0.05, Mean: 0.06}}
	r.Summarise()
	return r
}

var benchStart = time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)

func readAll(t *testing.T, files []string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

func TestWriteBench(t *testing.T) {
	for _, sim := range []bool{true, false} {
		files, err := WriteBench(benchRun(sim, benchStart), t.TempDir(), Formats)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, files)
		if len(got) != 3 || got["bench-cost.png"] == nil || !bytes.HasPrefix(got["bench-cost.png"], []byte("\x89PNG")) {
			t.Fatalf("files %v, want report.md, report.html and bench-cost.png", files)
		}
		md, html := string(got["report.md"]), string(got["report.html"])
		want := []string{
			"# rdmaprobe bench on ",
			"serial: full connect costs **1.25 ×** (bare TLS + raw verbs), +0.312 ms per connection — target ≤ 1.5: **met**",
			"8 in flight: full connect costs **2.00 ×** (bare TLS + raw verbs), +0.600 ms per connection — target ≤ 1.5: **not met**",
			"| (c) full connect           | 8 in flight | 20/20 | 833    | 1.200   | 9.600  | 19.200 |",
			"| serial      | 1.250       | 1.562     | 1.25    | met     | 64%             |",
			"| 8 in flight | 0.600       | 1.200     | 2.00    | not met | 42%             |",
			"| tls                         | 0.900         | 1.000          |",
			"| create_qp            | 0.050         | 0.060          |",
			"![Cost per connection by mode](bench-cost.png)",
			"- Command: `rdmaprobe bench --n 20 --concurrency 8`",
			"Ed25519, TLS 1.3",
		}
		if sim {
			want = append(want, "The fabric is simulated", "**64%** of the bare TLS handshake rate — target ≥ 60% on a simulated fabric: **met**",
				"**42%** of the bare TLS handshake rate — target ≥ 60% on a simulated fabric: **not met**", "| 42%             | not met     |")
		} else {
			want = append(want, "| 42%             | n/a         |")
			if strings.Contains(strings.ToLower(md), "simulated") {
				t.Errorf("a Soft-RoCE bench report says simulated:\n%s", md)
			}
		}
		for _, w := range want {
			if !strings.Contains(md, w) {
				t.Errorf("sim=%v: report.md lacks %q:\n%s", sim, w, md)
			}
		}
		// The sections in the order the report promises.
		last := -1
		for _, h := range []string{"## Answer", "## Environment", "## Measurements", "## Full connect against its parts", "## Phases", "## Cost per connection", "## Method"} {
			i := strings.Index(md, h)
			if i <= last {
				t.Errorf("sim=%v: %q missing or out of order", sim, h)
			}
			last = i
		}
		if !strings.Contains(html, "<svg") || !strings.Contains(html, `data-plot="bench-cost"`) || !strings.Contains(html, "<strong>not met</strong>") {
			t.Errorf("sim=%v: report.html lacks the inline plot or the verdict", sim)
		}
		if strings.Contains(html, "class=\"sim\" id=\"simulated\"") != sim {
			t.Errorf("sim=%v: report.html simulated note wrong", sim)
		}

		// Same run, same bytes.
		again, err := WriteBench(benchRun(sim, benchStart), t.TempDir(), Formats)
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range readAll(t, again) {
			if !bytes.Equal(b, got[name]) {
				t.Errorf("sim=%v: %s differs between two renderings", sim, name)
			}
		}
	}
}

func TestWriteBenchIncomplete(t *testing.T) {
	r := benchRun(false, benchStart)
	r.Measurements = r.Measurements[:4]
	r.Summarise()
	r.Complete, r.Error = false, "guest: connection reset"
	files, err := WriteBench(r, t.TempDir(), []string{"md"})
	if err != nil {
		t.Fatal(err)
	}
	md := string(readAll(t, files)["report.md"])
	for _, w := range []string{"**Incomplete run**: it stopped before the last measurement: guest: connection reset.", "serial: full connect costs **1.25 ×**"} {
		if !strings.Contains(md, w) {
			t.Errorf("report.md lacks %q:\n%s", w, md)
		}
	}
	if strings.Contains(md, "8 in flight: full connect") {
		t.Errorf("a ratio for a mode whose full connects never ran:\n%s", md)
	}
	if _, err := WriteBench(r, t.TempDir(), []string{"pdf"}); err == nil {
		t.Error("wrote an unknown format")
	}
}

func TestWriteBenchComparison(t *testing.T) {
	runs := []*bench.Run{benchRun(false, benchStart), benchRun(true, benchStart.Add(90*time.Minute))}
	runs[1].Measurements[5].CostMS, runs[1].Measurements[5].PerSec = 0.9, 1000/0.9
	runs[1].Summarise()
	dir := t.TempDir()
	files, err := WriteBenchComparison(runs, dir, Formats)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, files)
	md, html := string(got["compare.md"]), string(got["compare.html"])
	for _, w := range []string{
		"# rdmaprobe: comparison of 2 bench runs",
		"| vm 2026-11-23 14:00              | 8           | 1.25           | 2.00         | 1000              | 2000            | 640               | 833             | 42%                  |",
		"| sim (simulated) 2026-11-23 15:30 | 8           | 1.25           | 1.50         |",
		"(bench-compare.png)",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("compare.md lacks %q:\n%s", w, md)
		}
	}
	if !strings.Contains(html, "<svg") || !strings.Contains(html, "sim (simulated) 2026-11-23 15:30") || got["bench-compare.png"] == nil {
		t.Errorf("compare.html lacks the plot or a label; files %v", files)
	}
	if strings.Contains(md, "rdma_cm against cmtime") {
		t.Errorf("an rdma_cm table for runs without one:\n%s", md)
	}
}

// A bench rdmacm run's comparison against cmtime gets its own table:
// medians over passes, and the ratio in the same pass.
func TestBenchComparisonRDMACM(t *testing.T) {
	cm := benchRun(false, benchStart)
	cm.RDMACM = &bench.CMRun{N: 1000, Passes: 2, Modes: []string{bench.CMLockstep},
		Measurements: []bench.CMMeasurement{
			{Pass: 1, Client: bench.CMTimeClient, Connected: 1000, PerSec: 100},
			{Pass: 1, Client: bench.RDMAProbeClient, Mode: bench.CMLockstep, Connected: 1000, PerSec: 150},
			{Pass: 2, Client: bench.CMTimeClient, Connected: 1000, PerSec: 80},
			{Pass: 2, Client: bench.RDMAProbeClient, Mode: bench.CMLockstep, Connected: 1000, PerSec: 100},
		}}
	cm.RDMACM.Summarise()
	files, err := WriteBenchComparison([]*bench.Run{benchRun(true, benchStart.Add(time.Hour)), cm}, t.TempDir(), Formats)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, files)
	md, html := string(got["compare.md"]), string(got["compare.html"])
	// cmtime's median 90, rdmaprobe's 125; ratios 1.50 and 1.25.
	row := "| vm 2026-11-23 14:00 | 1000 | 2      | 90            | 125             | 1.38              | –                  | –                    |"
	if !strings.Contains(md, "## rdma_cm against cmtime") || !strings.Contains(md, row) {
		t.Errorf("compare.md lacks the rdma_cm table or its row %q:\n%s", row, md)
	}
	if strings.Contains(md, "| sim (simulated)") && strings.Count(md, "| sim (simulated)") != 1 {
		t.Errorf("the run without rdma_cm has a row in the rdma_cm table:\n%s", md)
	}
	if !strings.Contains(html, `<table id="bench-rdmacm-runs">`) {
		t.Errorf("compare.html lacks the rdma_cm table")
	}
}

// Golden report of the committed sim bench run; go test -run
// BenchGolden -update rewrites it after a deliberate change.
func TestBenchGolden(t *testing.T) {
	run, err := bench.Load(filepath.Join(fixtures, "bench-sim.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := NewBenchModel(run)
	md, err := benchMarkdown(m)
	if err != nil {
		t.Fatal(err)
	}
	html, err := benchHTML(m)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "bench-sim.golden.md", md)
	golden(t, "bench-sim.golden.html", html)
}

// Golden comparison of two bench runs, both formats.
func TestBenchCompareGolden(t *testing.T) {
	runs := []*bench.Run{benchRun(false, benchStart), benchRun(true, benchStart.Add(90*time.Minute))}
	files, err := WriteBenchComparison(runs, t.TempDir(), Formats)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, files)
	golden(t, "bench-compare.golden.md", got["compare.md"])
	golden(t, "bench-compare.golden.html", got["compare.html"])
}

// The rdma_cm comparison's report: its verdict per mode, a row per turn
// with the ratio to the same pass's cmtime, the ratios by pass, the
// limits, and none of the suite's sections.
func TestWriteBenchRDMACM(t *testing.T) {
	cm := &bench.CMRun{N: 1000, Passes: 2, Modes: []string{bench.CMLockstep}, Limits: "two emulated CPUs.",
		Server: "cmtime -b 192.0.2.1 -p 7471 -c 1000", CMTime: "cmtime -s 192.0.2.1 -p 7471 -c 1000"}
	for p, rates := range [][2]float64{{100, 150}, {200, 240}} {
		cm.Measurements = append(cm.Measurements,
			bench.CMMeasurement{Pass: p + 1, Client: bench.CMTimeClient, Attempted: 1000, Connected: 1000, PerSec: rates[0], Sec: 1000 / rates[0],
				StepsMS: map[string]float64{"resolve addr": 40, "resolve route": 90, "create qp": 700, "connect": 3000},
				CMTimeSteps: []bench.CMTimeStep{{Name: "resolve addr", TotalMS: 40, MaxMS: 30, MinUS: 20}, {Name: "resolve route", TotalMS: 90, MaxMS: 80, MinUS: 30},
					{Name: "create qp", TotalMS: 700, MaxMS: 1.5, MinUS: 250}, {Name: "connect", TotalMS: 3000, MaxMS: 900, MinUS: 2500}}},
			bench.CMMeasurement{Pass: p + 1, Client: bench.RDMAProbeClient, Mode: bench.CMLockstep, Attempted: 1000, Connected: 1000,
				PerSec: rates[1], Sec: 1000 / rates[1], StepsMS: map[string]float64{result.PhaseResolveRoute: 12.5, result.PhaseEstablish: 800},
				PerConnMS: map[string]bench.CMSpread{result.PhaseResolveRoute: {Min: 0.04, P50: 12.5, Max: 85}, result.PhaseEstablish: {Min: 3, P50: 800, Max: 880}}})
	}
	run := &bench.Run{SchemaVersion: bench.SchemaVersion, Tool: bench.Tool, Kind: bench.Kind, ToolVersion: "test",
		Command: []string{"rdmaprobe", "bench", "rdmacm"}, StartedAt: benchStart, FinishedAt: benchStart.Add(time.Minute),
		Backend: result.Backend{Name: "vm", Description: "vm: rxe1 on dummy0"}, RDMACM: cm, Complete: true}
	run.Summarise()
	files, err := WriteBench(run, t.TempDir(), Formats)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, files)
	md, html := string(got["report.md"]), string(got["report.html"])
	for _, w := range []string{
		"# rdmaprobe bench rdmacm on vm: rxe1 on dummy0",
		"makes **1.35 ×** cmtime's connects/s at 1000 connections, median of 2 passes in turns — target ≥ 1.0: **met**",
		"What limits both: two emulated CPUs.",
		"| 1    | rdmaprobe (lockstep) | 1000/1000 | 6.67  | 150.0      | 1.50     |",
		// Each step's figures are one connection's shortest and longest,
		// which both clients measure: not cmtime's totals over all N
		// beside rdmaprobe's median per connection (steps_ms).
		"| 2    | cmtime               | 1000/1000 | 5.00  | 200.0      |          | 0.02–30.00                   | 0.03–80.00                    | 0.25–1.50                 | 2.50–900.00             |",
		"| 2    | rdmaprobe (lockstep) | 1000/1000 | 4.17  | 240.0      | 1.20     |                              | 0.04–85.00                    |                           | 3.00–880.00             |",
		"| lockstep | 1.50, 1.20       | 1.35   | met   |",
		"![rdma_cm connects/s at 1000 connections, by pass](bench-rdmacm.png)",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("report.md lacks %q:\n%s", w, md)
		}
	}
	if strings.Contains(md, "bare TLS") || strings.Contains(html, "bare TLS") || !strings.Contains(html, `data-plot="bench-rdmacm"`) {
		t.Errorf("the comparison's report shows the suite's text or lacks its plot:\n%s", md)
	}
	for _, old := range []string{"3000.0", "800.0", "12.5"} {
		if strings.Contains(md, old) {
			t.Errorf("report.md shows steps_ms's %s, a total beside a median:\n%s", old, md)
		}
	}
}
