package softroce

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"time"
)

// consoleTail copies console output to w and remembers the last lines and
// the first kernel panic line, which become error messages.
type consoleTail struct {
	mu      sync.Mutex
	w       io.Writer
	partial []byte
	lines   []string
	panic   string
	last    time.Time // when output last arrived; zero before any
}

func newConsoleTail(w io.Writer) *consoleTail { return &consoleTail{w: w} }

func (c *consoleTail) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = time.Now()
	if c.w != nil {
		if _, err := c.w.Write(p); err != nil {
			c.w = nil // keep scanning for panics even if the log fails
		}
	}
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(c.partial[:i]), "\r")
		c.partial = c.partial[i+1:]
		if c.panic == "" && strings.Contains(line, "Kernel panic") {
			c.panic = strings.TrimSpace(line)
		}
		c.lines = append(c.lines, line)
		if len(c.lines) > 50 {
			c.lines = c.lines[len(c.lines)-50:]
		}
	}
	return len(p), nil
}

// silentFor is how long no output has arrived, counted from since if
// none ever has.
func (c *consoleTail) silentFor(since time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last.After(since) {
		since = c.last
	}
	return time.Since(since)
}

func (c *consoleTail) panicLine() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.panic
}

// lastLines formats the tail for an error message.
func (c *consoleTail) lastLines(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	if len(l) == 0 {
		return ""
	}
	return "; last console lines: " + strings.Join(l, " | ")
}
