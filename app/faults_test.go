package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// childPID finds a child process of this test whose command line has the
// subcommand sub ("serve", "clients"), waiting for it to appear.
func childPID(t *testing.T, sub string) int {
	t.Helper()
	var pid int
	eventually.True(t, 60*time.Second, "a "+sub+" child appears", func() bool {
		// The newest match: this process is a subreaper (command.Start),
		// so an orphan an earlier test left can be a child too.
		var newest uint64
		pid = 0
		for _, k := range children(t) {
			p, _ := strconv.Atoi(strings.Fields(k)[0])
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
			if !strings.Contains(string(cmd), "\x00"+sub+"\x00") {
				continue
			}
			if start := startTime(p); pid == 0 || start > newest {
				pid, newest = p, start
			}
		}
		return pid != 0
	})
	return pid
}

// startTime is when process pid started, in clock ticks since boot
// (/proc/pid/stat's 22nd field), or 0.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64) // field 22: the 20th after comm
	return v
}

// progressConnected is the most clients connected that a run's progress
// events (JSON lines, docs/events.md) report.
func progressConnected(events string) int {
	most := 0
	for _, line := range strings.Split(events, "\n") {
		var ev struct {
			Type      string `json:"type"`
			Connected int    `json:"connected"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "progress" {
			most = max(most, ev.Connected)
		}
	}
	return most
}

// serving waits until process pid holds more than n sockets: a server
// with clients connected (the generators start before it is ready, so
// their existence says nothing).
func serving(t *testing.T, pid, n int) {
	t.Helper()
	eventually.True(t, 60*time.Second, fmt.Sprintf("process %d holds more than %d sockets", pid, n), func() bool {
		ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		socks := 0
		for _, e := range ents {
			if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
				socks++
			}
		}
		return socks > n
	})
}

type runResult struct {
	out, errOut string
	code        int
}

// background is a whole command running in-process, started by
// runAsync: interrupt does to it what Ctrl-C does, done delivers its
// result once it exits, and out and errOut can be read while it runs.
type background struct {
	done        chan runResult
	interrupt   context.CancelFunc
	out, errOut lockedBuffer
}

func runAsync(t *testing.T, args ...string) *background {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := &background{done: make(chan runResult, 1), interrupt: cancel}
	go func() {
		code := MainContext(ctx, append([]string{"rdmaprobe"}, args...), Streams{In: bytes.NewReader(nil), Out: &b.out, Err: &b.errOut})
		b.done <- runResult{b.out.String(), b.errOut.String(), code}
	}()
	return b
}

func noChildren(t *testing.T) {
	t.Helper()
	if kids := children(t); len(kids) != 0 {
		t.Errorf("child processes left: %v", kids)
	}
}

// The server killed mid-point: the point is recorded as failed with the
// reason, the search goes on (or stops with --stop-on-error), the JSON
// keeps every point and no process is left.
func TestFaultServerKilledMidPoint(t *testing.T) {
	for _, stop := range []bool{false, true} {
		t.Run("stop-on-error="+strconv.FormatBool(stop), func(t *testing.T) {
			root := t.TempDir()
			args := []string{"ramp", "--backend", "sim", "--clients", "100,20", "--connect-rate", "100",
				"--rounds", "1", "--msg-size", "64", "--timeout", "10s", "--traffic", "0", "--calibrate", "0", "--results", root}
			if stop {
				args = append(args, "--stop-on-error")
			}
			cmd := runAsync(t, args...)
			srv := childPID(t, "serve")
			serving(t, srv, 5) // the point is under way
			if err := syscall.Kill(srv, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			r := <-cmd.done
			run := loadOnlyRun(t, root)
			if len(run.Points) == 0 || !strings.Contains(run.Points[0].Error, "server died") || run.Points[0].Passed {
				t.Fatalf("first point %+v", run.Points)
			}
			if stop {
				if r.code != 1 || !strings.Contains(r.errOut, "point failed at 100 clients") || strings.Count(strings.TrimSpace(r.errOut), "\n") != 0 {
					t.Errorf("exit %d, stderr %q", r.code, r.errOut)
				}
				if len(run.Points) != 1 || run.Complete || !strings.Contains(run.Error, "point failed") {
					t.Errorf("stopped run: %d points, complete %v, error %q", len(run.Points), run.Complete, run.Error)
				}
			} else {
				if r.code != 0 || len(run.Points) != 2 || !run.Complete || run.Points[1].SuccessRate != 1 {
					t.Errorf("exit %d, points %v, complete %v\n%s", r.code, clientsOf(run), run.Complete, r.errOut)
				}
			}
			noChildren(t)
		})
	}
}

// A load generator that hangs (stopped) is declared hung after the
// clients' deadline and the slack (1 s here, not 10), its clients
// recorded as timeouts, and it is reaped.
func TestFaultGeneratorHangs(t *testing.T) {
	defer func(s time.Duration) { generatorSlack = s }(generatorSlack)
	generatorSlack = time.Second
	root := t.TempDir()
	cmd := runAsync(t, "ramp", "--backend", "sim", "--clients", "100", "--connect-rate", "100", "--rounds", "1",
		"--msg-size", "64", "--timeout", "1s", "--calibrate", "0", "--results", root)
	gen := childPID(t, "clients")
	serving(t, childPID(t, "serve"), 5) // released: the clients are connecting
	if err := syscall.Kill(gen, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r := <-cmd.done
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	p := loadOnlyRun(t, root).Points[0]
	if !strings.Contains(p.Error, "hung") || p.Outcomes[result.OutcomeTimeout] == 0 || p.Attempted != 100 {
		t.Errorf("point error %q outcomes %v attempted %d", p.Error, p.Outcomes, p.Attempted)
	}
	noChildren(t)
}

// A results directory that cannot be created, or that fills up: one
// line naming the problem and a non-zero exit; no process is left.
func TestFaultResultsUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "5", "--results", filepath.Join(file, "results"))
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "not a directory") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}

	// A full file system: a 64 KiB tmpfs holds the run directory but not a
	// point with 200 client records.
	full := t.TempDir()
	if err := syscall.Mount("tmpfs", full, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v); needs root", err)
	}
	defer syscall.Unmount(full, 0)
	_, errOut, code = run(t, "ramp", "--backend", "sim", "--clients", "200", "--rounds", "1", "--msg-size", "64",
		"--traffic", "0", "--calibrate", "0", "--results", full)
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "no space left") {
		t.Errorf("full disk: exit %d, stderr %q", code, errOut)
	}
	noChildren(t)
}

// The QEMU guest dying mid-run: the points it already streamed back are
// saved, the run says why it stopped, the exit is non-zero and QEMU is
// reaped.
//
// Own boot: the test kills the guest.
func TestFaultGuestDies(t *testing.T) {
	needVM(t)
	ownGuest(t)
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events.jsonl")
	cmd := runAsync(t, "ramp", "--backend", "vm", "--clients", "8,2000", "--rounds", "1", "--traffic", "0", "--calibrate", "0",
		"--vm-mem", "2048", "--vm-no-reference", "--results", root, "--events", events)
	// Wait until the first point is saved and the guest has reported the
	// second under way (more clients connected than the first point had),
	// then kill QEMU: killed any sooner, the guest dies between the points,
	// before the second was sent to it, and no point is cut short.
	eventually.True(t, 3*time.Minute, "the first point is saved and the 2000 point is under way", func() bool {
		b, _ := os.ReadFile(events)
		return savedPoints(root) == 1 && progressConnected(string(b)) > 8
	})
	qemu := childPID(t, "-nic")
	if err := syscall.Kill(qemu, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-cmd.done
	run := loadOnlyRun(t, root)
	if r.code == 0 || !strings.Contains(r.errOut, "guest") || strings.Count(strings.TrimSpace(r.errOut), "\n") != 0 {
		t.Errorf("exit %d, stderr %q", r.code, r.errOut)
	}
	if len(run.Points) != 1 || run.Points[0].SuccessRate != 1 || run.Complete || run.Error == "" {
		t.Errorf("points %v complete %v error %q", clientsOf(run), run.Complete, run.Error)
	}
	// The point the guest died in is kept apart, cut short, with how far
	// its last progress report said it got and the host's samples of
	// QEMU; it is not a failed count.
	if p := run.Interrupted; p == nil || !p.Interrupted || p.Clients != 2000 || !strings.Contains(p.Error, "guest") ||
		len(p.Samples) == 0 || p.Attempted > 2000 || p.Connected > p.Attempted {
		t.Errorf("point cut short by the dead guest: %+v", p)
	}
	if run.Search == nil || run.Search.FirstFail != 0 || run.Diagnosis != nil {
		t.Errorf("search %+v, diagnosis %+v: the point cut short counted as a failure", run.Search, run.Diagnosis)
	}
	if !strings.Contains(r.errOut, "and the one cut short (2000 clients") {
		t.Errorf("stderr %q does not say the point cut short was saved", r.errOut)
	}
	noChildren(t)
}

// Ctrl-C in the middle of a point, with the real server and load
// generator processes on sim: the point keeps the outcomes its clients
// had (marked interrupted, with how far it got and its samples), the
// table and the reports show it as interrupted, the search does not
// count it as a failed count, the exit is 130 and no process is left.
func TestFaultInterruptedPointIsKept(t *testing.T) {
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events.jsonl")
	cmd := runAsync(t, "ramp", "--backend", "sim", "--clients", "10,3000", "--connect-rate", "300",
		"--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--sample-interval", "100ms", "--results", root,
		"--events", events)
	// 50 clients of the second point connected, by its progress: a count
	// of the server's sockets also counts handshakes under way, which
	// under load can outnumber the clients done.
	eventually.True(t, 2*time.Minute, "50 clients of the 3000 point are connected", func() bool {
		b, _ := os.ReadFile(events)
		return progressConnected(string(b)) >= 50
	})
	cmd.interrupt()
	r := <-cmd.done
	if r.code != ExitInterrupted || !strings.Contains(r.errOut, "and the one cut short (3000 clients:") {
		t.Errorf("exit %d, stderr %q; want %d naming the point cut short", r.code, r.errOut, ExitInterrupted)
	}
	run := loadOnlyRun(t, root)
	p := run.Interrupted
	if len(run.Points) != 1 || p == nil {
		t.Fatalf("points %v, interrupted %+v: want the 10-client point and the one cut short apart", clientsOf(run), p)
	}
	if !p.Interrupted || p.Clients != 3000 || p.Error != "interrupted" || p.Connected < 40 || p.Attempted >= 3000 ||
		len(p.Records) != p.Attempted || len(p.Samples) == 0 || p.Passed {
		t.Errorf("point cut short: interrupted %v, %d clients, error %q, %d/%d connected, %d records, %d samples, passed %v",
			p.Interrupted, p.Clients, p.Error, p.Connected, p.Attempted, len(p.Records), len(p.Samples), p.Passed)
	}
	// Cut short, its clients are not failures: only those that failed on
	// their own before Ctrl-C may count.
	if p.Outcomes[result.OutcomeTimeout] > p.Attempted/10 {
		t.Errorf("outcomes %v: the clients cut short were counted as timeouts", p.Outcomes)
	}
	if run.Search == nil || run.Search.Capacity != 10 || run.Search.FirstFail != 0 || run.Diagnosis != nil || run.Error != "interrupted" {
		t.Errorf("search %+v, diagnosis %+v, error %q: the point cut short must not count as a failure", run.Search, run.Diagnosis, run.Error)
	}
	for _, want := range []string{"3000 clients: cut short (interrupted)", "⏸ interrupted", "of 3000 ", "The point at 3,000 clients was cut short"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "❌") {
		t.Errorf("output marks something failed:\n%s", r.out)
	}
	runs, _ := filepath.Glob(filepath.Join(root, "*", result.FileName+"*"))
	dir := filepath.Dir(runs[0])
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !strings.Contains(string(md), " of 3000 |") || !strings.Contains(string(md), "⏸ interrupted") || strings.Contains(string(md), "| ❌ fail") {
		t.Errorf("report.md does not show the point as interrupted:\n%s", md)
	}
	if !strings.Contains(string(html), `data-mark="interrupted"`) || strings.Contains(string(html), "⏸") {
		t.Errorf("report.html does not draw the interrupted mark as SVG")
	}
	noChildren(t)
}
