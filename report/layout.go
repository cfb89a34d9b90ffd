package report

import (
	"bytes"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/rdmaprobe/rdmaprobe/internal/screen"
)

// The terminal's layout: width is the columns of the terminal written
// to (screen.Width), 0 off a terminal, where lines are plain, whole
// and without boxes, so that a log greps well.

// table is a terminal table: its header, rows and alignment, and the
// columns that may be left out when it is too wide for the terminal,
// the first named first.
type table struct {
	header []string
	rows   [][]string
	align  tw.Align
	drop   []string
}

// render writes t for width columns: boxed on a terminal, leaving out
// t.drop's columns one by one until it fits, or plain columns off one.
// It returns the headers it left out.
func (t table) render(w io.Writer, width int) ([]string, error) {
	keep := make([]bool, len(t.header))
	for i := range keep {
		keep[i] = true
	}
	var left []string
	for next := 0; ; next++ {
		var b bytes.Buffer
		if err := t.draw(&b, width, keep); err != nil {
			return nil, err
		}
		if width <= 0 || widest(b.String()) <= width || next == len(t.drop) {
			_, err := w.Write(b.Bytes())
			return left, err
		}
		if i := slices.Index(t.header, t.drop[next]); i >= 0 {
			keep[i] = false
			left = append(left, t.drop[next])
		}
	}
}

func (t table) draw(w io.Writer, width int, keep []bool) error {
	r := renderer.NewBlueprint()
	if width <= 0 {
		r = renderer.NewBlueprint(tw.Rendition{Borders: tw.BorderNone, Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Separators: tw.Separators{BetweenRows: tw.Off, BetweenColumns: tw.On},
				Lines: tw.Lines{ShowHeaderLine: tw.Off}}})
	}
	pick := func(cells []string) []string {
		var out []string
		for i, c := range cells {
			if keep[i] {
				out = append(out, c)
			}
		}
		return out
	}
	var rows [][]string
	for _, row := range t.rows {
		rows = append(rows, pick(row))
	}
	s, err := terminalTables.render(pick(t.header), rows, tablewriter.WithRenderer(r), tablewriter.WithRowAlignment(t.align))
	if err != nil {
		return err
	}
	if width <= 0 {
		// The plain renderer pads every cell, the last one too.
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " ")
		}
		s = strings.Join(lines, "\n")
	}
	_, err = io.WriteString(w, s)
	return err
}

// tablePool keeps tablewriter tables made with the same options, reset
// between uses: a new one allocates a stringer cache of 10,240 entries
// that string cells never use, and a run's output and reports draw
// dozens of tables.
type tablePool struct {
	opts []tablewriter.Option
	pool sync.Pool
}

var (
	terminalTables = &tablePool{opts: []tablewriter.Option{tablewriter.WithHeaderAutoFormat(tw.Off)}}
	markdownTables = &tablePool{opts: []tablewriter.Option{tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone)}}
)

type pooledTable struct {
	tb  *tablewriter.Table
	buf bytes.Buffer
}

// render draws header and rows with the pool's options and use's: use
// must set whatever differs between uses (the renderer, the alignment),
// as a reused table keeps what an earlier use set.
func (p *tablePool) render(header []string, rows [][]string, use ...tablewriter.Option) (string, error) {
	pt, _ := p.pool.Get().(*pooledTable)
	if pt == nil {
		pt = &pooledTable{}
		pt.tb = tablewriter.NewTable(&pt.buf, append(slices.Clone(p.opts), tablewriter.WithStringerCacheCustom(noCache{}))...)
	}
	defer p.pool.Put(pt)
	pt.buf.Reset()
	pt.tb.Reset()
	pt.tb.Options(use...)
	pt.tb.Header(header)
	for _, r := range rows {
		if err := pt.tb.Append(r); err != nil {
			return "", err
		}
	}
	if err := pt.tb.Render(); err != nil {
		return "", err
	}
	return pt.buf.String(), nil
}

// noCache is a stringer cache that keeps nothing, so that a table's
// Reset has no map to make again.
type noCache struct{}

func (noCache) Add(reflect.Type, reflect.Value) bool   { return false }
func (noCache) Get(reflect.Type) (reflect.Value, bool) { return reflect.Value{}, false }
func (noCache) Purge()                                 {}

// widest is the display width of text's widest line.
func widest(text string) int {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		n = max(n, screen.Cols(l))
	}
	return n
}

// print is render, then the line that names the columns left out.
func (t table) print(w io.Writer, width int) error {
	left, err := t.render(w, width)
	if err == nil {
		leftOut(w, width, left)
	}
	return err
}

// leftOut is the line under a table that left columns out for the
// terminal's width.
func leftOut(w io.Writer, width int, cols []string) {
	if len(cols) > 0 {
		screen.Println(w, width, "(left out for the terminal's width: "+strings.Join(cols, ", ")+"; report.md has every column)")
	}
}
