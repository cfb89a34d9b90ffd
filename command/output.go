package command

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultTailBytes is how much of a program's output is kept by default:
// enough for the last lines that say why it failed, bounded so that a
// program flooding its output costs the harness no memory.
const DefaultTailBytes = 4096

// maxLine bounds the line a matcher buffers; a longer line is matched on
// its first maxLine bytes.
const maxLine = 64 << 10

// output receives a program's stdout and stderr (one pipe, so their
// order is kept). It keeps the last tail bytes, counts them all, and
// matches each line against re until the first match.
type output struct {
	mu      sync.Mutex
	tail    []byte // ring of cap bytes
	start   int    // index of the oldest byte once full
	full    bool
	total   int64
	line    []byte
	re      *regexp.Regexp
	began   time.Time
	match   string
	matchAt time.Duration
	matched chan struct{}
}

func newOutput(tailBytes int, re *regexp.Regexp, began time.Time) *output {
	if tailBytes <= 0 {
		tailBytes = DefaultTailBytes
	}
	return &output{tail: make([]byte, 0, tailBytes), re: re, began: began, matched: make(chan struct{})}
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.total += int64(len(p))
	o.keep(p)
	if o.re != nil && o.match == "" {
		o.scan(p)
	}
	return len(p), nil
}

func (o *output) keep(p []byte) {
	c := cap(o.tail)
	if len(p) >= c {
		o.tail = append(o.tail[:0], p[len(p)-c:]...)
		o.start, o.full = 0, true
		return
	}
	for len(p) > 0 {
		if !o.full {
			n := min(c-len(o.tail), len(p))
			o.tail = append(o.tail, p[:n]...)
			p = p[n:]
			o.full = len(o.tail) == c
			continue
		}
		n := copy(o.tail[o.start:], p)
		p = p[n:]
		o.start = (o.start + n) % c
	}
}

func (o *output) scan(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxLine - len(o.line); room > 0 {
			o.line = append(o.line, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			return
		}
		p = p[i+1:]
		if o.re.Match(o.line) {
			o.found(string(o.line))
			return
		}
		o.line = o.line[:0]
	}
}

func (o *output) found(line string) {
	o.match = line
	o.matchAt = time.Since(o.began)
	o.line = nil
	close(o.matched)
}

// finish matches a last line that had no newline.
func (o *output) finish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.re != nil && o.match == "" && len(o.line) > 0 && o.re.Match(o.line) {
		o.found(string(o.line))
	}
}

// Tail returns the kept bytes, oldest first, cut to whole lines when
// something was dropped.
func (o *output) Tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.full {
		return string(o.tail)
	}
	b := append(append([]byte(nil), o.tail[o.start:]...), o.tail[:o.start]...)
	if i := bytes.IndexByte(b, '\n'); i >= 0 && i+1 < len(b) {
		b = b[i+1:]
	}
	return string(b)
}

// Total is how many bytes the program wrote.
func (o *output) Total() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// Match returns the first line that matched and when, after start.
func (o *output) Match() (string, time.Duration, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.match, o.matchAt, o.match != ""
}

// LastLines returns the last n non-empty lines of s, for one-line
// messages.
func LastLines(s string, n int) string { return LastLinesJoined(s, n, " | ") }

// LastLinesJoined is LastLines with sep between the lines.
func LastLinesJoined(s string, n int, sep string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append([]string{l}, keep...)
		}
	}
	return strings.Join(keep, sep)
}
