package screen

import (
	"strings"
	"testing"
)

func TestWrap(t *testing.T) {
	for _, c := range []struct {
		text, first, rest string
		width             int
		want              []string
	}{
		{"a bb ccc dddd", "", "", 6, []string{"a bb", "ccc", "dddd"}},
		{"a bb ccc", "> ", "  ", 7, []string{"> a bb", "  ccc"}},
		{"averyveryverylongword x", "", "", 5, []string{"averyveryverylongword", "x"}},
		{"", "head", "", 10, []string{"head"}},
		{"MB/s ×1000 per-client", "", "", 10, []string{"MB/s ×1000", "per-client"}},
	} {
		if got := Wrap(c.text, c.width, c.first, c.rest); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Wrap(%q, %d) = %q, want %q", c.text, c.width, got, c.want)
		}
	}
}

// A paragraph runs on across its lines; a line with a column wraps on
// its own, under the column.
func TestWrapLines(t *testing.T) {
	in := "one two\nthree four\n\n  0  zero is fine here\n 10  ten"
	want := "one two three\nfour\n\n  0  zero is\n     fine here\n 10  ten"
	if got := WrapLines(in, 14); got != want {
		t.Errorf("WrapLines:\n%s\nwant:\n%s", got, want)
	}
}

// Fit breaks after a clause when the next one then fits a line, wraps
// a clause too long for any line word by word, and counts a wide
// character as two columns.
func TestFit(t *testing.T) {
	for _, c := range []struct {
		line  string
		width int
		want  []string
	}{
		{"  aa bb; cc dd", 0, []string{"  aa bb; cc dd"}},
		{"  aa bb; cc dd", 14, []string{"  aa bb; cc dd"}},
		{"  aa bb; cc dd", 10, []string{"  aa bb;", "    cc dd"}},
		{"x aaaa bbbb cccc; dd", 10, []string{"x aaaa", "  bbbb", "  cccc; dd"}},
		{"ok ✅ pass", 9, []string{"ok ✅", "  pass"}},
		{"a; averyveryverylongword; b", 8, []string{"a;", "  averyveryverylongword;", "  b"}},
	} {
		got := Fit(c.line, c.width)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Fit(%q, %d) = %q, want %q", c.line, c.width, got, c.want)
		}
		for _, l := range got {
			if c.width > 0 && Cols(l) > c.width && !strings.Contains(l, "long") {
				t.Errorf("Fit(%q, %d): %q is %d columns", c.line, c.width, l, Cols(l))
			}
		}
	}
}

// Lines lays out each whole line, however it was written, and writes
// through at width 0.
func TestLines(t *testing.T) {
	var b strings.Builder
	l := &Lines{W: &b, Width: 10}
	l.Write([]byte("guest: aa"))
	l.Write([]byte(" bb cc\nok\n"))
	if got, want := b.String(), "guest: aa\n  bb cc\nok\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	b.Reset()
	(&Lines{W: &b}).Write([]byte("a long line, not laid out\n"))
	if b.String() != "a long line, not laid out\n" {
		t.Errorf("width 0: %q", b.String())
	}
}
