// Package screen lays text out for the width of a terminal: it reads
// the width of the stream written to and wraps text at word boundaries.
package screen

import (
	"strings"
	"unicode/utf8"
)

// MinWidth is the narrowest layout: a terminal narrower than this, or a
// stream that is not a terminal, is laid out for 80 columns.
const MinWidth = 80

// Wrap breaks text into lines of at most width columns (Cols) at
// spaces. The first line starts with first, the others with rest
// (indents, counted in the width). A word longer than a line is left
// whole on its own.
func Wrap(text string, width int, first, rest string) []string {
	var lines []string
	line, n := first, Cols(first)
	empty := true
	for _, w := range strings.Fields(text) {
		wn := Cols(w)
		if !empty && n+1+wn > width {
			lines = append(lines, line)
			line, n, empty = rest, Cols(rest), true
		}
		if !empty {
			line += " "
			n++
		}
		line += w
		n += wn
		empty = false
	}
	return append(lines, line)
}

// WrapLines wraps text to width, keeping each line's indent. Lines of
// one indent run together as a paragraph up to a blank line, except a
// line with a column (a run of two or more spaces past the indent, as
// "  0  ok"), which is wrapped on its own with its continuations under
// the column.
func WrapLines(text string, width int) string {
	var out []string
	for _, l := range paragraphs(text) {
		body := strings.TrimLeft(l, " ")
		indent := l[:len(l)-len(body)]
		if body == "" {
			out = append(out, "")
			continue
		}
		head, rest := indent, indent
		if i := strings.Index(body, "  "); i > 0 {
			j := i + len(body[i:]) - len(strings.TrimLeft(body[i:], " "))
			if j < width/2 {
				head += body[:j]
				rest = indent + strings.Repeat(" ", utf8.RuneCountInString(body[:j]))
				body = body[j:]
			}
		}
		out = append(out, Wrap(body, width, head, rest)...)
	}
	return strings.Join(out, "\n")
}

// paragraphs joins the lines of text that run on: same indent, no
// column, no blank line between.
func paragraphs(text string) []string {
	var out []string
	column := func(l string) bool { return strings.Contains(strings.TrimLeft(l, " "), "  ") }
	indentOf := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	for _, l := range strings.Split(text, "\n") {
		if n := len(out); n > 0 && strings.TrimSpace(l) != "" && strings.TrimSpace(out[n-1]) != "" &&
			!column(l) && !column(out[n-1]) && indentOf(l) == indentOf(out[n-1]) {
			out[n-1] += " " + strings.TrimSpace(l)
			continue
		}
		out = append(out, l)
	}
	return out
}
