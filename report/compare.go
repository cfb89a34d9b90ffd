package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Comparison sets several runs side by side.
type Comparison struct {
	Title   string
	Labels  []string
	Summary [][]string // one row per run
	Header  []string   // "Clients", then one column per run
	Table   [][]string
	Plots   []Plot
	// Refs are the runs' data paths set beside perftest's (the report's
	// TrafficRef, with each 1-client point's ratio in turns), one per run
	// that has them: how the harness's own cost moved between runs.
	Refs []RunText
}

// RunText is a run's label and a paragraph about it.
type RunText struct{ Label, Text string }

// SummaryHeader names the columns of Comparison.Summary.
var SummaryHeader = []string{"Run", "Backend", "Mode", "100% up to", "Failures from", "QPs/client", "CQs/client", "MRs/client", "Maps/client", "Server RSS/client", "Limit", "Connects/s", "Host speed (hs/s)", "Per hs"}

// Label names a run in a comparison: its backend, resource mode, and the
// options that change what a connect costs (--detach, --tls-resume).
func Label(r *result.Run) string {
	l := r.Backend.Name
	if r.Backend.Simulated {
		l += " (simulated)"
	}
	if r.Config.ResourceMode != "" {
		l += " " + r.Config.ResourceMode
	}
	if r.Config.Detach {
		l += " detached"
	}
	if r.Config.TLSResume {
		l += " resumed"
	}
	return l
}

// NewComparison builds the side-by-side view. Each run is named by
// names[i] (its directory), where given, and the command that made it,
// before its Label; a label is made unique with #i. A run of several
// server designs takes one column per design.
func NewComparison(runs []*result.Run, names ...string) *Comparison {
	runs, names = byDesign(runs, names)
	c := &Comparison{Title: "rdmaprobe: comparison of " + fmt.Sprint(len(runs)) + " runs", Header: []string{"Clients"}}
	seen := map[string]int{}
	for i, r := range runs {
		l := Label(r)
		if i < len(names) && names[i] != "" {
			l = names[i] + commandVerb(r) + ": " + l
		}
		seen[l]++
		if seen[l] > 1 {
			l = fmt.Sprintf("%s #%d", l, i+1)
		}
		c.Labels = append(c.Labels, l)
		c.Header = append(c.Header, l)
	}
	byCount := map[int][]string{}
	var succ, conn, rate, p99 []Series
	traffic := false
	for i, r := range runs {
		m := NewModel(r)
		a := m.Answer
		full, fail := "none", "none"
		if a.Full > 0 {
			full = fmt.Sprint(a.Full)
		}
		if a.FirstFail > 0 {
			fail = fmt.Sprint(a.FirstFail)
		}
		row := []string{c.Labels[i], m.Backend, r.Config.ResourceMode, full, fail, "–", "–", "–", "–", "–", "–"}
		if n := len(m.Costs); n > 0 {
			// The cost at the largest count measured.
			k := m.Costs[n-1]
			row[5], row[6], row[7], row[8], row[9] = k.QPs, k.CQs, k.MRs, k.Maps, k.ServerBytes
		}
		if m.Limit != nil {
			row[10] = m.Limit.Limit
		}
		row = append(row, lastRate(m.Rates)...)
		c.Summary = append(c.Summary, row)
		if m.TrafficRef != "" {
			c.Refs = append(c.Refs, RunText{Label: c.Labels[i], Text: m.TrafficRef})
		}
		s := Series{Label: c.Labels[i]}
		cs := Series{Label: c.Labels[i]}
		for _, pr := range m.Rows {
			cells := byCount[pr.Clients]
			if cells == nil {
				cells = make([]string, len(runs))
				for j := range cells {
					cells[j] = "–"
				}
				byCount[pr.Clients] = cells
			}
			cells[i] = fmt.Sprintf("%s (%s–%s)", Pct(pr.Rate), Pct(pr.CILow), Pct(pr.CIHigh))
			s.X, s.Y = append(s.X, float64(pr.Clients)), append(s.Y, pctAxis(pr.Rate))
			if pr.ConnectP50 > 0 {
				cs.X, cs.Y = append(cs.X, float64(pr.Clients)), append(cs.Y, pr.ConnectP50)
			}
		}
		succ, conn = append(succ, s), append(conn, cs)
		rs, ls := Series{Label: c.Labels[i]}, Series{Label: c.Labels[i]}
		if d, ok := trafficData(r); ok {
			traffic = true
			rs.X, rs.Y = d.rate.X, d.rate.Y
			ls.X, ls.Y = d.p99.X, d.p99.Y
		}
		rate, p99 = append(rate, rs), append(p99, ls)
	}
	var ns []int
	for n := range byCount {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for _, n := range ns {
		c.Table = append(c.Table, append([]string{fmt.Sprint(n)}, byCount[n]...))
	}
	c.Plots = []Plot{
		percentLinePlot("compare-success", "Success rate vs clients", "clients", "success %", succ),
		linePlot("compare-connect", "Connect time p50 vs clients", "clients", "ms", conn),
	}
	if traffic {
		// Overlaid only when a run had a traffic phase, so comparisons of
		// connect-only runs are as before.
		c.Plots = append(c.Plots,
			linePlot("compare-throughput", "Message rate vs clients", "clients", "msg/s", rate),
			logLinePlot("compare-latency", "Message latency p99 vs clients", "clients", "µs (log)", p99))
	}
	return c
}

// byDesign replaces each run of several server designs by one run per
// design (result.Run.ForDesign), in the run's order.
func byDesign(runs []*result.Run, names []string) ([]*result.Run, []string) {
	var out []*result.Run
	var outNames []string
	for i, r := range runs {
		name := ""
		if i < len(names) {
			name = names[i]
		}
		ds := r.DesignModes()
		if ds == nil {
			out, outNames = append(out, r), append(outNames, name)
			continue
		}
		for _, d := range ds {
			out, outNames = append(out, r.ForDesign(d)), append(outNames, name)
		}
	}
	return out, outNames
}

// commandVerb is " (ramp)" for a run made by rdmaprobe ramp.
func commandVerb(r *result.Run) string {
	if len(r.Command) > 1 && !strings.HasPrefix(r.Command[1], "-") {
		return " (" + r.Command[1] + ")"
	}
	return ""
}

// lastRate gives the connect rate at the largest count with a timed
// connect phase (pooled over its trials), e.g. "111 at 1000", its host
// speed and the rate per calibration handshake; dashes without one.
func lastRate(rates []RateRow) []string {
	if len(rates) == 0 {
		return []string{"–", "–", "–"}
	}
	r := rates[len(rates)-1] // the pooled row comes last in its count
	return []string{fmt.Sprintf("%s at %d", r.PerSec, r.Clients), r.HostHS, r.PerHS}
}

// WriteComparison renders runs side by side into dir as compare.md (with
// PNG plots) and/or compare.html.
func WriteComparison(runs []*result.Run, names []string, dir string, formats []string) ([]string, error) {
	return Write(dir, formats, NewComparison(runs, names...).Document())
}

// Document is the comparison as compare.md and compare.html.
func (c *Comparison) Document() Document {
	return Document{Stem: "compare", Plots: c.Plots,
		Markdown: func() ([]byte, error) {
			return execMarkdown("compare", map[string]any{"C": c, "Summary": mdTable(SummaryHeader, c.Summary),
				"Table": mdTable(c.Header, c.Table)})
		},
		HTML: func() ([]byte, error) {
			return execHTML("compare", map[string]any{"C": c, "SummaryHeader": SummaryHeader})
		}}
}
