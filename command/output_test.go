package command

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestOutputTail(t *testing.T) {
	o := newOutput(16, nil, time.Now())
	o.Write([]byte("abc\n"))
	if got := o.Tail(); got != "abc\n" {
		t.Errorf("short tail %q", got)
	}
	o.Write([]byte("0123456789\nxyz"))
	o.Write([]byte("\nend\n"))
	// 24 bytes written, 16 kept ("456789\nxyz\nend\n" plus one), cut to
	// the first whole line.
	if got := o.Tail(); got != "xyz\nend\n" || o.Total() != 23 {
		t.Errorf("tail %q (total %d), want %q of 23", got, o.Total(), "xyz\nend\n")
	}
	// A flood keeps memory at the tail's size.
	f := newOutput(DefaultTailBytes, nil, time.Now())
	chunk := []byte(strings.Repeat("y\n", 32<<10))
	for range 160 { // 10 MiB
		f.Write(chunk)
	}
	if tail := f.Tail(); len(tail) > DefaultTailBytes || !strings.HasSuffix(tail, "y\n") || cap(f.tail) != DefaultTailBytes {
		t.Errorf("flood: tail %d bytes (cap %d)", len(tail), cap(f.tail))
	}
	if f.Total() != 10<<20 {
		t.Errorf("flood total %d", f.Total())
	}
}

func TestOutputMatch(t *testing.T) {
	o := newOutput(64, regexp.MustCompile(`^connected qpn \d+`), time.Now())
	o.Write([]byte("starting\nconnec"))
	select {
	case <-o.matched:
		t.Fatal("matched a partial line")
	default:
	}
	o.Write([]byte("ted qpn 17 psn 5\nmore\n"))
	select {
	case <-o.matched:
	default:
		t.Fatal("no match")
	}
	if line, _, ok := o.Match(); !ok || line != "connected qpn 17 psn 5" {
		t.Errorf("match %q %v", line, ok)
	}
	// A line without a newline matches at the end; a giant line is
	// matched on its first maxLine bytes.
	o = newOutput(64, regexp.MustCompile(`^ok$`), time.Now())
	o.Write([]byte("ok"))
	o.finish()
	if _, _, ok := o.Match(); !ok {
		t.Error("unterminated last line not matched")
	}
	o = newOutput(64, regexp.MustCompile(`^x+$`), time.Now())
	o.Write([]byte(strings.Repeat("x", 3*maxLine) + "\n"))
	if line, _, ok := o.Match(); !ok || len(line) != maxLine {
		t.Errorf("long line: matched %v, %d bytes", ok, len(line))
	}
}

func TestLastLines(t *testing.T) {
	if got := LastLines("a\n\nb\nc\n\n", 2); got != "b | c" {
		t.Errorf("LastLines = %q", got)
	}
}
