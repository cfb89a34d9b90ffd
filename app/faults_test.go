package app

import (
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

// child finds a child process of this test whose command line has the
// subcommand sub ("serve", "clients"), waiting for it to appear.
func child(t *testing.T, sub string) int {
	t.Helper()
	var pid int
	eventually.True(t, 60*time.Second, "a "+sub+" child appears", func() bool {
		for _, k := range children(t) {
			pid, _ = strconv.Atoi(strings.Fields(k)[0])
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if strings.Contains(string(cmd), "\x00"+sub+"\x00") {
				return true
			}
		}
		return false
	})
	return pid
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

func runAsync(t *testing.T, args ...string) chan runResult {
	done := make(chan runResult, 1)
	go func() {
		out, errOut, code := run(t, args...)
		done <- runResult{out, errOut, code}
	}()
	return done
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
			args := []string{"ramp", "--backend", "sim", "--clients", "200,20", "--rate", "100",
				"--rounds", "1", "--msg-size", "64", "--timeout", "10s", "--results", root}
			if stop {
				args = append(args, "--stop-on-error")
			}
			done := runAsync(t, args...)
			srv := child(t, "serve")
			serving(t, srv, 5) // the point is under way
			if err := syscall.Kill(srv, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			r := <-done
			run := loadOnlyRun(t, root)
			if len(run.Points) == 0 || !strings.Contains(run.Points[0].Error, "server died") || run.Points[0].Passed {
				t.Fatalf("first point %+v", run.Points)
			}
			if stop {
				if r.code != 1 || !strings.Contains(r.errOut, "point failed at 200 clients") || strings.Count(strings.TrimSpace(r.errOut), "\n") != 0 {
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
// clients' deadline, its clients recorded as timeouts, and it is reaped.
func TestFaultGeneratorHangs(t *testing.T) {
	root := t.TempDir()
	done := runAsync(t, "ramp", "--backend", "sim", "--clients", "300", "--rate", "100", "--rounds", "1",
		"--msg-size", "64", "--timeout", "2s", "--results", root)
	gen := child(t, "clients")
	serving(t, child(t, "serve"), 5) // released: the clients are connecting
	if err := syscall.Kill(gen, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	p := loadOnlyRun(t, root).Points[0]
	if !strings.Contains(p.Error, "hung") || p.Outcomes[result.OutcomeTimeout] == 0 || p.Attempted != 300 {
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
	_, errOut, code = run(t, "ramp", "--backend", "sim", "--clients", "200", "--rounds", "1", "--msg-size", "64", "--results", full)
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "no space left") {
		t.Errorf("full disk: exit %d, stderr %q", code, errOut)
	}
	noChildren(t)
}

// The QEMU guest dying mid-run: the points it already streamed back are
// saved, the run says why it stopped, the exit is non-zero and QEMU is
// reaped.
func TestFaultGuestDies(t *testing.T) {
	needVM(t)
	root := t.TempDir()
	done := runAsync(t, "ramp", "--backend", "vm", "--clients", "8,2000", "--rounds", "1",
		"--vm-mem", "2048", "--results", root)
	// Wait until the first point is saved, then kill QEMU.
	eventually.True(t, 3*time.Minute, "the first point is saved", func() bool { return savedPoints(root) == 1 })
	qemu := child(t, "-nic")
	if err := syscall.Kill(qemu, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	run := loadOnlyRun(t, root)
	if r.code == 0 || !strings.Contains(r.errOut, "guest") || strings.Count(strings.TrimSpace(r.errOut), "\n") != 0 {
		t.Errorf("exit %d, stderr %q", r.code, r.errOut)
	}
	if len(run.Points) != 1 || run.Points[0].SuccessRate != 1 || run.Complete || run.Error == "" {
		t.Errorf("points %v complete %v error %q", clientsOf(run), run.Complete, run.Error)
	}
	noChildren(t)
}
