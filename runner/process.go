package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// process is a child process the runner started, seen from the runner
// (what runs inside it is runner/child): its stdout events arrive on
// events, its stderr tail is kept for error messages, and it is always
// reaped by stop.
type process struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan protocol.Event
	exited chan struct{} // closed after Wait returned
	err    error         // Wait's error, valid after exited
	tail   *tailBuffer

	// reported is the process ID the child reported ("started"): on another
	// host, not cmd's. exit is the status the launcher's wrapper
	// reported ("exit"), valid after exited; nil if it said none.
	reported atomic.Int64
	exit     *int
	// remoteKill, for a child on another host, ends its process there by
	// the PID it reported, over its launcher.
	remoteKill func(pid int)

	inMu     sync.Mutex
	inClosed bool
	beatStop chan struct{}
}

// startChild starts cmd, writes spec to its stdin as one JSON line (the
// child's whole configuration), and reads its events from stdout.
func startProcess(name string, cmd *exec.Cmd, spec any) (*process, error) {
	line, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("%s spec: %w", name, err)
	}
	killOnParentDeath(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	tail := &tailBuffer{max: 8192}
	cmd.Stderr = tail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &process{name: name, cmd: cmd, stdin: stdin, events: make(chan protocol.Event, 64),
		exited: make(chan struct{}), tail: tail}
	go func() {
		// One event per line. Before the first, a remote login shell may
		// have written a banner or a greeting (a .bashrc that echoes):
		// such lines go to the stderr tail, not into the protocol.
		in := bufio.NewReaderSize(stdout, 64<<10)
		spoken := false
		for {
			line, err := in.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) == 0 {
				if err != nil {
					break
				}
				continue
			}
			if !spoken && line[0] != '{' {
				tail.Write(line)
				continue
			}
			var ev protocol.Event
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				c.events <- protocol.Event{Event: "error", Error: fmt.Sprintf("%s wrote unreadable output: %v", name, jerr)}
				io.Copy(io.Discard, in)
				break
			}
			spoken = true
			switch ev.Event {
			case "started":
				c.reported.Store(int64(ev.PID))
				continue
			case "ready":
				// A server says its PID here: on another host, what
				// it is stopped by.
				if ev.PID > 0 && c.reported.Load() == 0 {
					c.reported.Store(int64(ev.PID))
				}
			case "exit":
				st := ev.Status
				c.exit = &st
				continue
			}
			c.events <- ev
		}
		close(c.events)
		c.err = cmd.Wait()
		close(c.exited)
	}()
	// A child that died before reading its spec shows as closed events
	// with its exit status; the write's own error adds nothing.
	stdin.Write(append(line, '\n'))
	return c, nil
}

// pid is the child's process ID.
func (c *process) pid() int { return c.cmd.Process.Pid }

// stop asks the child to end (SIGTERM), kills it after grace, and returns
// the events it wrote meanwhile once it is reaped.
func (c *process) stop(grace time.Duration) []protocol.Event {
	c.cmd.Process.Signal(syscall.SIGTERM)
	return c.drain(grace)
}

// drain collects the child's events until it exits, killing it if it has
// not exited within grace, and waits until it is reaped.
func (c *process) drain(grace time.Duration) []protocol.Event {
	var evs []protocol.Event
	t := time.NewTimer(grace)
	defer t.Stop()
	events := c.events
	for events != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				break
			}
			evs = append(evs, ev)
		case <-t.C:
			c.forceKill()
			c.closeStdin()
		}
	}
	<-c.exited
	c.closeStdin()
	return evs
}

// kill ends the child at once and reaps it. Its stdin is closed too:
// a process it left behind holding its stdout would otherwise wait for
// that stdin while the runner waits for that stdout.
func (c *process) kill() {
	c.forceKill()
	c.closeStdin()
	c.drain(time.Hour)
}

// forceKill kills the child's process: on another host over its
// launcher first (killing the local launcher alone would leave a hung
// process there), then the local one.
func (c *process) forceKill() {
	if pid := int(c.reported.Load()); c.remoteKill != nil && pid > 0 {
		select {
		case <-c.exited:
		default:
			c.remoteKill(pid)
		}
	}
	c.cmd.Process.Kill()
}

// started reports whether the child said "started".
func (c *process) started() bool { return c.reported.Load() > 0 }

// send writes one line to the child's stdin.
func (c *process) send(line string) {
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if !c.inClosed {
		// A child that died meanwhile shows as closed events.
		io.WriteString(c.stdin, line+"\n")
	}
}

// heartbeat sends an empty line every interval until stdin is closed: a
// released generator that hears nothing for longer than its launcher
// could stay silent knows the runner, or the way to it, is gone, and
// exits by itself (Generate).
func (c *process) heartbeat(interval time.Duration) {
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if c.inClosed || c.beatStop != nil {
		return
	}
	c.beatStop = make(chan struct{})
	go func(stop <-chan struct{}) {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.send("")
			case <-stop:
				return
			}
		}
	}(c.beatStop)
}

// closeStdin releases the child (EOF on its stdin) and stops the
// heartbeat.
func (c *process) closeStdin() {
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if c.inClosed {
		return
	}
	c.inClosed = true
	if c.beatStop != nil {
		close(c.beatStop)
	}
	c.stdin.Close()
}

// exitText describes how the child ended, with its stderr tail.
func (c *process) exitText() string {
	s := c.name
	if c.err != nil {
		s += " exited: " + c.err.Error()
	} else {
		s += " exited"
	}
	c.tail.mu.Lock()
	crash := c.tail.crash
	c.tail.mu.Unlock()
	if crash != "" {
		return s + ": " + crash
	}
	if t := strings.TrimSpace(c.tail.String()); t != "" {
		lines := strings.Split(t, "\n")
		s += ": " + lines[len(lines)-1]
	}
	return s
}

// tailBuffer keeps the last max bytes written to it, and the first line
// that starts a Go crash ("fatal error: ...", "panic: ..."), which a long
// goroutine dump pushes out of the tail.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   bytes.Buffer
	crash string
}

var crashLine = regexp.MustCompile(`(?m)^(fatal error: .*|panic: .*)$`)

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.crash == "" {
		if m := crashLine.Find(p); m != nil {
			t.crash = string(m)
		}
	}
	t.buf.Write(p)
	if t.buf.Len() > t.max {
		b := t.buf.Bytes()[t.buf.Len()-t.max:]
		nb := append([]byte(nil), b...)
		t.buf.Reset()
		t.buf.Write(nb)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// Ended is how a generator's command ended before its generator reported
// its clients, as the runner saw it: what a RemoteLauncher classifies.
type Ended struct {
	// Started: the generator said "started" (it ran on its host).
	Started bool
	// Exit is the generator's exit status as the launcher's wrapper
	// reported it (128+n for signal n); nil if none came.
	Exit *int
	// Code is the launcher command's own exit code, -1 if a signal
	// ended it.
	Code int
	// Stderr is the last lines the launcher command wrote to stderr.
	Stderr string
}

// ended describes how the child ended; valid once exited is closed.
func (c *process) ended() Ended {
	e := Ended{Started: c.started(), Exit: c.exit, Code: -1, Stderr: command.LastLinesJoined(c.tail.String(), 3, "; ")}
	if c.cmd.ProcessState != nil {
		e.Code = c.cmd.ProcessState.ExitCode()
	}
	return e
}
