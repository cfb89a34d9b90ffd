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
