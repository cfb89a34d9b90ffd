package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// BenchModel is everything a bench report shows, computed from the bench
// run alone.
type BenchModel struct {
	Title     string
	Simulated bool
	// SimNote says what a simulated fabric means for the figures.
	SimNote string
	Answer  []string
	Env     [][2]string
	// Measurements, Ratios and Phases are the tables in report order.
	Measurements Table
	Ratios       Table
	Phases       []Table
	Plot         Plot
	Method       BenchMethod
	// CM marks the rdma_cm comparison against cmtime (bench rdmacm):
	// Measurements are its turns and Ratios each mode's median.
	CM bool
}

// BenchMethod is how the bench run was made.
type BenchMethod struct {
	Command     string
	Started     string
	Finished    string
	Duration    string
	ToolVersion string
}

// simNote is the caveat of a simulated bench run, in the spirit of the
// capacity report's "(simulated)" marks.
const simNote = "The fabric is simulated: the raw verbs figures, and the verbs inside every full connect, are not RDMA measurements; only the TLS handshake and rdmaprobe's own work are real."

// BenchMeasure names a measurement as the reports and the terminal do.
func BenchMeasure(name string) string {
	switch name {
	case bench.TLSHandshakeName:
		return "(a) bare TLS 1.3 handshake"
	case bench.RawVerbsName:
		return "(b) raw verbs, both ends"
	case bench.FullConnectName:
		return "(c) full connect"
	}
	return name
}

// InFlight names a concurrency: "serial" or "N in flight".
func InFlight(c int) string {
	if c == 1 {
		return "serial"
	}
	return fmt.Sprintf("%d in flight", c)
}

// NewBenchModel computes the report of a bench run.
func NewBenchModel(run *bench.Run) *BenchModel {
	m := &BenchModel{Simulated: run.Backend.Simulated}
	if run.RDMACM != nil {
		m.cmModel(run)
		return m
	}
	m.Title = "rdmaprobe bench on " + backendName(run.Backend)
	if m.Simulated {
		m.SimNote = simNote
	}
	m.benchAnswer(run)
	m.benchEnv(run)
	m.benchTables(run)
	m.Plot = benchCostPlot(run)
	m.benchMethod(run)
	return m
}

func backendName(b result.Backend) string {
	if b.Description != "" {
		return b.Description
	}
	return b.Name
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// target returns whether run met the target of kind cmp ("<=" or ">=")
// at concurrency c, as saved; a file without targets is judged here.
func target(run *bench.Run, c int, cmp string, value float64) bool {
	for _, t := range run.Targets {
		if t.Concurrency == c && t.Compare == cmp {
			return t.Met
		}
	}
	if cmp == "<=" {
		return value <= bench.MaxCostRatio
	}
	return value >= bench.MinSimRateVsTLS
}

func (m *BenchModel) benchAnswer(run *bench.Run) {
	for _, c := range run.Comparisons {
		s := fmt.Sprintf("%s: full connect costs **%.2f ×** (bare TLS + raw verbs), %+.3f ms per connection — target ≤ %.1f: **%s**",
			InFlight(c.Concurrency), c.CostRatio, c.OverheadMS, bench.MaxCostRatio, metWord(target(run, c.Concurrency, "<=", c.CostRatio)))
		if run.Backend.Simulated {
			s += fmt.Sprintf("; it runs at **%.0f%%** of the bare TLS handshake rate — target ≥ %.0f%% on a simulated fabric: **%s**",
				c.RateVsTLS*100, bench.MinSimRateVsTLS*100, metWord(target(run, c.Concurrency, ">=", c.RateVsTLS)))
		}
		m.Answer = append(m.Answer, s+".")
	}
	if len(run.Comparisons) == 0 {
		m.Answer = append(m.Answer, "No mode completed all three measurements, so there is no ratio to judge.")
	}
	if !run.Complete {
		s := "**Incomplete run**: it stopped before the last measurement"
		if run.Error != "" {
			s += ": " + run.Error
		}
		m.Answer = append(m.Answer, s+".")
	}
}

// machine describes one environment on one line.
func machine(e bench.Environment, device bool) string {
	var parts []string
	sys := e.Arch
	if e.Kernel != "" {
		sys = "Linux " + e.Kernel + " " + e.Arch
	}
	if sys != "" {
		parts = append(parts, sys)
	}
	if e.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", e.CPUs))
	}
	if e.GOMAXPROCS > 0 {
		parts = append(parts, fmt.Sprintf("GOMAXPROCS %d", e.GOMAXPROCS))
	}
	if e.GoVersion != "" {
		parts = append(parts, e.GoVersion)
	}
	if device && e.Device != nil {
		parts = append(parts, "device "+e.Device.Name)
	}
	return strings.Join(parts, ", ")
}

func (m *BenchModel) benchEnv(run *bench.Run) {
	add := func(k, v string) {
		if v != "" {
			m.Env = append(m.Env, [2]string{k, v})
		}
	}
	cfg := run.Config
	add("Backend", backendName(run.Backend))
	add("Backend chosen because", run.Backend.Reason)
	add("Measured on", machine(run.Measured, true))
	add("Host", machine(run.Host, false))
	if cfg.N > 0 {
		ops := fmt.Sprintf("%d per measurement, serially", cfg.N)
		if cfg.Concurrency > 1 {
			ops += fmt.Sprintf(" and %d in flight", cfg.Concurrency)
		}
		if cfg.Passes > 1 {
			ops += fmt.Sprintf("; %d passes in turns (a, b, c, a, b, c, …), pooled", cfg.Passes)
		}
		add("Operations", ops)
	}
	add("Warmup", fmt.Sprintf("%d untimed operations before each measurement", cfg.Warmup))
	if cfg.PayloadBytes > 0 {
		trips := "round trips"
		if cfg.Rounds == 1 {
			trips = "round trip"
		}
		add("Payload", fmt.Sprintf("%d B, %d verified %s per full connect", cfg.PayloadBytes, cfg.Rounds, trips))
	}
	add("TLS", cfg.Certificate)
	if cfg.TimeoutSec > 0 {
		add("Operation timeout", fmt.Sprintf("%g s", cfg.TimeoutSec))
	}
}

func f3(x float64) string { return fmt.Sprintf("%.3f", x) }

func (m *BenchModel) benchTables(run *bench.Run) {
	m.Measurements = Table{ID: "measurements", Header: []string{"Measure", "Mode", "OK", "conn/s", "ms/conn", "p50 ms", "p99 ms"}}
	byPass := false
	for _, x := range run.Measurements {
		byPass = byPass || len(x.PassPerSec) > 1
	}
	if byPass {
		m.Measurements.Header = append(m.Measurements.Header, "conn/s by pass")
	}
	for _, x := range run.Measurements {
		row := []string{BenchMeasure(x.Name), InFlight(x.Concurrency),
			fmt.Sprintf("%d/%d", x.OK, x.Attempted), fmt.Sprintf("%.0f", x.PerSec), f3(x.CostMS),
			f3(x.LatencyMS.P50), f3(x.LatencyMS.P99)}
		if byPass {
			var rates []string
			for _, r := range x.PassPerSec {
				rates = append(rates, fmt.Sprintf("%.0f", r))
			}
			row = append(row, strings.Join(rates, ", "))
		}
		m.Measurements.Rows = append(m.Measurements.Rows, row)
	}
	m.Ratios = Table{ID: "ratios", Header: []string{"Mode", "a+b ms/conn", "c ms/conn", "c/(a+b)", "≤ 1.5", "c rate / a rate", "≥ 60% (sim)"}}
	for _, c := range run.Comparisons {
		a, b := run.Find(bench.TLSHandshakeName, c.Concurrency), run.Find(bench.RawVerbsName, c.Concurrency)
		f := run.Find(bench.FullConnectName, c.Concurrency)
		if a == nil || b == nil || f == nil {
			continue
		}
		rate := "n/a"
		if run.Backend.Simulated {
			rate = metWord(target(run, c.Concurrency, ">=", c.RateVsTLS))
		}
		m.Ratios.Rows = append(m.Ratios.Rows, []string{InFlight(c.Concurrency), f3(a.CostMS + b.CostMS), f3(f.CostMS),
			fmt.Sprintf("%.2f", c.CostRatio), metWord(target(run, c.Concurrency, "<=", c.CostRatio)),
			fmt.Sprintf("%.0f%%", c.RateVsTLS*100), rate})
	}
	for _, p := range []struct {
		id, name, title string
		phases          []string
	}{
		{"connect-phases", bench.FullConnectName, "Full connect phase (client)", result.BuiltinPhases},
		{"verb-phases", bench.RawVerbsName, "Raw verb (both ends)", bench.Verbs},
	} {
		if t := phaseTable(run, p.id, p.name, p.title, p.phases); len(t.Rows) > 0 {
			m.Phases = append(m.Phases, t)
		}
	}
}

// phaseTable splits the measurements called name by phase, a p50 and a
// mean column per concurrency.
func phaseTable(run *bench.Run, id, name, title string, phases []string) Table {
	t := Table{ID: id, Header: []string{title}}
	var ms []*bench.Measurement
	for i := range run.Measurements {
		if x := &run.Measurements[i]; x.Name == name && len(x.PhasesMS) > 0 {
			ms = append(ms, x)
			t.Header = append(t.Header, InFlight(x.Concurrency)+" p50 ms", InFlight(x.Concurrency)+" mean ms")
		}
	}
	if len(ms) == 0 {
		return t
	}
	for _, ph := range phases {
		row := []string{ph}
		measured := false
		for _, x := range ms {
			p, ok := x.PhasesMS[ph]
			measured = measured || ok
			row = append(row, f3(p.P50), f3(p.Mean))
		}
		// A phase no measurement has (rdma_cm's steps in a run of the
		// built-in clients) is not a row of zeros.
		if measured {
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

// modes lists the concurrencies of run's measurements in the order run.
func modes(run *bench.Run) []int {
	var out []int
	seen := map[int]bool{}
	for _, x := range run.Measurements {
		if !seen[x.Concurrency] {
			seen[x.Concurrency] = true
			out = append(out, x.Concurrency)
		}
	}
	return out
}

func utc(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func (m *BenchModel) benchMethod(run *bench.Run) {
	m.Method = BenchMethod{Command: strings.Join(run.Command, " "), Started: utc(run.StartedAt),
		Finished: utc(run.FinishedAt), ToolVersion: run.ToolVersion}
	if !run.StartedAt.IsZero() && run.FinishedAt.After(run.StartedAt) {
		m.Method.Duration = run.FinishedAt.Sub(run.StartedAt).Round(100 * time.Millisecond).String()
	}
}

// WriteBench renders a bench run into dir: report.md with its PNG plot
// beside it and/or report.html with the plot inline as SVG. The output
// depends on the run alone, so rendering it again gives the same bytes.
// It returns the files written.
func WriteBench(run *bench.Run, dir string, formats []string) ([]string, error) {
	return Write(dir, formats, NewBenchModel(run).Document())
}

// Document is the bench run's report as report.md and report.html.
func (m *BenchModel) Document() Document {
	return Document{Stem: "report", Plots: []Plot{m.Plot},
		Markdown: func() ([]byte, error) { return benchMarkdown(m) },
		HTML:     func() ([]byte, error) { return benchHTML(m) }}
}

func benchMarkdown(m *BenchModel) ([]byte, error) {
	var env [][]string
	for _, kv := range m.Env {
		env = append(env, []string{kv[0], kv[1]})
	}
	var phases []string
	for _, p := range m.Phases {
		phases = append(phases, mdTable(p.Header, p.Rows))
	}
	return execMarkdown("bench", map[string]any{
		"M":            m,
		"Env":          mdTable([]string{"What", "Value"}, env),
		"Measurements": mdTable(m.Measurements.Header, m.Measurements.Rows),
		"Ratios":       mdTable(m.Ratios.Header, m.Ratios.Rows),
		"Phases":       phases,
	})
}

func benchHTML(m *BenchModel) ([]byte, error) {
	return execHTML("bench", map[string]any{"M": m, "Answer": richText(m.Answer)})
}
