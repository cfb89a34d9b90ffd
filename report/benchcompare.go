package report

import (
	"fmt"
	"sort"

	"github.com/rdmaprobe/rdmaprobe/bench"
)

// BenchComparison sets several bench runs side by side.
type BenchComparison struct {
	Title  string
	Labels []string
	Table  Table
	Plot   Plot
	// CM sets the runs' rdma_cm comparisons against cmtime (bench
	// rdmacm) side by side; nil when no run has one.
	CM *Table
}

// BenchLabel names a bench run in a comparison: its backend, whether it
// was simulated, and when it started.
func BenchLabel(r *bench.Run) string {
	l := r.Backend.Name
	if r.Backend.Simulated {
		l += " (simulated)"
	}
	if !r.StartedAt.IsZero() {
		l += " " + r.StartedAt.UTC().Format("2006-01-02 15:04")
	}
	return l
}

// concurrent is the run's concurrent mode, 0 if it ran serially only.
func concurrent(r *bench.Run) int {
	if r.Config.Concurrency > 1 {
		return r.Config.Concurrency
	}
	n := 0
	for _, c := range modes(r) {
		n = max(n, c)
	}
	if n > 1 {
		return n
	}
	return 0
}

// NewBenchComparison builds the side-by-side view of bench runs; labels
// are made unique with #i.
func NewBenchComparison(runs []*bench.Run) *BenchComparison {
	c := &BenchComparison{Title: fmt.Sprintf("rdmaprobe: comparison of %d bench runs", len(runs))}
	c.Table = Table{ID: "bench-runs", Header: []string{"Run", "N in flight", "serial c/(a+b)", "at N c/(a+b)",
		"(a) conn/s serial", "(a) conn/s at N", "(c) conn/s serial", "(c) conn/s at N", "c rate / a rate at N"}}
	seen := map[string]int{}
	serial, atN := Bars{Label: "serial"}, Bars{Label: "N in flight"}
	ns := map[int]bool{}
	for i, r := range runs {
		l := BenchLabel(r)
		seen[l]++
		if seen[l] > 1 {
			l = fmt.Sprintf("%s #%d", l, i+1)
		}
		c.Labels = append(c.Labels, l)
		n := concurrent(r)
		ns[n] = true
		cmp := func(conc int) *bench.Comparison {
			for j := range r.Comparisons {
				if r.Comparisons[j].Concurrency == conc {
					return &r.Comparisons[j]
				}
			}
			return nil
		}
		ratio := func(conc int) (string, float64) {
			if x := cmp(conc); x != nil {
				return fmt.Sprintf("%.2f", x.CostRatio), x.CostRatio
			}
			return "–", 0
		}
		rate := func(name string, conc int) string {
			if x := r.Find(name, conc); x != nil && x.OK > 0 {
				return fmt.Sprintf("%.0f", x.PerSec)
			}
			return "–"
		}
		s1, v1 := ratio(1)
		sN, vN := "–", 0.0
		vsTLS, inFlight := "–", "–"
		if n > 0 {
			sN, vN = ratio(n)
			inFlight = fmt.Sprint(n)
			if x := cmp(n); x != nil {
				vsTLS = fmt.Sprintf("%.0f%%", x.RateVsTLS*100)
			}
		}
		c.Table.Rows = append(c.Table.Rows, []string{l, inFlight, s1, sN,
			rate(bench.TLSHandshakeName, 1), rate(bench.TLSHandshakeName, n),
			rate(bench.FullConnectName, 1), rate(bench.FullConnectName, n), vsTLS})
		serial.Y, atN.Y = append(serial.Y, v1), append(atN.Y, vN)
	}
	if len(ns) == 1 {
		for n := range ns {
			if n > 0 {
				atN.Label = InFlight(n)
			}
		}
	}
	c.CM = cmComparison(runs, c.Labels)
	// Runs are the groups: one bar per mode each, the target across all.
	c.Plot = barPlot("bench-compare", fmt.Sprintf("Full connect / (TLS + verbs) per run (target %.1f)", bench.MaxCostRatio),
		"c/(a+b)", c.Labels, []Bars{serial, atN}, bench.MaxCostRatio, fmt.Sprintf("target %.1f", bench.MaxCostRatio))
	return c
}

// cmComparison is the table of the runs' rdma_cm comparisons: per run,
// cmtime's median connects/s over its passes and, for each way
// rdmaprobe's generator stepped, its median connects/s and its median
// ratio to cmtime in the same pass (bench.CMRatio). Nil when no run has
// an rdma_cm comparison.
func cmComparison(runs []*bench.Run, labels []string) *Table {
	t := &Table{ID: "bench-rdmacm-runs", Header: []string{"Run", "N", "passes", "cmtime conn/s",
		"lockstep conn/s", "lockstep × cmtime", "interleaved conn/s", "interleaved × cmtime"}}
	for i, r := range runs {
		cm := r.RDMACM
		if cm == nil {
			continue
		}
		perSec := func(client, mode string) string {
			var v []float64
			for _, m := range cm.Measurements {
				if m.Client == client && m.Mode == mode && m.Error == "" && m.PerSec > 0 {
					v = append(v, m.PerSec)
				}
			}
			if len(v) == 0 {
				return "–"
			}
			return fmt.Sprintf("%.0f", medianOf(v))
		}
		ratio := func(mode string) string {
			for _, x := range cm.Ratios {
				if x.Mode == mode {
					return fmt.Sprintf("%.2f", x.Median)
				}
			}
			return "–"
		}
		t.Rows = append(t.Rows, []string{labels[i], fmt.Sprint(cm.N), fmt.Sprint(cm.Passes), perSec(bench.CMTimeClient, ""),
			perSec(bench.RDMAProbeClient, bench.CMLockstep), ratio(bench.CMLockstep),
			perSec(bench.RDMAProbeClient, bench.CMInterleaved), ratio(bench.CMInterleaved)})
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return t
}

// medianOf is the median of v (not empty); v is sorted in place.
func medianOf(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// WriteBenchComparison renders bench runs side by side into dir as
// compare.md (with its PNG plot) and/or compare.html.
func WriteBenchComparison(runs []*bench.Run, dir string, formats []string) ([]string, error) {
	return Write(dir, formats, NewBenchComparison(runs).Document())
}

// Document is the comparison as compare.md and compare.html.
func (c *BenchComparison) Document() Document {
	return Document{Stem: "compare", Plots: []Plot{c.Plot},
		Markdown: func() ([]byte, error) {
			data := map[string]any{"C": c, "Table": mdTable(c.Table.Header, c.Table.Rows)}
			if c.CM != nil {
				data["CM"] = mdTable(c.CM.Header, c.CM.Rows)
			}
			return execMarkdown("bench-compare", data)
		},
		HTML: func() ([]byte, error) { return execHTML("bench-compare", map[string]any{"C": c}) }}
}
