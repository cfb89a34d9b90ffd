package report

import (
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// WriteAll renders run into dir: report.md with its PNG plots beside it
// and/or report.html with the plots inline as SVG. The output depends on
// the run alone, so rendering a saved run again gives the same bytes. It
// returns the files written.
//
// A run of several server designs gets an overview, report.md and
// report.html with the capacity-by-design table, and each design's own
// report beside it (report-<design>.md, .html).
func WriteAll(run *result.Run, dir string, formats []string) ([]string, error) {
	var files []string
	for _, doc := range Documents(run, true) {
		fs, err := Write(dir, formats, doc)
		files = append(files, fs...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}

// Documents are run's reports, the overview last in a run of several
// designs; plots draws their figures (without: none, for a test of
// their text).
func Documents(run *result.Run, plots bool) []Document {
	m := NewModel(run)
	if len(m.Sections) == 0 {
		if plots {
			m.Plots = Figures(run, m)
		}
		return []Document{m.Document()}
	}
	if plots {
		m.sectionPlots(run)
		m.Plots = designFigures(run, m)
	}
	return m.designDocuments()
}

// Document is the run's report as report.md and report.html (a
// design's: its Stem's).
func (m *Model) Document() Document {
	stem := "report"
	if m.Stem != "" {
		stem = m.Stem
	}
	return Document{Stem: stem, Plots: m.Plots,
		Markdown: func() ([]byte, error) { return Markdown(m) },
		HTML:     func() ([]byte, error) { return HTML(m) }}
}

// Markdown renders the model with templates/report.md.tmpl; tables come
// from tablewriter's Markdown renderer.
func Markdown(m *Model) ([]byte, error) {
	var rows, rates, cost, walls, phases, rtt, steps, env, traffic [][]string
	for _, r := range m.Rows {
		st := r.Status
		if r.NonMonotonic {
			st += " ↯"
		}
		rows = append(rows, []string{itoa(r.Clients), itoa(r.Connected) + "/" + itoa(r.Attempted), Pct(r.Rate),
			Pct(r.CILow) + "–" + Pct(r.CIHigh), r.QPs, r.CQs, r.MRs, st})
	}
	if p := m.Interrupted; p != nil {
		rows = append(rows, []string{itoa(p.Clients), CutConnected(*p), "–", "–", "–", "–", "–", StatusInterrupted})
	}
	for _, r := range m.Rates {
		rates = append(rates, []string{itoa(r.Clients), r.Trial, itoa(r.Connected), r.ConnectSec, r.PerSec, r.StartupSec, r.HostHS, r.PerHS})
	}
	for _, c := range m.Costs {
		cost = append(cost, []string{itoa(c.Clients), c.QPs, c.CQs, c.MRs, c.PDs, c.RegisteredBytes, c.ServerBytes})
	}
	for _, w := range m.Walls {
		walls = append(walls, []string{w.Limit, w.Who, w.PerClient, w.Bound, w.Clients, w.Note})
	}
	for _, p := range m.Phases {
		phases = append(phases, []string{p.Phase, itoa(p.N), p.P50, p.P95, p.P99})
	}
	for _, r := range m.RTT {
		rtt = append(rtt, []string{itoa(r.Clients), itoa(r.N), r.P50, r.P95, r.P99, r.Max})
	}
	for i, s := range m.Method.Steps {
		d := "fail"
		if s.Passed {
			d = "pass"
		}
		steps = append(steps, []string{itoa(i + 1), itoa(s.Clients), itoa(s.Trials), Pct(s.Rate), d, StepNote(s)})
	}
	for _, kv := range m.Env {
		env = append(env, []string{kv[0], kv[1]})
	}
	for _, t := range m.Traffic {
		traffic = append(traffic, []string{itoa(t.Clients), t.Success, t.ConnectP50, t.Window, t.Unmeasured, t.P50, t.P99, t.P999, t.MsgRate, t.MBps,
			t.PerClient, t.ServerMem, t.ServerCPU, t.GenCPU, t.HostCPU, t.Errors, t.SLO})
	}
	return execMarkdown("report", map[string]any{
		"M":       m,
		"P":       m.PlotPrefix,
		"Source":  resourceSource(m),
		"Env":     mdTable([]string{"What", "Value"}, env),
		"Table":   mdTable([]string{"Clients", "Connected", "Success", "95% CI", "QPs", "CQs", "MRs", "Status"}, rows),
		"Rates":   mdTable([]string{"Clients", "Trial", "Connected", "Connect s", "Connects/s", "Start-up s", "Host speed (hs/s)", "Per hs"}, rates),
		"Cost":    mdTable([]string{"Clients", "QPs", "CQs", "MRs", "PDs", "Registered", "Server RSS"}, cost),
		"Walls":   mdTable([]string{"Limit", "Whose", "Per client", "Bound", "Runs out at (clients)", "Basis"}, walls),
		"Phases":  mdTable([]string{"Phase", "n", "p50", "p95", "p99"}, phases),
		"ByPoint": mdTable(m.PhaseHead, m.PhaseByPoint),
		"RTT":     mdTable([]string{"Clients", "n", "p50", "p95", "p99", "max"}, rtt),
		"Steps":   mdTable([]string{"#", "Clients", "Trials", "Success", "Decision", "Note"}, steps),
		"Traffic": mdTable([]string{"Clients", "Success", "Connect p50 ms", "Window s", "Unmeasured", "Latency p50", "p99", "p99.9", "Throughput msg/s", "MB/s",
			"Per client msg/s (min / median / max)", "Server memory", "Server CPU (cores)", "Generator CPU (cores)", "Host CPU (cores, softirq)", "Errors", "SLO"}, traffic),
	})
}

// HTML renders the model with templates/report.html.tmpl: one file, the
// plots inline as SVG, nothing loaded from elsewhere.
func HTML(m *Model) ([]byte, error) {
	cut := ""
	if p := m.Interrupted; p != nil {
		cut = CutConnected(*p)
	}
	plots := map[string]*Plot{}
	for i := range m.Plots {
		plots[strings.TrimPrefix(m.Plots[i].Name, m.PlotPrefix)] = &m.Plots[i]
	}
	return execHTML("report", map[string]any{"M": m, "Plots": plots, "Source": resourceSource(m), "Cut": cut, "CutStatus": StatusInterrupted,
		"Sentences": richText(m.Answer.Sentences), "Recs": richText(m.Recs)})
}

// resourceSource names where the last sampled row's resource counts came
// from, "" when none was sampled.
func resourceSource(m *Model) string {
	source := ""
	for _, r := range m.Rows {
		if r.Source != "" {
			source = r.Source
		}
	}
	return source
}
