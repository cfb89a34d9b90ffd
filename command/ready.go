package command

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Readiness says how to tell that a started server serves.
type Readiness struct {
	// Port is a port the server listens on once ready (0: none).
	Port int
	// Listening tells whether something listens on a port; default
	// TCPListening. The vm backend also accepts an rdma_cm listener
	// (rping listens through rdma_cm, not TCP).
	Listening func(port int) bool
	// Line, when set, waits for Spec.Match to match an output line
	// instead of (or, with Port, as well as) the port.
	Line bool
	// Timeout bounds the wait; default 60 s.
	Timeout time.Duration
}

// NotReadyError is a server that did not become ready: it exited first
// (Exit set) or the timeout passed.
type NotReadyError struct {
	What    string
	Waited  time.Duration
	Exited  bool
	Exit    Exit
	Tail    string
	Timeout bool
}

func (e *NotReadyError) Error() string {
	last := LastLines(e.Tail, 3)
	if last != "" {
		last = ": " + last
	}
	if e.Exited {
		return fmt.Sprintf("server exited (%s) before it was ready (%s)%s", e.Exit, e.What, last)
	}
	return fmt.Sprintf("server not ready after %v (waiting for %s)%s", e.Waited.Round(time.Millisecond), e.What, last)
}

// WaitReady returns once p is ready by r, or why it is not. It polls the
// port every few milliseconds: the kernel announces a new listener to no
// one, and a connection attempt would be a client the server counts.
func WaitReady(ctx context.Context, p *Proc, r Readiness) error {
	if r.Port == 0 && !r.Line {
		return errors.New("readiness: neither a port nor an output line to wait for")
	}
	if r.Timeout <= 0 {
		r.Timeout = 60 * time.Second
	}
	listening := r.Listening
	if listening == nil {
		listening = TCPListening
	}
	var what []string
	if r.Port > 0 {
		what = append(what, "port "+strconv.Itoa(r.Port)+" listening")
	}
	if r.Line {
		what = append(what, "its ready line")
	}
	start := time.Now()
	timer := time.NewTimer(r.Timeout)
	defer timer.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		lineOK := !r.Line
		if r.Line {
			select {
			case <-p.Matched():
				lineOK = true
			default:
			}
		}
		if lineOK && (r.Port == 0 || listening(r.Port)) {
			return nil
		}
		select {
		case <-p.Done():
			// What is left of it is reaped, and its last words read to
			// the end, before saying why.
			p.Stop(0)
			return &NotReadyError{What: strings.Join(what, " and "), Waited: time.Since(start), Exited: true, Exit: p.Exit(), Tail: p.Tail()}
		case <-timer.C:
			return &NotReadyError{What: strings.Join(what, " and "), Waited: time.Since(start), Timeout: true, Tail: p.Tail()}
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-p.Matched():
		}
	}
}

// TCP socket states in /proc/net/tcp.
const (
	tcpListen   = "0A"
	tcpTimeWait = "06"
)

// TCPListening reports whether a TCP socket (IPv4 or IPv6) listens on
// port, read from /proc/net/tcp{,6} of this network namespace.
func TCPListening(port int) bool {
	for _, st := range tcpStates(port) {
		if st == tcpListen {
			return true
		}
	}
	return false
}

// PortBusy lists the states of the TCP sockets bound to port, TIME_WAIT
// left out: SO_REUSEADDR binds over those, which most servers set.
func PortBusy(port int) []string {
	var busy []string
	for _, st := range tcpStates(port) {
		if st != tcpTimeWait {
			busy = append(busy, tcpStateName(st))
		}
	}
	return busy
}

// WaitPortFree waits until nothing but TIME_WAIT holds port, so a server
// with a fixed port can bind it again for the next point.
func WaitPortFree(ctx context.Context, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		busy := PortBusy(port)
		if len(busy) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d still in use after %v (%d sockets: %s)", port, timeout, len(busy), strings.Join(dedup(busy), ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func tcpStates(port int) []string {
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		out = append(out, parseTCPStates(b, port)...)
	}
	return out
}

// parseTCPStates returns the state column of every socket whose local
// port is port.
func parseTCPStates(b []byte, port int) []string {
	want := fmt.Sprintf(":%04X", port)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 3 && strings.HasSuffix(f[1], want) {
			out = append(out, f[3])
		}
	}
	return out
}

func tcpStateName(st string) string {
	names := map[string]string{"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
		"05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}
	if n, ok := names[st]; ok {
		return n
	}
	return st
}

func dedup(s []string) []string {
	seen := map[string]int{}
	var out []string
	for _, v := range s {
		if seen[v] == 0 {
			out = append(out, v)
		}
		seen[v]++
	}
	for i, v := range out {
		if seen[v] > 1 {
			out[i] = fmt.Sprintf("%s ×%d", v, seen[v])
		}
	}
	return out
}
