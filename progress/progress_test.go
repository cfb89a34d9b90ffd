package progress

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/runner"
)

// syncBuffer is a bytes.Buffer the test reads while a Screen writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// clock is a time the test sets.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Off a terminal, each phase says where it is in a plain line once
// Every has passed since it began or since its last line: the boot, the
// calibration, the connect phase (with its rate and ETA, and each
// generator host's counts) and the traffic phase, with no escapes. The
// test's clock moves by more than Every at each step, and not between.
func TestPlainLines(t *testing.T) {
	var out syncBuffer
	c := &clock{t: time.Unix(1000, 0)}
	s := New(&out, Options{Every: 50 * time.Millisecond, Traffic: 10 * time.Second})
	s.mu.Lock()
	s.now = c.now
	s.mu.Unlock()
	wait := func(line string) {
		t.Helper()
		eventually.True(t, 10*time.Second, "the line "+line, func() bool { return strings.Contains(out.String(), line+"\n") })
	}

	end := s.Boot()
	c.add(12 * time.Second)
	wait("guest boot 12s")
	end()
	fmt.Fprintln(s, "guest: ready")

	s.PointStarts("400 clients")
	s.Update(runner.Progress{Phase: runner.PhaseCalibration, Clients: 400})
	c.add(10 * time.Second)
	wait("400 clients: calibration 10s")
	s.Update(runner.Progress{Phase: runner.PhaseConnect, Clients: 400,
		Hosts: []runner.HostProgress{{Host: "a", Clients: 200}, {Host: "b", Clients: 200}}})
	s.Update(runner.Progress{Phase: runner.PhaseConnect, Clients: 400, Done: 200, OK: 198,
		Hosts: []runner.HostProgress{{Host: "a", Clients: 200, Done: 120, OK: 120}, {Host: "b", Clients: 200, Done: 80, OK: 78}}})
	c.add(10 * time.Second)
	wait("400 clients: connect 200/400, 198 ok, 20.0/s, 10s, ETA 10s\n" +
		"400 clients: host a 120/200, 120 ok, 12.0/s, 10s\n" +
		"400 clients: host b 80/200, 78 ok, 8.0/s, 10s")
	s.Update(runner.Progress{Phase: runner.PhaseTraffic, Clients: 400, Done: 400, OK: 400, Traffic: &runner.TrafficProgress{}})
	s.Update(runner.Progress{Phase: runner.PhaseTraffic, Clients: 400, Done: 400, OK: 400,
		Traffic: &runner.TrafficProgress{Messages: 41000, Sec: 10}})
	c.add(10 * time.Second)
	wait("400 clients: traffic 10s of 10s, 4100 msg/s")
	s.PointEnds()
	fmt.Fprintln(s, "400 clients: 400/400 connected")
	s.Close()

	want := "guest boot 12s\nguest: ready\n400 clients: calibration 10s\n" +
		"400 clients: connect 200/400, 198 ok, 20.0/s, 10s, ETA 10s\n" +
		"400 clients: host a 120/200, 120 ok, 12.0/s, 10s\n" +
		"400 clients: host b 80/200, 78 ok, 8.0/s, 10s\n" +
		"400 clients: traffic 10s of 10s, 4100 msg/s\n" +
		"400 clients: 400/400 connected\n"
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// Quiet writes nothing: the caller prints the verdict.
func TestQuiet(t *testing.T) {
	var out syncBuffer
	s := New(&out, Options{Quiet: true, Every: time.Millisecond})
	s.PointStarts("10 clients")
	s.Update(runner.Progress{Phase: runner.PhaseConnect, Clients: 10, Done: 5})
	fmt.Fprintln(s, "a point line")
	s.PointEnds()
	s.Close()
	if got := out.String(); got != "" {
		t.Errorf("quiet wrote %q", got)
	}
}

// A line written in pieces comes out whole, and a last piece without
// its end of line is ended at Close.
func TestWholeLines(t *testing.T) {
	var out syncBuffer
	s := New(&out, Options{})
	io.WriteString(s, "one ")
	if got := out.String(); got != "" {
		t.Fatalf("wrote half a line: %q", got)
	}
	io.WriteString(s, "line\ntwo")
	if got := out.String(); got != "one line\n" {
		t.Fatalf("wrote %q, want the first line", got)
	}
	s.Close()
	if got := out.String(); got != "one line\ntwo\n" {
		t.Fatalf("after Close %q", got)
	}
}

// On a terminal the connect phase is a bar with its counts, rate and
// ETA, lines written meanwhile come out above it whole, and Close
// leaves no bar behind.
func TestBarsOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 80, Rows: 24}); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	go io.Copy(&out, ptmx)
	if screen.Width(tty) != 80 {
		t.Fatal("a pty is not a terminal")
	}
	s := New(tty, Options{Traffic: 10 * time.Second})
	c := &clock{t: time.Now()}
	s.mu.Lock()
	s.now = c.now
	s.mu.Unlock()
	s.PointStarts("400 clients")
	s.Update(runner.Progress{Phase: runner.PhaseConnect, Clients: 400})
	bar := regexp.MustCompile(`connect +\[=*>?-*\] 0/400  0 ok  0\.0/s  \d+s`)
	eventually.True(t, 10*time.Second, "the connect bar", func() bool { return bar.MatchString(out.String()) })
	c.add(4 * time.Second)
	s.Update(runner.Progress{Phase: runner.PhaseConnect, Clients: 400, Done: 200, OK: 200})
	half := regexp.MustCompile(`connect +\[=+>?-+\] 200/400  200 ok  50\.0/s  4s  ETA 4s`)
	eventually.True(t, 10*time.Second, "the bar half full with its rate and ETA", func() bool { return half.MatchString(out.String()) })
	fmt.Fprintln(s, "note: a line above the bar")
	eventually.True(t, 10*time.Second, "the line", func() bool {
		return strings.Contains(out.String(), "note: a line above the bar\r\n")
	})
	// The traffic bar fills with the time between the once-a-second counts.
	s.Update(runner.Progress{Phase: runner.PhaseTraffic, Clients: 400, Done: 400, OK: 400, Traffic: &runner.TrafficProgress{}})
	c.add(5 * time.Second)
	traffic := regexp.MustCompile(`traffic +\[=+>?-+\] 5s of 10s  0 msg/s`)
	eventually.True(t, 10*time.Second, "the traffic bar half full", func() bool { return traffic.MatchString(out.String()) })
	s.PointEnds()
	s.Close()
	for _, l := range strings.Split(out.String(), "\n") {
		if n := len([]rune(strings.TrimRight(stripEscapes(l), "\r"))); n > 80 {
			t.Errorf("a row of %d columns: %q", n, l)
		}
	}
	// After Close, writes go straight to the terminal.
	fmt.Fprintln(s, "after")
	eventually.True(t, 10*time.Second, "a write after Close", func() bool { return strings.Contains(out.String(), "after\r\n") })
}

var escape = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

func stripEscapes(s string) string { return escape.ReplaceAllString(s, "") }

// A terminal that goes away mid-run (its window closed) stops the bars,
// not the run: Update, Write and Close still return.
func TestTerminalGone(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	s := New(tty, Options{})
	s.PointStarts("10 clients")
	s.Update(runner.Progress{Phase: runner.PhaseConnect, Clients: 10, Done: 1})
	tty.Close() // mpb can no longer read its size: it stops drawing
	eventually.True(t, 20*time.Second, "mpb to stop", func() bool {
		select {
		case <-s.ended:
			return true
		default:
			return false
		}
	})
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for i := range 20 {
			s.Update(runner.Progress{Phase: runner.PhaseConnect, Clients: 10, Done: 1 + i%9})
			fmt.Fprintln(s, "a line")
		}
		s.PointEnds()
		s.Close()
	}()
	eventually.True(t, 20*time.Second, "the Screen returns on a terminal gone", func() bool {
		select {
		case <-returned:
			return true
		default:
			return false
		}
	})
}
