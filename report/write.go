package report

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	texttemplate "text/template"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/rdmaprobe/rdmaprobe/probe"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/templates"
)

// Formats are the report formats WriteAll knows.
var Formats = []string{"md", "html"}

// Wilson95 is the interval reports use.
func Wilson95(k, n int) (float64, float64) { return probe.Wilson(k, n, probe.Z95) }

// WriteAll renders run into dir: report.md with its PNG plots beside it
// and/or report.html with the plots inline as SVG. The output depends on
// the run alone, so rendering a saved run again gives the same bytes. It
// returns the files written.
func WriteAll(run *result.Run, dir string, formats []string) ([]string, error) {
	for _, f := range formats {
		if f != "md" && f != "html" {
			return nil, fmt.Errorf("unknown report format %q (want md or html)", f)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := NewModel(run, Wilson95)
	m.Plots = Figures(run, m)
	var files []string
	write := func(name string, data []byte) error {
		p := filepath.Join(dir, name)
		if err := result.WriteFileAtomic(p, data, 0o644); err != nil {
			return err
		}
		files = append(files, p)
		return nil
	}
	for _, f := range formats {
		var data []byte
		var err error
		switch f {
		case "md":
			data, err = Markdown(m)
			if err == nil {
				for _, p := range m.Plots {
					if p.PNG != nil {
						if err := write(p.Name+".png", p.PNG); err != nil {
							return files, err
						}
					}
				}
			}
		case "html":
			data, err = HTML(m)
		}
		if err != nil {
			return files, err
		}
		if err := write("report."+f, data); err != nil {
			return files, err
		}
	}
	return files, nil
}

// Markdown renders the model with templates/report.md.tmpl; tables come
// from tablewriter's Markdown renderer.
func Markdown(m *Model) ([]byte, error) {
	t, err := texttemplate.ParseFS(templates.FS, "report.md.tmpl")
	if err != nil {
		return nil, err
	}
	var rows, rates, cost, phases, rtt, steps, env [][]string
	source := ""
	for _, r := range m.Rows {
		st := r.Status
		if r.NonMonotone {
			st += " ↯"
		}
		rows = append(rows, []string{itoa(r.Clients), itoa(r.Connected) + "/" + itoa(r.Attempted), Pct(r.Rate),
			Pct(r.CILow) + "–" + Pct(r.CIHigh), r.QPs, r.CQs, r.MRs, st})
		if r.Source != "" {
			source = r.Source
		}
	}
	for _, r := range m.Rates {
		rates = append(rates, []string{itoa(r.Clients), r.Trial, itoa(r.Connected), r.ConnectSec, r.PerSec, r.StartupSec, r.HostHS, r.PerHS})
	}
	for _, c := range m.Costs {
		cost = append(cost, []string{itoa(c.Clients), c.QPs, c.CQs, c.MRs, c.PDs, c.RegisteredBytes, c.ServerBytes})
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
		steps = append(steps, []string{itoa(i + 1), itoa(s.Clients), itoa(s.Trials), Pct(s.Rate), d, s.Note})
	}
	for _, kv := range m.Env {
		env = append(env, []string{kv[0], kv[1]})
	}
	data := map[string]any{
		"M":      m,
		"Source": source,
		"Env":    mdTable([]string{"What", "Value"}, env),
		"Table":  mdTable([]string{"Clients", "Connected", "Success", "95% CI", "QPs", "CQs", "MRs", "Status"}, rows),
		"Rates":  mdTable([]string{"Clients", "Trial", "Connected", "Connect s", "Connects/s", "Start-up s", "Host speed (hs/s)", "Per hs"}, rates),
		"Cost":   mdTable([]string{"Clients", "QPs", "CQs", "MRs", "PDs", "Registered", "Server RSS"}, cost),
		"Phases": mdTable([]string{"Phase", "n", "p50", "p95", "p99"}, phases),
		"RTT":    mdTable([]string{"Clients", "n", "p50", "p95", "p99", "max"}, rtt),
		"Steps":  mdTable([]string{"#", "Clients", "Trials", "Success", "Decision", "Note"}, steps),
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// mdTable renders a Markdown table, "" when there are no rows.
func mdTable(header []string, rows [][]string) string {
	if len(rows) == 0 {
		return ""
	}
	var b bytes.Buffer
	t := tablewriter.NewTable(&b, tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAutoWrap(tw.WrapNone))
	t.Header(header)
	for _, r := range rows {
		esc := make([]string, len(r))
		for i, c := range r {
			esc[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		t.Append(esc)
	}
	if err := t.Render(); err != nil {
		return ""
	}
	return b.String()
}

var bold = regexp.MustCompile(`\*\*(.+?)\*\*`)

// HTML renders the model with templates/report.html.tmpl: one file, the
// plots inline as SVG, nothing loaded from elsewhere.
func HTML(m *Model) ([]byte, error) {
	t, err := htmltemplate.New("report.html.tmpl").Funcs(htmlFuncs).ParseFS(templates.FS, "report.html.tmpl")
	if err != nil {
		return nil, err
	}
	plots := map[string]*Plot{}
	for i := range m.Plots {
		plots[m.Plots[i].Name] = &m.Plots[i]
	}
	source := ""
	for _, r := range m.Rows {
		if r.Source != "" {
			source = r.Source
		}
	}
	data := map[string]any{"M": m, "Plots": plots, "Source": source,
		"Sentences": richText(m.Answer.Sentences), "Recs": richText(m.Recs)}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// richText escapes s and turns the Markdown **bold** and `code` the
// model's sentences use into HTML.
func richText(ss []string) []htmltemplate.HTML {
	out := make([]htmltemplate.HTML, len(ss))
	for i, s := range ss {
		e := htmltemplate.HTMLEscapeString(s)
		e = bold.ReplaceAllString(e, "<strong>$1</strong>")
		e = code.ReplaceAllString(e, "<code>$1</code>")
		out[i] = htmltemplate.HTML(e)
	}
	return out
}

var code = regexp.MustCompile("`([^`]+)`")

var htmlFuncs = htmltemplate.FuncMap{
	"pct": Pct,
	"inc": func(i int) int { return i + 1 },
	// svg inlines a plot rendered by gonum from numbers and fixed labels
	// (safeLabel), never from run text.
	"svg": func(b []byte) htmltemplate.HTML { return htmltemplate.HTML(b) },
}

func itoa(n int) string { return fmt.Sprint(n) }
