package screen

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/clipperhouse/displaywidth"
	"golang.org/x/term"
)

// Width is the number of columns to lay lines out for on w: a
// terminal's width, MinWidth at least (a size it cannot tell counts as
// MinWidth), or 0 when w is not a terminal: a log or a pipe gets each
// line whole, however long, so that it greps whole.
func Width(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return MinWidth
	}
	return max(cols, MinWidth)
}

// Cols is how many columns s takes on a terminal: a wide character
// (CJK, most emoji) takes two, a combining mark none.
func Cols(s string) int { return displaywidth.String(s) }

// Fit is line laid out for width columns (0: as it is): wrapped at
// word boundaries, each further line under the line's indent plus two.
// A line breaks after a clause ("; ") rather than inside the next one
// when that one then fits a line of its own.
func Fit(line string, width int) []string {
	if width <= 0 || Cols(line) <= width {
		return []string{line}
	}
	body := strings.TrimLeft(line, " ")
	indent := line[:len(line)-len(body)]
	rest := indent + "  "
	var out []string
	cur, n, empty := indent, Cols(indent), true
	for _, clause := range strings.SplitAfter(body, "; ") {
		clause = strings.TrimSpace(clause)
		if clause == "" {
			continue
		}
		cn := Cols(clause)
		sep := 1
		if empty {
			sep = 0
		}
		if !empty && n+sep+cn > width && Cols(rest)+cn <= width {
			out = append(out, cur)
			cur, n, empty, sep = rest, Cols(rest), true, 0
		}
		if n+sep+cn <= width {
			cur, n, empty = cur+strings.Repeat(" ", sep)+clause, n+sep+cn, false
			continue
		}
		// Too long for any line: its words wrap on from here.
		for _, w := range strings.Fields(clause) {
			wn := Cols(w)
			if !empty && n+1+wn > width {
				out = append(out, cur)
				cur, n, empty = rest, Cols(rest), true
			}
			if !empty {
				cur += " "
				n++
			}
			cur, n, empty = cur+w, n+wn, false
		}
	}
	return append(out, cur)
}

// Println writes line to w laid out for width columns (Fit).
func Println(w io.Writer, width int, line string) {
	for _, l := range Fit(line, width) {
		io.WriteString(w, l+"\n")
	}
}

// Lines is a writer that lays each line out for Width columns (Fit)
// before W gets it, for lines printed by code that knows no width (the
// guest's, a remote host's); a line written in pieces waits for its
// end. With Width 0 it writes through.
type Lines struct {
	W     io.Writer
	Width int

	mu  sync.Mutex
	buf []byte
}

func (l *Lines) Write(p []byte) (int, error) {
	if l.Width <= 0 {
		return l.W.Write(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		for _, s := range Fit(string(l.buf[:i]), l.Width) {
			if _, err := io.WriteString(l.W, s+"\n"); err != nil {
				return len(p), err
			}
		}
		l.buf = l.buf[i+1:]
	}
}
