package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec says how to run one program.
type Spec struct {
	Argv []string
	// Dir is the working directory; empty means this process's.
	Dir string
	// Env is added to this process's environment.
	Env []string
	// Stdin is written to the program's stdin, which is then closed
	// unless Hold is set; with neither, stdin is /dev/null.
	Stdin string
	// Hold keeps stdin open after Stdin until CloseStdin: a client that
	// waits on its stdin stays connected until then.
	Hold bool
	// Match is looked for in each output line (stdout and stderr); the
	// first match closes Matched.
	Match *regexp.Regexp
	// TailBytes is how much output is kept; default DefaultTailBytes.
	TailBytes int
	// OnlyDevice, when set, is the only RDMA device the program sees
	// (Linux, as root; view_linux.go): a server or client opening the
	// first device opens this one.
	OnlyDevice string
}

// Proc is a started program, the leader of its own process group.
type Proc struct {
	PID     int
	Argv    []string
	Started time.Time

	cmd     *exec.Cmd
	out     *output
	stdin   io.WriteCloser
	feeder  sync.WaitGroup // the goroutine writing Spec.Stdin
	done    chan struct{}  // closed once the leader is reaped
	outR    *os.File       // read end of the output pipe
	outDone chan struct{}  // closed when every writer of the pipe is gone
	exit    Exit

	mu   sync.Mutex
	tree map[int]uint64 // descendants seen: pid → start time (clock ticks)
	stop *StopReport
}

// Exit is how the leader ended.
type Exit struct {
	// Code is the exit status, -1 when a signal ended it.
	Code int `json:"code"`
	// Signal names the signal that ended it ("SIGKILL").
	Signal string `json:"signal,omitempty"`
	// Duration is from start to exit.
	Duration time.Duration `json:"duration_ns"`
}

func (e Exit) String() string {
	if e.Signal != "" {
		return "killed by " + e.Signal
	}
	return "exit status " + strconv.Itoa(e.Code)
}

var subreaper sync.Once

// Start runs spec. The error of a program that could not be started
// (missing, not executable, or fork failing for lack of resources) is a
// *StartError.
func Start(spec Spec) (*Proc, error) {
	if len(spec.Argv) == 0 {
		return nil, &StartError{Err: errors.New("empty command")}
	}
	subreaper.Do(becomeSubreaper)
	argv, env := spec.Argv, spec.Env
	if spec.OnlyDevice != "" {
		var venv []string
		var err error
		if argv, venv, err = ViewArgv(spec.OnlyDevice, argv, spec.Dir); err != nil {
			return nil, &StartError{Argv: spec.Argv, Err: err}
		}
		env = append(append([]string(nil), env...), venv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = sysProcAttr()
	p := &Proc{Argv: spec.Argv, cmd: cmd, done: make(chan struct{}), tree: map[int]uint64{}}
	var err error
	if spec.Stdin != "" || spec.Hold {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, &StartError{Argv: spec.Argv, Err: err}
		}
	}
	// One pipe for stdout and stderr keeps the program's own order of
	// the two. It is ours, not os/exec's: a background child that
	// inherits it must not delay learning that the leader exited.
	pr, pw, err := os.Pipe()
	if err != nil {
		if p.stdin != nil {
			p.stdin.Close()
		}
		return nil, &StartError{Argv: spec.Argv, Err: err}
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	p.Started = time.Now()
	p.out = newOutput(spec.TailBytes, spec.Match, p.Started)
	p.outR, p.outDone = pr, make(chan struct{})
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		if p.stdin != nil {
			p.stdin.Close()
		}
		return nil, &StartError{Argv: spec.Argv, Err: err}
	}
	p.PID = cmd.Process.Pid
	go func() {
		defer close(p.outDone)
		io.Copy(p.out, pr)
		p.out.finish()
	}()
	if p.stdin != nil {
		p.feeder.Add(1)
		go func() {
			defer p.feeder.Done()
			// Fails with EPIPE when the program exits without reading;
			// that is the program's business, not an error here.
			io.WriteString(p.stdin, spec.Stdin)
			if !spec.Hold {
				p.stdin.Close()
			}
		}()
	}
	go p.wait()
	return p, nil
}

// ViewArgv is what to start, and the environment to add, for argv to
// run in dir seeing only the RDMA device named device (Spec.OnlyDevice):
// for a program started other than by Start.
func ViewArgv(device string, argv []string, dir string) (prefixed, env []string, err error) {
	prog, err := findProgram(argv[0], dir)
	if err != nil {
		return nil, nil, err
	}
	return viewStart(device, append([]string{prog}, argv...))
}

// findProgram is the file argv0 runs, found as exec.Command finds it
// (in $PATH, or relative to dir): the program started through a view
// must fail here as it would have without one, not in the view.
func findProgram(argv0, dir string) (string, error) {
	if !strings.Contains(argv0, "/") {
		return exec.LookPath(argv0)
	}
	p := argv0
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	if err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
		err = fs.ErrPermission
	}
	if err != nil {
		return "", &exec.Error{Name: argv0, Err: err}
	}
	return argv0, nil
}

func (p *Proc) wait() {
	err := p.cmd.Wait()
	p.feeder.Wait()
	e := Exit{Code: -1, Duration: time.Since(p.Started)}
	if st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case st.Exited():
			e.Code = st.ExitStatus()
		case st.Signaled():
			e.Signal = unix.SignalName(st.Signal())
			if e.Signal == "" {
				e.Signal = st.Signal().String()
			}
		}
	} else if err != nil {
		e.Signal = err.Error()
	}
	p.exit = e
	close(p.done)
}

// Done is closed once the leader has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exit is how the leader ended; valid once Done is closed.
func (p *Proc) Exit() Exit {
	<-p.done
	return p.exit
}

// Exited reports whether the leader has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Matched is closed when an output line first matches Spec.Match.
func (p *Proc) Matched() <-chan struct{} { return p.out.matched }

// Match returns the first matching line and when it came after start.
func (p *Proc) Match() (line string, after time.Duration, ok bool) { return p.out.Match() }

// Tail is the end of the program's output (stdout and stderr); complete
// once Stop or Wait has returned.
func (p *Proc) Tail() string { return p.out.Tail() }

// OutputBytes is how much the program wrote in all.
func (p *Proc) OutputBytes() int64 { return p.out.Total() }

// CloseStdin ends a held stdin (Spec.Hold).
func (p *Proc) CloseStdin() {
	if p.stdin != nil {
		p.stdin.Close()
	}
}

// Wait waits for the leader to exit or ctx to end; when ctx ends first
// the whole tree is killed (no grace: a deadline is a deadline) and
// Wait reports context's error along with the exit.
func (p *Proc) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
		p.Stop(0)
		return p.exit, nil
	case <-ctx.Done():
		p.Stop(0)
		return p.exit, ctx.Err()
	}
}

// Kill sends SIGKILL to the program's process group and the
// descendants seen in its tree, and returns at once: for a caller that
// must record a deadline now and reap later (Stop, Wait).
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		return
	}
	p.signal(p.treeLocked(), unix.SIGKILL)
}

// StopReport says how Stop went.
type StopReport struct {
	// Exit is how the leader ended.
	Exit Exit `json:"exit"`
	// ExitedBefore is set when the leader had exited before Stop.
	ExitedBefore bool `json:"exited_before,omitempty"`
	// Killed is set when SIGTERM and the grace period did not end the
	// leader and SIGKILL did.
	Killed bool `json:"killed,omitempty"`
	// Others counts processes of the tree besides the leader that were
	// still there when Stop began (workers, orphans).
	Others int `json:"others,omitempty"`
	// Left lists processes that could not be ended; empty unless the
	// kernel refused (a process stuck in uninterruptible sleep).
	Left []int `json:"left,omitempty"`
}

// Stop ends the program and everything it started: SIGTERM to its
// process group and to descendants that left it, up to grace for the
// leader to exit, then SIGKILL to all, then reaps the orphans that were
// re-parented to this process. It returns once no process of the tree
// is left, or after 10 s with Left set. Stop is idempotent.
func (p *Proc) Stop(grace time.Duration) StopReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		return *p.stop
	}
	r := StopReport{ExitedBefore: p.Exited()}
	others := p.treeLocked()
	r.Others = len(others)
	p.signal(others, unix.SIGTERM)
	if !r.ExitedBefore && grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-p.done:
		case <-t.C:
		}
		t.Stop()
	}
	r.Killed = !p.Exited()
	// SIGKILL even when the leader obeyed: workers that ignore SIGTERM
	// must not outlive their server.
	others = append(others, p.treeLocked()...)
	p.signal(others, unix.SIGKILL)
	<-p.done
	r.Exit = p.exit
	r.Left = p.reap(others, 10*time.Second)
	p.CloseStdin()
	// With the tree gone the output pipe has no writer left, unless a
	// process outside it inherited the pipe; do not wait on that one.
	t := time.NewTimer(2 * time.Second)
	select {
	case <-p.outDone:
	case <-t.C:
		p.outR.Close()
		<-p.outDone
	}
	t.Stop()
	p.stop = &r
	return r
}

func (p *Proc) signal(pids []int, sig unix.Signal) {
	unix.Kill(-p.PID, sig) // the group; ESRCH once it is empty
	for _, pid := range pids {
		unix.Kill(pid, sig)
	}
}

// reap waits until every process of pids and of the leader's group is
// gone, reaping those that are this process's children (orphans
// re-parented here). It never waits for a PID it did not see in the tree,
// so it cannot steal another part of the program's child.
func (p *Proc) reap(pids []int, timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		var left []int
		for _, pid := range pids {
			if !p.same(pid) {
				continue
			}
			var ws unix.WaitStatus
			if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid {
				continue
			}
			if p.same(pid) {
				left = append(left, pid)
			}
		}
		for _, pid := range groupMembers(p.PID) {
			if pid != p.PID && !containsInt(pids, pid) {
				// A member not seen before (forked during the kill):
				// kill and reap it too.
				unix.Kill(pid, unix.SIGKILL)
				pids = append(pids, pid)
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		<-tick.C
	}
}

// same reports whether pid still names a process seen in the tree (not a
// new process that reused the number).
func (p *Proc) same(pid int) bool {
	st, err := readStat(pid)
	if err != nil {
		return false
	}
	want, ok := p.tree[pid]
	return !ok || want == st.start
}

// Tree returns the PIDs of the leader and of every process descended
// from it, including descendants that were orphaned and re-parented to
// this process; empty once all have gone.
func (p *Proc) Tree() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	if !p.Exited() {
		out = append(out, p.PID)
	}
	return append(out, p.treeLocked()...)
}

// treeLocked scans /proc for the leader's descendants (besides the
// leader) and remembers them, so one re-parented here after its parent
// died is still counted as the target's.
func (p *Proc) treeLocked() []int {
	stats := scanProc()
	children := map[int][]int{}
	for pid, st := range stats {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	var out []int
	seen := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			if seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, c)
			if _, ok := p.tree[c]; !ok {
				p.tree[c] = stats[c].start
			}
			walk(c)
		}
	}
	walk(p.PID)
	for pid, start := range p.tree {
		if seen[pid] {
			continue
		}
		if st, ok := stats[pid]; ok && st.start == start {
			seen[pid] = true
			out = append(out, pid)
			walk(pid)
		}
	}
	return out
}

type procStat struct {
	ppid, pgid int
	start      uint64
	state      byte
}

// readStat parses /proc/PID/stat; the command name may hold spaces and
// parentheses, so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, errors.New("short stat")
	}
	var st procStat
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgid, _ = strconv.Atoi(f[2])
	st.start, _ = strconv.ParseUint(f[19], 10, 64)
	return st, nil
}

func scanProc() map[int]procStat {
	out := map[int]procStat{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			out[pid] = st
		}
	}
	return out
}

// groupMembers lists the processes whose process group is pgid.
func groupMembers(pgid int) []int {
	if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
		return nil // cheap answer for the common case
	}
	var out []int
	for pid, st := range scanProc() {
		if st.pgid == pgid {
			out = append(out, pid)
		}
	}
	return out
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// StartError is a program that could not be started.
type StartError struct {
	Argv []string
	Err  error
}

func (e *StartError) Error() string {
	name := "command"
	if len(e.Argv) > 0 {
		name = e.Argv[0]
	}
	if e.HarnessLimit() {
		return fmt.Sprintf("start %s: %v (the harness's own limit, not the server's)", name, e.Err)
	}
	return fmt.Sprintf("start %s: %v", name, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// HarnessLimit reports a start that failed for lack of this machine's or
// this process's resources (EAGAIN: processes or threads; EMFILE, ENFILE:
// file descriptors for the pipes; ENOMEM): the harness could not launch
// the client, which says nothing about the server.
func (e *StartError) HarnessLimit() bool {
	for _, errno := range []error{unix.EAGAIN, unix.EMFILE, unix.ENFILE, unix.ENOMEM} {
		if errors.Is(e.Err, errno) {
			return true
		}
	}
	return false
}

// Errno names the errno of the failed start ("EAGAIN"), if there is one.
func (e *StartError) Errno() string {
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		return unix.ErrnoName(errno)
	}
	return ""
}
