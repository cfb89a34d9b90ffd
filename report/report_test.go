package report

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata")

const fixtures = "testdata"

// golden compares got with testdata/name, or rewrites that file when the
// test runs with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(fixtures, name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./report -run Golden -update after a deliberate change)", path)
	}
}

func load(t *testing.T, name string) *result.Run {
	t.Helper()
	r, err := result.Load(filepath.Join(fixtures, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A published Soft-RoCE table (100–500 clients → 100,
// 100, 100, 92, 85, 94, 98 %): 300 is the 100% capacity, and 400, 450
// and 475 are flagged because success rose with load after them.
func TestPublishedTable(t *testing.T) {
	m := NewModel(load(t, "published"))
	a := m.Answer
	if a.Full != 300 || a.FirstFail != 400 || a.Practical != 300 || a.Highest95 != 500 {
		t.Errorf("answer: 100%% up to %d, first failure %d, practical %d, highest ≥95%% %d", a.Full, a.FirstFail, a.Practical, a.Highest95)
	}
	if !reflect.DeepEqual(a.NonMonotonic, []int{400, 450, 475}) {
		t.Errorf("non-monotonic %v, want [400 450 475]", a.NonMonotonic)
	}
	md, err := Markdown(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**300 clients** pass at the 100% threshold: 100% connected (300/300",
		"Failures begin at **400 clients**: 92%",
		"Non-monotonic: success at 400, 450, 475 clients",
		"| 450     | 382/450   | 84.9%",
		"MAX_CLIENTS = 300",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	marked := 0
	for _, l := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(l, "|") && strings.Contains(l, "↯") {
			marked++
		}
	}
	if marked != 3 {
		t.Errorf("want 3 rows marked non-monotonic:\n%s", md)
	}
}

// Golden reports for every fixture run; go test -run Golden -update
// rewrites them after a deliberate change.
func TestGolden(t *testing.T) {
	for _, name := range []string{"published", "sim-search"} {
		t.Run(name, func(t *testing.T) {
			m := NewModel(load(t, name))
			m.Plots = Figures(load(t, name), m)
			md, err := Markdown(m)
			if err != nil {
				t.Fatal(err)
			}
			html, err := HTML(m)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".golden.md", md)
			golden(t, name+".golden.html", html)
		})
	}
}

func TestSimulatedTitle(t *testing.T) {
	m := NewModel(load(t, "sim-search"))
	if !strings.Contains(m.Title, "simulated") || !strings.HasPrefix(m.Answer.Sentences[0], "(simulated)") {
		t.Errorf("title %q, answer %q", m.Title, m.Answer.Sentences)
	}
	if m.Answer.Full != 40 || m.Limit == nil || m.Limit.Limit != "device-cap:max_qp" {
		t.Errorf("sim run: 100%% up to %d, limit %+v", m.Answer.Full, m.Limit)
	}
}

// Rendering is deterministic: the same run gives the same bytes, plots
// included.
func TestWriteAllDeterministic(t *testing.T) {
	run := load(t, "sim-search")
	a, b := t.TempDir(), t.TempDir()
	fa, err := WriteAll(run, a, Formats)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteAll(load(t, "sim-search"), b, Formats); err != nil {
		t.Fatal(err)
	}
	if len(fa) != 7 {
		t.Errorf("files %v, want report.md, report.html and 5 PNG plots", fa)
	}
	for _, f := range fa {
		x, _ := os.ReadFile(f)
		y, err := os.ReadFile(filepath.Join(b, filepath.Base(f)))
		if err != nil || !bytes.Equal(x, y) || len(x) == 0 {
			t.Errorf("%s differs between two renderings", filepath.Base(f))
		}
	}
}

// Text from the run is escaped in the HTML; the plots never carry it.
func TestHTMLEscapes(t *testing.T) {
	run := load(t, "published")
	run.Backend.Description = `<script>alert("x")</script>`
	run.Command = []string{"rdmaprobe", `--x=<img src=y onerror=alert(1)>`}
	m := NewModel(run)
	m.Plots = Figures(run, m)
	html, err := HTML(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(html, []byte("<script>alert")) || bytes.Contains(html, []byte("<img src=y")) {
		t.Error("run text reached the HTML unescaped")
	}
	if bytes.Contains(html, []byte("http://")) && !bytes.Contains(html, []byte(`xmlns="http://www.w3.org/2000/svg"`)) {
		t.Error("the HTML refers to the network")
	}
}

// Golden comparison of the two fixture runs, both formats.
func TestCompareGolden(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteComparison([]*result.Run{load(t, "published"), load(t, "sim-search")}, nil, dir, Formats)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, files)
	golden(t, "compare.golden.md", got["compare.md"])
	golden(t, "compare.golden.html", got["compare.html"])
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteComparison([]*result.Run{load(t, "published"), load(t, "sim-search")}, nil, dir, Formats)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "compare.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"published per-client", "sim (simulated) per-client", "| 300", "device-cap:max_qp", "compare-success.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("compare.md lacks %q:\n%s", want, md)
		}
	}
	if len(files) != 4 {
		t.Errorf("files %v", files)
	}
}

func TestPct(t *testing.T) {
	for x, want := range map[float64]string{1: "100%", 0: "0%", 0.5: "50%", 0.9245: "92.5%", 0.99963: "99.96%", 0.99999: "99.999%", 0.00004: "0.004%"} {
		if got := Pct(x); got != want {
			t.Errorf("Pct(%v) = %q, want %q", x, got, want)
		}
	}
}

// The method names how server and generators shared the CPUs, when the
// run recorded it.
func TestMethodNamesCPUSplit(t *testing.T) {
	r := load(t, "sim-search")
	if m := NewModel(r); m.Method.CPU != "" {
		t.Errorf("run without gomaxprocs: method CPU %q", m.Method.CPU)
	}
	r.Config.GoMaxProcs = "split"
	m := NewModel(r)
	if !strings.Contains(m.Method.CPU, "split the CPUs") {
		t.Errorf("method CPU %q", m.Method.CPU)
	}
	md, err := Markdown(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), m.Method.CPU) {
		t.Error("markdown method does not name the CPU split")
	}
}

// A run that recorded why each step was chosen shows the reasons in the
// steps table, the HTML and the terminal; an older run keeps its notes.
func TestStepReasons(t *testing.T) {
	r := load(t, "sim-search")
	if len(r.Search.Steps) < 2 {
		t.Fatalf("fixture has %d steps", len(r.Search.Steps))
	}
	var old bytes.Buffer
	if err := Terminal(&old, r, 0); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(old.String(), "Steps:") {
		t.Error("a run without reasons lists its steps in the terminal")
	}
	const why = "held 15,821 at once at 16,000 (179 qp-create ENOMEM): test 15,821"
	for i := range r.Search.Steps {
		r.Search.Steps[i].Reason = "reason " + itoa(i)
	}
	r.Search.Steps[1].Reason = why
	m := NewModel(r)
	md, err := Markdown(m)
	if err != nil {
		t.Fatal(err)
	}
	html, err := HTML(m)
	if err != nil {
		t.Fatal(err)
	}
	var term bytes.Buffer
	if err := Terminal(&term, r, 0); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"markdown": string(md), "html": string(html), "terminal": term.String()} {
		if !strings.Contains(out, r.Search.Steps[1].Note+": "+why) {
			t.Errorf("%s lacks the step's reason:\n%s", name, out)
		}
	}
}

// An rdma_cm run's steps are shown for each point, in count order, so
// a step that slows with N reads down a column.
func TestPhasesByPoint(t *testing.T) {
	step := func(p50 float64) result.Percentiles { return result.Percentiles{N: 10, P50: p50, P99: 2 * p50} }
	run := &result.Run{SchemaVersion: result.SchemaVersion, Mode: "search", Backend: result.Backend{Name: "vm"}}
	for _, n := range []int{2000, 100} {
		f := float64(n) / 100
		run.Points = append(run.Points, result.Point{Clients: n, Trial: 1, Attempted: n, Connected: n,
			Phases: map[string]result.Percentiles{result.PhaseResolveAddr: step(f), result.PhaseResolveRoute: step(2 * f),
				result.PhaseQPCreate: step(0.5), result.PhaseEstablish: step(3 * f)}})
	}
	m := NewModel(run)
	want := []string{"Clients", result.PhaseResolveAddr, result.PhaseResolveRoute, result.PhaseQPCreate, result.PhaseEstablish}
	if !slices.Equal(m.PhaseHead, want) || len(m.PhaseByPoint) != 2 {
		t.Fatalf("head %v, %d rows; want %v and 2 rows", m.PhaseHead, len(m.PhaseByPoint), want)
	}
	if r := m.PhaseByPoint[0]; r[0] != "100" || r[2] != "2 (4)" {
		t.Errorf("first row %v, want 100 clients with resolve_route 2 (4)", r)
	}
	md, err := Markdown(m)
	if err != nil || !strings.Contains(string(md), "Each point's phases") || !strings.Contains(string(md), "| 2000 ") {
		t.Errorf("Markdown lacks the by-point table (%v):\n%s", err, md)
	}
}

// A comparison's columns carry the runs' names and commands.
func TestComparisonNamesRuns(t *testing.T) {
	a, b := load(t, "sim-search"), load(t, "sim-search")
	c := NewComparison([]*result.Run{a, b}, "20260101T000000Z-sim", "20260102T000000Z-sim")
	for i, want := range []string{"20260101T000000Z-sim (search): ", "20260102T000000Z-sim (search): "} {
		if !strings.HasPrefix(c.Labels[i], want) {
			t.Errorf("label %d = %q, want it to start %q", i, c.Labels[i], want)
		}
	}
}

// Every view that lists points marks a staircase's step: the table's
// status and the line printed when it ends, whose connect rate counts
// only the clients it added.
func TestStepMarked(t *testing.T) {
	p := result.Point{Clients: 30, Cumulative: true, Held: 20, Attempted: 30, Connected: 30, SuccessRate: 1, ConnectSec: 2}
	lines := PointLines(p, true)
	if !strings.Contains(lines[0], "30 clients "+StepMark+", 20 held before it") || !strings.Contains(lines[1], "5 connects/s over 2.0 s") {
		t.Errorf("step's lines:\n%s", strings.Join(lines, "\n"))
	}
	p.Cumulative = false
	if l := PointLines(p, true); strings.Contains(l[0], StepMark) || !strings.Contains(l[1], "15 connects/s") {
		t.Errorf("fresh point's lines:\n%s", strings.Join(l, "\n"))
	}
	run := &result.Run{Config: result.Config{Threshold: 1}, Points: []result.Point{
		{Clients: 10, Cumulative: true, Attempted: 10, Connected: 10}, {Clients: 20, Attempted: 20, Connected: 20}}}
	var b bytes.Buffer
	if err := Terminal(&b, run, 0); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, l := range strings.Split(b.String(), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || (f[0] != "10" && f[0] != "20") {
			continue
		}
		rows++
		if (f[0] == "10") != strings.Contains(l, StepMark) {
			t.Errorf("row %q: only the step (10) is marked", l)
		}
	}
	if rows != 2 {
		t.Errorf("%d rows of 10 and 20 in:\n%s", rows, b.String())
	}
	// The traffic table: a step is marked, and at a count with a fresh
	// point too the fresh point's phase is the count's.
	run.Points = []result.Point{
		{Clients: 10, Cumulative: true, Attempted: 10, Connected: 10, Traffic: &result.Traffic{MsgRate: 1}},
		{Clients: 20, Cumulative: true, Attempted: 20, Connected: 20, Traffic: &result.Traffic{MsgRate: 2}},
		{Clients: 20, Attempted: 20, Connected: 20, Traffic: &result.Traffic{MsgRate: 3}}}
	var got []string
	for _, r := range trafficRows(run) {
		got = append(got, fmt.Sprintf("%d %s %s", r.Clients, r.MsgRate, r.Success))
	}
	if want := []string{"10 1 0% " + StepMark, "20 3 0%"}; !reflect.DeepEqual(got, want) {
		t.Errorf("traffic rows %q, want %q", got, want)
	}
}
