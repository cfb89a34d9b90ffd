package report

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	texttemplate "text/template"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"

	"github.com/rdmaprobe/rdmaprobe/report/templates"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Formats are the report formats Write knows.
var Formats = []string{"md", "html"}

// Document is one report ready to write, whatever it reports on (a run,
// a bench run, a comparison of either): the stem of its file names
// ("report", "compare"), the plots its Markdown links as PNG files beside
// it (the HTML inlines them as SVG), and a renderer per format.
type Document struct {
	Stem     string
	Plots    []Plot
	Markdown func() ([]byte, error)
	HTML     func() ([]byte, error)
}

// Write renders doc into dir in each of formats: stem.md with its plots
// as PNG files beside it, and/or stem.html with the plots inline, so the
// HTML is one self-contained file. Every report the package makes is
// written here, so they name, order and replace their files alike: each
// file is replaced atomically, and the same model gives the same bytes.
// It returns the files written, plots before the document that links
// them.
func Write(dir string, formats []string, doc Document) ([]string, error) {
	for _, f := range formats {
		if f != "md" && f != "html" {
			return nil, fmt.Errorf("unknown report format %q (want md or html)", f)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
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
		render := doc.HTML
		if f == "md" {
			render = doc.Markdown
		}
		data, err := render()
		if err != nil {
			return files, fmt.Errorf("render %s.%s: %w", doc.Stem, f, err)
		}
		if f == "md" {
			for _, p := range doc.Plots {
				if p.PNG != nil {
					if err := write(p.Name+".png", p.PNG); err != nil {
						return files, err
					}
				}
			}
		}
		if err := write(doc.Stem+"."+f, data); err != nil {
			return files, err
		}
	}
	return files, nil
}

// execMarkdown runs templates/name.md.tmpl (text/template) on data.
func execMarkdown(name string, data any) ([]byte, error) {
	t, err := parsed(name+".md.tmpl", func(file string) (*texttemplate.Template, error) {
		return texttemplate.ParseFS(templates.FS, file)
	})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// execHTML runs templates/name.html.tmpl (html/template, so run text is
// escaped) on data.
func execHTML(name string, data any) ([]byte, error) {
	t, err := parsed(name+".html.tmpl", func(file string) (*htmltemplate.Template, error) {
		return htmltemplate.New(file).Funcs(htmlFuncs).ParseFS(templates.FS, file)
	})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// templatesParsed holds each template file parsed, by name.
var templatesParsed sync.Map

// parsed is template file, parsed at its first use: the files are
// embedded, and parsing one took longer than rendering a run with it.
// Both template packages execute a parsed template safely in parallel.
func parsed[T any](file string, parse func(string) (T, error)) (T, error) {
	if t, ok := templatesParsed.Load(file); ok {
		return t.(T), nil
	}
	t, err := parse(file)
	if err != nil {
		return t, err
	}
	t2, _ := templatesParsed.LoadOrStore(file, t)
	return t2.(T), nil
}

// Table is a header and rows, rendered by mdTable for Markdown and by the
// "table" template for HTML; the first column is a label.
type Table struct {
	ID     string
	Header []string
	Rows   [][]string
}

// mdTable renders a Markdown table, "" when there are no rows.
func mdTable(header []string, rows [][]string) string {
	if len(rows) == 0 {
		return ""
	}
	var escaped [][]string
	for _, r := range rows {
		esc := make([]string, len(r))
		for i, c := range r {
			esc[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		escaped = append(escaped, esc)
	}
	s, err := markdownTables.render(header, escaped, tablewriter.WithRenderer(renderer.NewMarkdown()))
	if err != nil {
		return ""
	}
	return s
}

var (
	bold = regexp.MustCompile(`\*\*(.+?)\*\*`)
	code = regexp.MustCompile("`([^`]+)`")
)

// richText escapes s, draws its status marks (markHTML) and turns the
// Markdown **bold** and `code` the models' sentences use into HTML.
func richText(ss []string) []htmltemplate.HTML {
	out := make([]htmltemplate.HTML, len(ss))
	for i, s := range ss {
		e := string(markHTML(s))
		e = bold.ReplaceAllString(e, "<strong>$1</strong>")
		e = code.ReplaceAllString(e, "<code>$1</code>")
		out[i] = htmltemplate.HTML(e)
	}
	return out
}

var htmlFuncs = htmltemplate.FuncMap{
	"pct": Pct,
	"inc": func(i int) int { return i + 1 },
	// mark draws the status marks (✅ ⚠️ ❌ ↯ ⏸) in run text as inline SVG.
	"mark": markHTML,
	// svg inlines a plot rendered by gonum from numbers and fixed labels
	// (safeLabel), never from run text.
	"svg": func(b []byte) htmltemplate.HTML { return htmltemplate.HTML(b) },
	// code turns `x` spans of a Markdown line into <code>x</code>, the
	// rest escaped.
	"code": codeHTML,
}

func codeHTML(s string) htmltemplate.HTML {
	var b strings.Builder
	for i, part := range strings.Split(s, "`") {
		if i%2 == 1 {
			b.WriteString("<code>" + htmltemplate.HTMLEscapeString(part) + "</code>")
		} else {
			b.WriteString(htmltemplate.HTMLEscapeString(part))
		}
	}
	return htmltemplate.HTML(b.String())
}

func itoa(n int) string { return fmt.Sprint(n) }
