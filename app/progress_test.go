package app

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/rdmaprobe/rdmaprobe/internal/testhosts"
	"github.com/rdmaprobe/rdmaprobe/report"
)

// On a terminal of 80 columns, a 100-client ramp launched at 50 a second
// shows its connect phase as a bar with its counts, rate and ETA while
// it runs (redrawn every 150 ms: a dozen times in its 2 s), and its
// point line once it is done.
func TestProgressBarOnATerminal(t *testing.T) {
	out, code := onTerminal(t, 80, "ramp", "--backend", "sim", "--clients", "100", "--connect-rate", "50",
		"--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--results", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	bar := regexp.MustCompile(`connect +\[=+>?-+\] \d+/100  \d+ ok  \d+\.\d/s  \d+s  ETA \d+s`)
	if !bar.MatchString(out) {
		t.Errorf("no connect bar with a rate and an ETA in:\n%q", out)
	}
	if !regexp.MustCompile(`(?m)^ *100 clients: 100/100 connected`).MatchString(escape.ReplaceAllString(out, "")) {
		t.Errorf("no point line in:\n%q", out)
	}
}

// Off a terminal (a log, CI), a phase says where it is in a plain line
// every plainEvery, with the same figures as the bar and no escapes.
func TestProgressLinesOffATerminal(t *testing.T) {
	defer func(d time.Duration) { plainEvery = d }(plainEvery)
	plainEvery = 200 * time.Millisecond
	var out lockedBuffer
	code := Main([]string{"rdmaprobe", "ramp", "--backend", "sim", "--clients", "60", "--connect-rate", "50",
		"--rounds", "1", "--msg-size", "64", "--traffic", "1s", "--calibrate", "0", "--results", t.TempDir()},
		Streams{In: bytes.NewReader(nil), Out: &out, Err: &out})
	got := out.String()
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, got)
	}
	connect := regexp.MustCompile(`(?m)^60 clients: connect \d+/60, \d+ ok, \d+\.\d/s, \d+s(, ETA \d+s)?$`)
	traffic := regexp.MustCompile(`(?m)^60 clients: traffic \d+s of 1s, \d+ msg/s$`)
	if !connect.MatchString(got) || !traffic.MatchString(got) {
		t.Errorf("want plain connect and traffic lines:\n%s", got)
	}
	if strings.Contains(got, "\x1b") || strings.Contains(got, "\r") {
		t.Errorf("escapes off a terminal:\n%q", got)
	}
}

// --quiet prints the verdict and nothing else.
func TestQuietPrintsTheVerdict(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "5,10", "--sim-max-qp", "8", "--rounds", "1",
		"--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--quiet", "--results", root)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	want := strings.Join(report.VerdictLines(*r.Verdict), "\n") + "\n"
	if out != want || errOut != "" {
		t.Errorf("--quiet printed:\n%s\nstderr:\n%s\nwant the verdict alone:\n%s", out, errOut, want)
	}
}

// With load generators on two SSH hosts, each host has a bar of its
// share under the connect bar, on the rdmaprobe binary's terminal.
func TestProgressBarPerHost(t *testing.T) {
	hosts := sshHosts.Get(t)
	exe := testhosts.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "ramp", "--backend", "sim", "--hosts", "h1,h2", "--ssh", "ssh -F "+hosts.Config,
		"--clients", "40", "--connect-rate", "40", "--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0",
		"--results", t.TempDir())
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var got bytes.Buffer
	io.Copy(&got, ptmx) // until the command exits (EIO)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ramp: %v\n%s", err, got.String())
	}
	for _, h := range hosts.Hosts[:2] {
		bar := regexp.MustCompile(`host ` + h + ` +\[[=>-]+\] \d+/20  \d+ ok  \d+\.\d/s`)
		if !bar.MatchString(got.String()) {
			t.Errorf("no bar of host %s in:\n%q", h, got.String())
		}
	}
}
