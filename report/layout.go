package report

import (
	"bytes"
	"io"
	"slices"
	"strings"

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
	var b bytes.Buffer
	tb := tablewriter.NewTable(&b, tablewriter.WithRenderer(r), tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(t.align))
	pick := func(cells []string) []string {
		var out []string
		for i, c := range cells {
			if keep[i] {
				out = append(out, c)
			}
		}
		return out
	}
	tb.Header(pick(t.header))
	for _, row := range t.rows {
		if err := tb.Append(pick(row)); err != nil {
			return err
		}
	}
	if err := tb.Render(); err != nil {
		return err
	}
	s := b.String()
	if width <= 0 {
		// The plain renderer pads every cell, the last one too.
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " ")
		}
		s = strings.Join(lines, "\n")
	}
	_, err := io.WriteString(w, s)
	return err
}

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
