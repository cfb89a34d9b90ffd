package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// This file is the report of a run that measured several server designs
// (--mode with a list): the "Capacity by server design" table and its
// overlaid plots, with each design's own report beside it.

// DesignHeader names the columns of the capacity-by-design table.
var DesignHeader = []string{"Design", "Max connected", "Max sustainable", "Performant", "Limited by", "Server objects per client", "Server RSS per client", "Message rate"}

// DesignRow is one server design of a run: how many clients it held by
// each criterion among the counts tested, what stopped it, and what each
// client cost the server.
type DesignRow struct {
	Design string
	// MaxConnected and MaxSustainable are counts, "≥ N" when no count
	// tested failed, "–" for sustainable without a traffic phase.
	MaxConnected, MaxSustainable string
	// Performant is the performant-client count (result.Bend), "–"
	// with fewer than three counts of traffic.
	Performant string
	Limit      string
	// Objects are the server's RDMA objects per connected client and
	// RSS its memory per client, at CostAt clients: the largest count
	// that held every client, else the largest with a cost.
	Objects, RSS string
	CostAt       int
	// Rate is the traffic phase's message rate at the largest count
	// whose phase completed messages (designRate), "–" without a
	// traffic phase.
	Rate string
}

// Cells is the row as the table prints it.
func (r DesignRow) Cells() []string {
	cost := func(s string) string {
		if s == "–" || r.CostAt == 0 {
			return s
		}
		return fmt.Sprintf("%s (at %d)", s, r.CostAt)
	}
	return []string{r.Design, r.MaxConnected, r.MaxSustainable, r.Performant, r.Limit, cost(r.Objects), cost(r.RSS), r.Rate}
}

// DesignRows is the capacity-by-design table of run, nil for a run of
// one design.
func DesignRows(run *result.Run) []DesignRow {
	var rows []DesignRow
	v := analysis.Conclude(run)
	for i, mode := range run.DesignModes() {
		sub := run.ForDesign(mode)
		d := v.Designs[i]
		f := analysis.Analyse(sub)
		r := DesignRow{Design: mode, MaxConnected: atLeast(d.MaxConnected, d.Highest), MaxSustainable: "–", Limit: "nothing, within the counts tested",
			Objects: "–", RSS: "–", Rate: "–", Performant: "–"}
		if b := d.Bend; b != nil {
			r.Performant = fmt.Sprint(b.Performant)
			if b.BendAt == 0 {
				r.Performant = "≥ " + r.Performant
			}
		}
		if d.MaxSustainable >= 0 {
			r.MaxSustainable = atLeast(d.MaxSustainable, d.Highest)
		}
		if d.Limit != "" {
			r.Limit = d.Limit
			if d.LimitAt > 0 {
				r.Limit += fmt.Sprintf(" at %d", d.LimitAt)
			}
		}
		if c, ok := designCost(f); ok {
			r.Objects = fmt.Sprintf("%s QP, %s CQ, %s MR", f2(c.QPs), f2(c.CQs), f2(c.MRs))
			if c.AHs > 0 {
				r.Objects += fmt.Sprintf(", %s AH", f2(c.AHs))
			}
			r.RSS, r.CostAt = bytesIEC(c.ServerRSS), c.Clients
			if deviceWideCost(sub, c.Clients) {
				r.Objects += " (the device's: server and clients together)"
			}
		}
		if rate := designRate(sub); rate != "" {
			r.Rate = rate
		}
		rows = append(rows, r)
	}
	return rows
}

// designRate is the message rate at the largest count whose traffic
// phase completed messages; with several trials there (ramp in turns),
// the range over them, since the first alone understates the spread the
// host's drift puts between turns.
func designRate(run *result.Run) string {
	at := 0
	var rates []float64
	for _, p := range run.Points {
		if p.Traffic == nil || p.Traffic.Messages == 0 || p.Clients < at {
			continue
		}
		if p.Clients > at {
			at, rates = p.Clients, nil
		}
		rates = append(rates, p.Traffic.MsgRate)
	}
	switch len(rates) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("%.0f msg/s (at %d)", rates[0], at)
	}
	return fmt.Sprintf("%.0f–%.0f msg/s (at %d, %d trials)", slices.Min(rates), slices.Max(rates), at, len(rates))
}

// deviceWideCost says a point of n clients knew only the device's
// objects, not the server's share (analysis.CostObjects): its objects
// per client count the clients' own QPs too when both share the device.
func deviceWideCost(run *result.Run, n int) bool {
	for _, p := range run.Points {
		if p.Clients == n {
			_, deviceWide := analysis.CostObjects(p)
			return deviceWide
		}
	}
	return false
}

// atLeast prints a capacity, "≥ n" when it is the largest count tested
// (nothing above it failed), "none" when the smallest failed.
func atLeast(n, highest int) string {
	if n == 0 {
		return "none"
	}
	if highest == n {
		return fmt.Sprintf("≥ %d", n)
	}
	return fmt.Sprint(n)
}

// designCost is the per-client cost at the largest count that held every
// client, else at the largest count with one.
func designCost(f analysis.Findings) (analysis.ClientCost, bool) {
	if len(f.Costs) == 0 {
		return analysis.ClientCost{}, false
	}
	for i := len(f.Costs) - 1; i >= 0; i-- {
		if f.Costs[i].Clients <= f.Full {
			return f.Costs[i], true
		}
	}
	return f.Costs[len(f.Costs)-1], true
}

// designTerminal is Terminal for a run of several designs: each design's
// table and verdict, then the capacity-by-design table.
func designTerminal(w io.Writer, run *result.Run, width int) error {
	for _, d := range run.DesignModes() {
		fmt.Fprintf(w, "Design %s:\n", d)
		if err := terminal(w, run.ForDesign(d), width, false); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Capacity by server design:")
	t := table{header: DesignHeader, align: tw.AlignLeft}
	for _, r := range DesignRows(run) {
		t.rows = append(t.rows, r.Cells())
	}
	// Leave out from the right, past the design and its capacity.
	for i := len(DesignHeader) - 1; i >= 2; i-- {
		t.drop = append(t.drop, DesignHeader[i])
	}
	left, err := t.render(w, width)
	if err != nil {
		return err
	}
	leftOut(w, width, left)
	sim := ""
	if run.Backend.Simulated {
		sim = "(simulated) "
	}
	for _, l := range VerdictLines(analysis.Conclude(run)) {
		screen.Println(w, width, sim+l)
	}
	return nil
}

// designSections are the reports of each design of run, as if each had
// run alone, without their plots (sectionPlots).
func designSections(run *result.Run) []*Model {
	var out []*Model
	for _, d := range run.DesignModes() {
		sub := run.ForDesign(d)
		m := NewModel(sub)
		m.Title += ", design " + d
		m.Design, m.Stem, m.PlotPrefix = d, "report-"+d, d+"-"
		out = append(out, m)
	}
	return out
}

// sectionPlots draws each design's plots, named after the design so
// that they sit beside each other and the overview's.
func (m *Model) sectionPlots(run *result.Run) {
	for _, s := range m.Sections {
		s.Plots = Figures(run.ForDesign(s.Design), s)
		for i := range s.Plots {
			s.Plots[i].Name = s.PlotPrefix + s.Plots[i].Name
		}
	}
}

// designAnswer is the overview's answer: a sentence per design.
func (m *Model) designAnswer(run *result.Run) {
	for _, s := range m.Sections {
		first := "no completed point"
		if len(s.Answer.Sentences) > 0 {
			first = strings.TrimSuffix(s.Answer.Sentences[0], ".")
		}
		m.Answer.Sentences = append(m.Answer.Sentences, fmt.Sprintf("**%s**: %s.", s.Design, first))
	}
	m.Answer.Sentences = append(m.Answer.Sentences, fmt.Sprintf("The %d designs were measured in the same run, in turns, so that a host whose speed drifts touches each alike.", len(m.Sections)))
	sim := ""
	if m.Simulated {
		sim = "(simulated) "
	}
	for _, l := range VerdictLines(analysis.Conclude(run)) {
		m.Answer.Sentences = append(m.Answer.Sentences, sim+l)
	}
}

// designFigures are the overview's plots, one line per design: success
// rate, server RSS per client and, with a traffic phase, message rate.
func designFigures(run *result.Run, m *Model) []Plot {
	var succ, rss, rate []Series
	traffic := false
	for _, s := range m.Sections {
		ss, rs := Series{Label: s.Design}, Series{Label: s.Design}
		for _, r := range s.Rows {
			ss.X, ss.Y = append(ss.X, float64(r.Clients)), append(ss.Y, pctAxis(r.Rate))
		}
		for _, c := range analysis.Analyse(run.ForDesign(s.Design)).Costs {
			if c.ServerRSS > 0 {
				rs.X, rs.Y = append(rs.X, float64(c.Clients)), append(rs.Y, c.ServerRSS/1024)
			}
		}
		ts := Series{Label: s.Design}
		if d, ok := trafficData(run.ForDesign(s.Design)); ok {
			traffic = true
			ts.X, ts.Y = d.rate.X, d.rate.Y
		}
		succ, rss, rate = append(succ, ss), append(rss, rs), append(rate, ts)
	}
	for _, d := range analysis.Conclude(run).Designs {
		if d.Bend != nil {
			b := bendMark(*d.Bend)
			b.Label = d.Design + " " + b.Label
			rate = append(rate, b)
		}
	}
	plots := []Plot{
		percentLinePlot("design-success", "Success rate vs clients, by server design", "clients", "success %", succ),
		linePlot("design-rss", "Server RSS per client vs clients, by server design", "clients", "KiB per client", rss),
	}
	if traffic {
		plots = append(plots, linePlot("design-throughput", "Message rate vs clients, by server design", "clients", "msg/s", rate))
	}
	return plots
}

// designDocuments are the overview (report.md, report.html) and each
// design's report (report-<design>.md, .html) of a run of several
// designs.
func (m *Model) designDocuments() []Document {
	var docs []Document
	for _, s := range m.Sections {
		docs = append(docs, s.Document())
	}
	rows := make([][]string, len(m.Designs))
	for i, r := range m.Designs {
		rows[i] = r.Cells()
	}
	var env [][]string
	for _, kv := range m.Env {
		env = append(env, []string{kv[0], kv[1]})
	}
	plots := map[string]*Plot{}
	for i := range m.Plots {
		plots[m.Plots[i].Name] = &m.Plots[i]
	}
	// Each design's first sentence, linked to its report.
	var firsts []string
	for _, s := range m.Sections {
		f := ""
		if len(s.Answer.Sentences) > 0 {
			f = s.Answer.Sentences[0]
		}
		firsts = append(firsts, f)
	}
	type link struct {
		Design, Stem string
		Text         any
	}
	var md, html []link
	for i, s := range m.Sections {
		md = append(md, link{s.Design, s.Stem, firsts[i]})
		html = append(html, link{s.Design, s.Stem, richText(firsts[i : i+1])[0]})
	}
	return append(docs, Document{Stem: "report", Plots: m.Plots,
		Markdown: func() ([]byte, error) {
			return execMarkdown("designs", map[string]any{"M": m, "Env": mdTable([]string{"What", "Value"}, env),
				"Designs": mdTable(DesignHeader, rows), "Links": md})
		},
		HTML: func() ([]byte, error) {
			return execHTML("designs", map[string]any{"M": m, "Header": DesignHeader, "Rows": rows, "Plots": plots,
				"Sentences": richText(m.Answer.Sentences), "Links": html})
		}})
}
