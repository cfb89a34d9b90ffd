package app

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"

	"github.com/rdmaprobe/rdmaprobe/internal/screen"
)

// escape is a terminal control sequence: CSI (colours, cursor moves,
// line erase) or a lone ESC pair.
var escape = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|[@-_])`)

// onTerminal runs rdmaprobe with stdout and stderr on a pseudo-terminal
// of cols columns, the path a user's terminal takes, and returns what
// the terminal received.
func onTerminal(t *testing.T, cols int, args ...string) (string, int) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: uint16(cols)}); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		// EIO once the terminal side is closed and drained.
		if _, err := io.Copy(&got, ptmx); err != nil && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
			t.Errorf("reading the terminal: %v", err)
		}
	}()
	code := Main(append([]string{"rdmaprobe"}, args...), Streams{In: bytes.NewReader(nil), Out: tty, Err: tty})
	tty.Close()
	<-done
	return got.String(), code
}

// On a terminal of 80 columns every line the search of issue 52 draws
// fits: its point lines, next: lines, table and diagnosis included
// (the terminal's own line ends are \r\n; a progress line redrawn
// after \r counts on its own).
func TestSearchFits80Columns(t *testing.T) {
	t.Chdir(t.TempDir()) // a path is one word: no line can hold a longer one
	out, code := onTerminal(t, 80, "search", "--backend", "sim", "--lo", "50", "--hi", "300", "--sim-max-qp", "200",
		"--traffic", "300ms", "--calibrate", "50ms", "--results", "results")
	if code != ExitMeasured {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The terminal's path: a boxed table, the verdict, the diagnosis.
	fits(t, out, 80, "┌", "Verdict at the 100% threshold: capacity 200;", "limiting factor: ")
}

// The bench's tables keep the columns that fit, too.
func TestBenchFits80Columns(t *testing.T) {
	t.Chdir(t.TempDir()) // a path is one word: no line can hold a longer one
	out, code := onTerminal(t, 80, "bench", "--backend", "sim", "--ops", "200", "--concurrency", "20", "--results", "r")
	if code != ExitMeasured {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	fits(t, out, 80, "┌", "(left out for the terminal's width: ")
}

// fits checks that no line of what a terminal received is wider than
// cols, and that it has each of wants.
func fits(t *testing.T, out string, cols int, wants ...string) {
	t.Helper()
	plain := escape.ReplaceAllString(out, "")
	over := 0
	for _, l := range regexp.MustCompile(`[\r\n]`).Split(plain, -1) {
		if n := screen.Cols(l); n > cols {
			over++
			t.Errorf("%d columns: %s", n, l)
		}
	}
	for _, want := range wants {
		if !strings.Contains(plain, want) {
			t.Errorf("no %q in:\n%s", want, plain)
		}
	}
	if over > 0 {
		t.Logf("the whole output:\n%s", plain)
	}
}

// Off a terminal the lines are plain: no box, no escape, each line
// whole (a point's lines, the verdict's line), so that a log greps.
func TestOffTerminalPlainLines(t *testing.T) {
	out, errOut, code := run(t, "search", "--backend", "sim", "--lo", "4", "--hi", "12", "--sim-max-qp", "8",
		"--rounds", "1", "--msg-size", "64", "--traffic", "300ms", "--calibrate", "0", "--results", t.TempDir())
	if code != ExitMeasured {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.ContainsAny(out+errOut, "\x1b\r┌│└─") {
		t.Errorf("a box or an escape off a terminal:\n%s%s", out, errOut)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^     9 clients: 8/9 connected \(88\.9%\), [0-9.]+ s \[simulated\] — qp-create 1$`),
		regexp.MustCompile(`(?m)^\(simulated\) Verdict at the 100% threshold: capacity 8; first failure 9; highest tested 12; .*\.$`),
		regexp.MustCompile(`(?m)^limiting factor: .* → .*$`),
		regexp.MustCompile(`(?m)^\s+9\s+8/9\s+88\.9%.*❌ fail$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("no line matching %s in:\n%s", want, out)
		}
	}
}
