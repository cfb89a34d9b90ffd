package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// builtinTarget runs rdmaprobe's own server: `rdmaprobe serve --spec -`
// on this machine, configured by a protocol.ServerSpec on its stdin, speaking the
// event protocol on its stdout.
type builtinTarget struct {
	exe        string
	spec       Spec
	certs      certs.Pairs
	profileDir string
	// remote, if set, starts the server on its first host instead.
	remote RemoteLauncher
}

func (t *builtinTarget) Start(ctx context.Context, n, trial int) (Server, error) {
	s := t.spec
	ss := protocol.ServerSpec{Listen: s.ListenAddr(), MaxClients: s.MaxClientsAt(n), Mode: s.Mode, Fabric: s.Fabric,
		Cert: t.certs.Server.CertPEM, Key: t.certs.Server.KeyPEM, ClientCA: t.certs.Client.CertPEM,
		MsgSize: s.MsgSize, Backlog: s.Backlog,
		// The server waits for a client as long as the client itself may
		// take, so a slow client is the client's timeout, not the server's.
		HandshakeTimeout: s.Timeout, ExchangeTimeout: s.Timeout,
		TLSKex: s.TLSKex, Detach: s.Detach, TLSTickets: s.TLSResume, Mux: s.MuxOrDefault(),
		NoFile: s.NoFile, MemLock: s.MemLock}
	if ss.Fabric.Addr == "" {
		// A simulated port on the address the clients reach the server
		// at: on another host, 127.0.0.1 would be theirs.
		if h, _, err := net.SplitHostPort(ss.Listen); err == nil && h != "127.0.0.1" {
			ss.Fabric.Addr = h
		}
	}
	if s.Traffic.Duration > 0 {
		tr := s.traffic()
		ss.Depth, ss.Remote, ss.BusyPoll = tr.Depth, tr.Op != result.OpSend, tr.BusyPoll
		ss.SRQDepth = server.SRQDepthAll
	}
	if s.SRQDepth > 0 {
		ss.SRQDepth = s.SRQDepth
	}
	if s.Profile && t.profileDir != "" {
		ss.CPUProfile = filepath.Join(t.profileDir, serverProfile(n, trial))
	}
	if t.remote != nil {
		// On its own host the server shares the CPUs with no generator.
		cmd, err := t.remote.Command(0, []string{"serve", "--spec", "-"}, nil)
		if err != nil {
			return nil, err
		}
		c, err := startProcess("server on "+t.remote.Host(0), cmd, ss)
		if err != nil {
			return nil, err
		}
		c.remoteKill = func(pid int) { t.remote.Kill(0, pid) }
		return &builtinServer{process: c, remote: t.remote}, nil
	}
	cmd := exec.Command(t.exe, "serve", "--spec", "-")
	if procs, _ := splitCPUs(s.GoMaxProcs, runtime.NumCPU(), s.Procs); procs > 0 {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	}
	c, err := startProcess("server", cmd, ss)
	if err != nil {
		return nil, err
	}
	return &builtinServer{process: c}, nil
}

// builtinServer is a running `serve`, here or on another host (remote).
type builtinServer struct {
	*process
	remote RemoteLauncher
}

func (s *builtinServer) Ready(ctx context.Context, timeout time.Duration) (string, *result.DeviceInfo, error) {
	ev, err := s.await(ctx, timeout, func(ev protocol.Event) bool { return ev.Event == "ready" || ev.Event == "error" })
	switch {
	case errors.Is(err, errEventsEnded):
		<-s.exited
		return "", nil, fmt.Errorf("server did not start: %s", s.exitText())
	case errors.Is(err, errNoEvent):
		return "", nil, fmt.Errorf("server not ready after %s: %s", timeout, s.tail.String())
	case err != nil:
		return "", nil, err
	case ev.Event == "error":
		return "", nil, fmt.Errorf("server: %s", ev.Error)
	}
	return ev.Addr, ev.Device, nil
}

// errEventsEnded and errNoEvent are why await found no event.
var (
	errEventsEnded = errors.New("its events ended")
	errNoEvent     = errors.New("no such event in time")
)

// await returns the first of the server's events that want takes,
// dropping the others; errEventsEnded if its events end first,
// errNoEvent after timeout, ctx's error if it ends. Only while no one
// else reads its events.
func (s *builtinServer) await(ctx context.Context, timeout time.Duration, want func(protocol.Event) bool) (protocol.Event, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return protocol.Event{}, errEventsEnded
			}
			if want(ev) {
				return ev, nil
			}
		case <-t.C:
			return protocol.Event{}, errNoEvent
		case <-ctx.Done():
			return protocol.Event{}, ctx.Err()
		}
	}
}

// PID is the server's process here; 0 on another host, where the
// collectors cannot see it.
func (s *builtinServer) PID() int {
	if s.remote != nil {
		return 0
	}
	return s.pid()
}
func (s *builtinServer) Events() <-chan protocol.Event { return s.events }
func (s *builtinServer) Kill()                         { s.kill() }

// Tree is nil: `serve` starts no processes.
func (s *builtinServer) Tree() func() []int { return nil }

// Record is nil: `serve` reports its own view, Point.Server.
func (s *builtinServer) Record() *result.TargetPoint { return nil }

// SharesSlack is true: rdmaprobe's own server takes the generators'
// timer slack.
func (s *builtinServer) SharesSlack() bool { return true }

func (s *builtinServer) ExitText() string {
	<-s.exited // its events end just before it is reaped
	return s.exitText()
}

// Stop signals the server, which prints its own view ("stats") as it
// exits.
func (s *builtinServer) Stop(grace time.Duration) (result.ServerStats, string) {
	var st result.ServerStats
	var evs []protocol.Event
	if pid := int(s.reported.Load()); s.remote != nil && pid > 0 {
		// SIGTERM where it runs: the launcher does not carry signals.
		s.remote.Signal(0, pid, "TERM")
		evs = s.drain(grace)
	} else {
		evs = s.stop(grace)
	}
	for _, ev := range evs {
		if ev.Event == "stats" && ev.Server != nil {
			st = *ev.Server
		}
	}
	if s.err != nil {
		return st, s.exitText()
	}
	return st, ""
}

// Usage asks the server for its CPU so far (protocol.ServerRequestUsage) and
// waits up to timeout for the answer: between the point's connect phase
// and its stop, when no one else reads its events (the others that come
// meanwhile are dropped, as the stop's drain would).
func (s *builtinServer) Usage(timeout time.Duration) (result.ServerUsage, error) {
	s.send(protocol.ServerRequestUsage)
	ev, err := s.await(context.Background(), timeout, func(ev protocol.Event) bool { return ev.Event == "usage" && ev.ServerUsage != nil })
	if err != nil {
		return result.ServerUsage{}, fmt.Errorf("server's usage: %w", err)
	}
	return *ev.ServerUsage, nil
}

// Stats asks the server for its own view so far
// (protocol.ServerRequestStats), as Usage asks for its CPU: a
// staircase's step records it, since its server goes on (liveStats).
func (s *builtinServer) Stats(timeout time.Duration) (result.ServerStats, error) {
	s.send(protocol.ServerRequestStats)
	ev, err := s.await(context.Background(), timeout, func(ev protocol.Event) bool { return ev.Event == "server-stats" && ev.Server != nil })
	if err != nil {
		return result.ServerStats{}, fmt.Errorf("server's view: %w", err)
	}
	return *ev.Server, nil
}

// ListenAddr is Listen with its defaults: 127.0.0.1, any port.
func (s Spec) ListenAddr() string {
	l := s.Listen
	if l == "" {
		return "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(l); err != nil {
		return net.JoinHostPort(l, "0")
	}
	return l
}
