package command

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
)

func start(t *testing.T, spec Spec) *Proc {
	t.Helper()
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0) })
	return p
}

func waitMatch(t *testing.T, p *Proc) string {
	t.Helper()
	// Output is read apart from the exit: a program that prints its
	// line and exits may be seen exiting first.
	select {
	case <-p.Matched():
	case <-time.After(30 * time.Second):
		t.Fatalf("no line after 30 s (exited: %v): %q", p.Exited(), p.Tail())
	}
	line, _, _ := p.Match()
	return line
}

// gone asserts that pid names no process at all, not even a zombie.
func gone(t *testing.T, pid int) {
	t.Helper()
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		t.Errorf("process %d still exists: %s", pid, st)
	}
}

func TestHeldStdin(t *testing.T) {
	p := start(t, Spec{
		Argv:  []string{"sh", "-c", `echo ready; read x; echo "got $x"; read y; echo "end y=$y"`},
		Stdin: "one\n", Hold: true, Match: regexp.MustCompile(`^got one$`),
	})
	waitMatch(t, p)
	if p.Exited() {
		t.Fatal("exited while its stdin was held")
	}
	p.CloseStdin()
	exit, err := p.Wait(context.Background())
	if err != nil || exit.Code != 0 {
		t.Fatalf("exit %v, %v", exit, err)
	}
	if tail := p.Tail(); tail != "ready\ngot one\nend y=\n" {
		t.Errorf("output %q", tail)
	}
	gone(t, p.PID)
}

// TestStopIgnoresTERM: a server that ignores SIGTERM is killed after the
// grace period, and nothing of it is left.
func TestStopIgnoresTERM(t *testing.T) {
	p := start(t, Spec{Argv: []string{"sh", "-c", `trap "" TERM; echo ready; read x`}, Hold: true, Match: regexp.MustCompile("ready")})
	waitMatch(t, p)
	r := p.Stop(50 * time.Millisecond)
	if !r.Killed || r.Exit.Signal != "SIGKILL" || r.ExitedBefore || len(r.Left) > 0 {
		t.Errorf("stop report %+v, want killed by SIGKILL", r)
	}
	gone(t, p.PID)
	if m := groupMembers(p.PID); len(m) > 0 {
		t.Errorf("process group %d still has %v", p.PID, m)
	}
	if again := p.Stop(time.Second); again.Exit != r.Exit {
		t.Errorf("second Stop %+v differs", again)
	}
}

func TestStopObeysTERM(t *testing.T) {
	p := start(t, Spec{Argv: []string{"sh", "-c", `echo ready; read x`}, Hold: true, Match: regexp.MustCompile("ready")})
	waitMatch(t, p)
	r := p.Stop(30 * time.Second)
	if r.Killed || r.Exit.Signal != "SIGTERM" {
		t.Errorf("stop report %+v, want ended by SIGTERM without SIGKILL", r)
	}
	if r.Exit.Duration > 20*time.Second {
		t.Errorf("Stop waited the whole grace period for a server that obeyed")
	}
}

// fifo returns a named pipe nobody writes: a process opening it blocks
// without spending CPU or sleeping for a fixed time.
func fifo(t *testing.T) string {
	f := filepath.Join(t.TempDir(), "never")
	if err := unix.Mkfifo(f, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func childPID(t *testing.T, line string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "child "))
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return pid
}

// TestStopReapsTree: a worker that ignores SIGTERM dies with its server.
func TestStopReapsTree(t *testing.T) {
	f := fifo(t)
	p := start(t, Spec{
		Argv:  []string{"sh", "-c", `(trap "" TERM; read x < "$0") & echo "child $!"; wait`, f},
		Match: regexp.MustCompile(`^child \d+$`),
	})
	child := childPID(t, waitMatch(t, p))
	if tree := p.Tree(); len(tree) < 2 || tree[0] != p.PID {
		t.Errorf("tree %v, want the leader %d and its worker %d", tree, p.PID, child)
	}
	r := p.Stop(20 * time.Millisecond)
	if r.Others < 1 || len(r.Left) > 0 {
		t.Errorf("stop report %+v, want the worker counted and nothing left", r)
	}
	gone(t, p.PID)
	gone(t, child)
}

// TestOrphanReaped: the leader exits and leaves a child behind; the child
// was re-parented here (subreaper), and Stop ends and reaps it.
func TestOrphanReaped(t *testing.T) {
	f := fifo(t)
	p := start(t, Spec{
		Argv:  []string{"sh", "-c", `(trap "" TERM; read x < "$0") & echo "child $!"`, f},
		Match: regexp.MustCompile(`^child \d+$`),
	})
	child := childPID(t, waitMatch(t, p))
	if exit, err := p.Wait(context.Background()); err != nil || exit.Code != 0 {
		// Wait stops the tree too, so look before it in a second case.
		t.Fatalf("leader: %v %v", exit, err)
	}
	gone(t, child)

	p = start(t, Spec{
		Argv:  []string{"sh", "-c", `(trap "" TERM; read x < "$0") & echo "child $!"`, f},
		Match: regexp.MustCompile(`^child \d+$`),
	})
	child = childPID(t, waitMatch(t, p))
	<-p.Done()
	st, err := readStat(child)
	if err != nil || st.ppid != os.Getpid() {
		t.Errorf("orphan %d: parent %d (%v), want this process %d", child, st.ppid, err, os.Getpid())
	}
	if r := p.Stop(time.Second); !r.ExitedBefore || len(r.Left) > 0 {
		t.Errorf("stop report %+v", r)
	}
	gone(t, child)
}

// TestDaemonLeavesGroup: a child that moved to its own session is still
// the target's once seen in its tree.
func TestDaemonLeavesGroup(t *testing.T) {
	f := fifo(t)
	p := start(t, Spec{
		Argv:  []string{"sh", "-c", `setsid sh -c 'trap "" TERM; read x < "$0"' "$0" & echo "child $!"; read y`, f},
		Hold:  true,
		Match: regexp.MustCompile(`^child \d+$`),
	})
	child := childPID(t, waitMatch(t, p))
	eventually.True(t, 10*time.Second, "setsid has moved the child to its own group", func() bool {
		st, err := readStat(child)
		return err == nil && st.pgid == child
	})
	if tree := p.Tree(); !containsInt(tree, child) {
		t.Fatalf("tree %v lacks the daemon %d", tree, child)
	}
	p.Stop(20 * time.Millisecond)
	gone(t, child)
}

func TestStartErrors(t *testing.T) {
	_, err := Start(Spec{Argv: []string{"/nonexistent/server", "-p", "1"}})
	var se *StartError
	if !errors.As(err, &se) || se.HarnessLimit() || !strings.Contains(err.Error(), "/nonexistent/server") {
		t.Errorf("missing program: %v", err)
	}
	o := StartOutcome(err)
	if o.Class != StartFailed || o.HarnessLimit || o.Errno != "ENOENT" {
		t.Errorf("missing program outcome %+v", o)
	}

	noexec := filepath.Join(t.TempDir(), "server")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	_, err = Start(Spec{Argv: []string{noexec}})
	if !errors.As(err, &se) || se.Errno() != "EACCES" {
		t.Errorf("not executable: %v (errno %q)", err, se.Errno())
	}

	// Out of file descriptors for the pipes: the harness's limit.
	var old unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &old)
	fds, _ := os.ReadDir("/proc/self/fd")
	lim := unix.Rlimit{Cur: uint64(len(fds)), Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	_, err = Start(Spec{Argv: []string{"true"}, Stdin: "x"})
	unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	o = StartOutcome(err)
	if o.Class != StartFailed || !o.HarnessLimit || o.Errno != "EMFILE" || !strings.Contains(o.Error, "harness") {
		t.Errorf("EMFILE start: %+v", o)
	}
	if !errors.Is(err, syscall.EMFILE) {
		t.Errorf("EMFILE start error does not wrap EMFILE: %v", err)
	}
}

func TestClassify(t *testing.T) {
	ok := regexp.MustCompile(`^connected`)
	cases := []struct {
		name  string
		sh    string
		match *regexp.Regexp
		want  Class
		errno string
	}{
		{"ok", "echo connected; exit 0", ok, OK, ""},
		{"ok-no-pattern", "exit 0", nil, OK, ""},
		{"refused", "echo 'capclient: server error: ibv_create_qp: Cannot allocate memory (ENOMEM)' >&2; exit 4", ok, ExitStatus, "ENOMEM"},
		{"mismatch", "echo hello", ok, Mismatch, ""},
		{"signal", "kill -SEGV $$", nil, Signaled, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, Spec{Argv: []string{"sh", "-c", c.sh}, Match: c.match})
			_, err := p.Wait(context.Background())
			o := Classify(p, err, c.match != nil)
			if o.Class != c.want || o.Errno != c.errno {
				t.Errorf("%+v, want class %s errno %q", o, c.want, c.errno)
			}
			if o.Failed() != (o.Tail != "" || o.Class != OK) {
				t.Errorf("tail kept %q for class %s", o.Tail, o.Class)
			}
			if c.want == OK && c.match != nil && o.OKAfter <= 0 {
				t.Errorf("ok without OKAfter: %+v", o)
			}
		})
	}
	if p := start(t, Spec{Argv: []string{"sh", "-c", "kill -SEGV $$"}}); true {
		p.Wait(context.Background())
		if o := Classify(p, nil, false); o.Signal != "SIGSEGV" || o.ExitCode != -1 {
			t.Errorf("signal outcome %+v", o)
		}
	}
}

// TestClientDeadline: a client that never exits, and one that floods its
// output without end, are both ended at the deadline and kept as
// timeouts with a bounded tail.
func TestClientDeadline(t *testing.T) {
	for _, c := range []struct{ name, sh string }{
		{"hangs", "echo started; read x"},
		{"floods", "echo started; yes flood"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, Spec{Argv: []string{"sh", "-c", c.sh}, Hold: true, Match: regexp.MustCompile("^started$")})
			waitMatch(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := p.Wait(ctx)
			o := Classify(p, err, true)
			if o.Class != Timeout || len(o.Tail) > DefaultTailBytes || o.OKAfter <= 0 {
				t.Errorf("%s: class %s, tail %d bytes, ok after %v", c.name, o.Class, len(o.Tail), o.OKAfter)
			}
			if c.name == "floods" && (o.OutputBytes <= DefaultTailBytes || !strings.HasSuffix(o.Tail, "flood\n")) {
				t.Errorf("flood: %d bytes written, tail ends %q", o.OutputBytes, o.Tail[max(0, len(o.Tail)-20):])
			}
			gone(t, p.PID)
		})
	}
	// A flood that ends by itself is an ordinary outcome.
	p := start(t, Spec{Argv: []string{"sh", "-c", `head -c 5000000 /dev/zero | tr '\0' y`}})
	_, err := p.Wait(context.Background())
	if o := Classify(p, err, false); o.Class != OK || o.OutputBytes != 5000000 || o.Tail != "" {
		t.Errorf("finite flood: %+v", o)
	}
}

func TestWaitReady(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, Spec{Argv: []string{exe}, Env: []string{"COMMAND_HELPER=listen"}, Hold: true, Match: regexp.MustCompile(`^listening on port \d+$`)})
	port, _ := strconv.Atoi(strings.TrimPrefix(waitMatch(t, p), "listening on port "))
	ctx := context.Background()
	if err := WaitReady(ctx, p, Readiness{Port: port, Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(ctx, p, Readiness{Port: port, Line: true}); err != nil {
		t.Fatal(err)
	}
	if busy := PortBusy(port); len(busy) != 1 || busy[0] != "LISTEN" {
		t.Errorf("PortBusy(%d) = %v", port, busy)
	}
	p.CloseStdin()
	if exit, err := p.Wait(ctx); err != nil || exit.Code != 0 {
		t.Fatalf("helper: %v %v", exit, err)
	}
	if err := WaitPortFree(ctx, port, 30*time.Second); err != nil {
		t.Error(err)
	}

	// Exits before ready: its status and last words.
	p = start(t, Spec{Argv: []string{"sh", "-c", "echo 'bind: Address already in use' >&2; exit 3"}})
	err = WaitReady(ctx, p, Readiness{Port: port})
	var nr *NotReadyError
	if !errors.As(err, &nr) || !nr.Exited || nr.Exit.Code != 3 || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("exit before ready: %v", err)
	}
	// Never ready.
	p = start(t, Spec{Argv: []string{"sh", "-c", "echo starting; read x"}, Hold: true, Match: regexp.MustCompile("^ready$")})
	err = WaitReady(ctx, p, Readiness{Line: true, Timeout: 50 * time.Millisecond})
	if !errors.As(err, &nr) || !nr.Timeout || nr.Exited || !strings.Contains(err.Error(), "starting") {
		t.Errorf("never ready: %v", err)
	}
	p.Stop(0)
	gone(t, p.PID)
	if err := WaitReady(ctx, p, Readiness{}); err == nil {
		t.Error("readiness without port or line: no error")
	}
}

// Kill ends a program without waiting: the deadline is recorded at once
// (TimedOut) and the reaping happens later.
func TestKillThenReap(t *testing.T) {
	p := start(t, Spec{Argv: []string{"sh", "-c", `trap "" TERM; echo "accept: Too many open files"; read x`}, Hold: true, Match: regexp.MustCompile("files")})
	waitMatch(t, p)
	p.Kill()
	o := TimedOut(p)
	if o.Class != Timeout || o.Errno != "EMFILE" || o.OKAfter <= 0 || o.ExitCode != -1 {
		t.Errorf("timed out: %+v", o)
	}
	r := p.Stop(time.Second)
	if r.Exit.Signal != "SIGKILL" || len(r.Left) > 0 {
		t.Errorf("stop after kill: %+v", r)
	}
	gone(t, p.PID)
}
