package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// BuildFunc builds the server for a client count and cap: on this host
// with a command.Builder, or, in a guest, by returning what the host
// built and sent before the point.
type BuildFunc func(ctx context.Context, n, max int) (*result.Build, error)

// NewBuilder is the BuildFunc of argv with its cache under dir, which
// records the SHA-256 of every file a build produced.
func NewBuilder(argv []string, dir string) BuildFunc {
	b := &command.Builder{Argv: argv, Dir: dir}
	var mu sync.Mutex
	sums := map[string]map[string]string{} // key → outputs
	return func(ctx context.Context, n, max int) (*result.Build, error) {
		built, err := b.Ensure(ctx, map[string]string{"n": strconv.Itoa(n), "max": strconv.Itoa(max)})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if sums[built.Key] == nil {
			sums[built.Key] = command.HashTree(built.Dir)
		}
		return &result.Build{Argv: built.Argv, Dir: built.Dir, Key: built.Key, Cached: built.Cached,
			DurationSec: built.Duration.Seconds(), Outputs: sums[built.Key], Tail: built.Tail}, nil
	}
}

// DefaultBuildCache is where builds are kept unless said otherwise.
func DefaultBuildCache() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rdmaprobe", "builds")
	}
	return filepath.Join(os.TempDir(), "rdmaprobe-builds")
}

// PointError is a point that failed before its clients ran (the build
// failed, the server could not start or never became ready): recorded as
// the point's error with its clients not started, not as the end of the
// run.
type PointError struct{ Err error }

func (e *PointError) Error() string { return e.Err.Error() }
func (e *PointError) Unwrap() error { return e.Err }

// commandTarget runs a ServerCommand on this machine.
type commandTarget struct {
	spec    Spec
	certs   certs.Pairs
	cmd     protocol.ServerCommand
	build   BuildFunc
	workDir string
	ready   *regexp.Regexp
}

func newCommandTarget(spec Spec, opts LocalOptions) (*commandTarget, error) {
	c := *spec.Server
	if err := c.Check(); err != nil {
		return nil, err
	}
	t := &commandTarget{spec: spec, cmd: c, build: opts.Build, workDir: opts.WorkDir, certs: opts.Certs}
	if c.Ready != "" {
		t.ready = regexp.MustCompile(c.Ready)
	}
	if t.build == nil && len(c.Build) > 0 {
		t.build = NewBuilder(c.Build, DefaultBuildCache())
	}
	return t, nil
}

func (t *commandTarget) Start(ctx context.Context, n, trial int) (Server, error) {
	max := t.spec.MaxClientsAt(n)
	rec := &result.TargetPoint{}
	vars := map[string]string{"n": strconv.Itoa(n), "max": strconv.Itoa(max),
		"device": t.spec.Fabric.Device, "addr": t.cmd.DialAddr()}
	if t.build != nil {
		b, err := t.build(ctx, n, max)
		if err != nil {
			return nil, &PointError{err}
		}
		rec.Build = b
		vars["build"] = b.Dir
	}
	// The runner made it, fresh, for this point.
	dir := pointDir(t.workDir, n, trial)
	vars["dir"] = dir
	if err := t.writeCerts(dir, vars); err != nil {
		return nil, fmt.Errorf("server certificates: %w", err)
	}
	port := t.cmd.Port
	if port > 0 {
		// A server with a fixed port binds it again at every point; the
		// last one's connections must have gone first.
		if err := command.WaitPortFree(ctx, port, 2*time.Minute); err != nil {
			return nil, &PointError{err}
		}
	} else {
		var err error
		if port, err = freePort(); err != nil {
			return nil, fmt.Errorf("pick a port for the server: %w", err)
		}
	}
	vars["port"] = strconv.Itoa(port)
	argv, err := command.Expand(t.cmd.Argv, vars)
	if err != nil {
		return nil, err // Check has seen the template: not reached
	}
	rec.Argv = argv
	p, err := command.Start(command.Spec{Argv: argv, Dir: dir, Match: t.ready, TailBytes: 8192, OnlyDevice: t.cmd.OnlyDevice})
	if err != nil {
		return nil, &PointError{fmt.Errorf("server: %w", err)}
	}
	rec.PID = p.PID
	s := &commandServer{t: t, p: p, port: port, rec: rec, events: make(chan protocol.Event)}
	// Events end when the server does: the collection reads that as the
	// server dying during the point.
	go func() {
		<-p.Done()
		close(s.events)
	}()
	return s, nil
}

// writeCerts writes the run's pairs the template names into dir.
func (t *commandTarget) writeCerts(dir string, vars map[string]string) error {
	used := command.Placeholders(t.cmd.Argv)
	for _, f := range []struct {
		name, file string
		pem        []byte
	}{
		{"cert", "server.pem", t.certs.Server.CertPEM},
		{"key", "server.key", t.certs.Server.KeyPEM},
		{"client_ca", "client-ca.pem", t.certs.Client.CertPEM},
	} {
		if !slices.Contains(used, f.name) {
			continue
		}
		p := filepath.Join(dir, f.file)
		if err := os.WriteFile(p, f.pem, 0o600); err != nil {
			return err
		}
		vars[f.name] = p
	}
	return nil
}

// freePort picks a TCP port no one uses now for the server command,
// below the kernel's ephemeral range where it can: a port the kernel
// hands out for :0 comes from that range, and between this pick and the
// server's bind any outgoing connection on the machine may take it as its
// source port (the server then fails to start, and the point with it).
// Falls back to the kernel's pick.
func freePort() (int, error) {
	if lo := ephemeralLow(); lo > lowPortFloor {
		for range 32 {
			p := lowPortFloor + rand.IntN(lo-lowPortFloor)
			if l, err := net.Listen("tcp", ":"+strconv.Itoa(p)); err == nil {
				l.Close()
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lowPortFloor is where freePort's picks start: above the ports services
// are usually configured on.
const lowPortFloor = 10000

// ephemeralLow is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range; Linux's default when unreadable).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if lo, err := strconv.Atoi(f[0]); err == nil {
			return lo
		}
	}
	return 32768
}

// commandServer is a running ServerCommand.
type commandServer struct {
	t      *commandTarget
	p      *command.Proc
	port   int
	rec    *result.TargetPoint
	events chan protocol.Event
	stop   *command.StopReport
}

func (s *commandServer) Ready(ctx context.Context, timeout time.Duration) (string, *result.DeviceInfo, error) {
	if st := s.t.cmd.StartTimeout; st > 0 {
		timeout = st
	}
	r := command.Readiness{Port: s.port, Line: s.t.ready != nil, Timeout: timeout}
	if r.Line {
		r.Port = 0 // the operator said which line means ready
	}
	if dev := s.t.spec.Fabric.Device; dev != "" && s.t.spec.Fabric.Backend == "verbs" {
		r.Listening = listeningTCPOrCM()
	}
	if err := command.WaitReady(ctx, s.p, r); err != nil {
		if errors.Is(err, context.Canceled) {
			return "", nil, err
		}
		return "", nil, &PointError{err}
	}
	return net.JoinHostPort(s.t.cmd.DialAddr(), strconv.Itoa(s.port)), nil, nil
}

// listeningTCPOrCM sees a TCP listener, or an rdma_cm one (rping's),
// which opens no socket; the kernel's cm_id dump is read at most every
// 50 ms, since it runs the rdma tool.
func listeningTCPOrCM() func(int) bool {
	var last time.Time
	return func(port int) bool {
		if command.TCPListening(port) {
			return true
		}
		if time.Since(last) < 50*time.Millisecond {
			return false
		}
		last = time.Now()
		ok, _ := collectors.CMListening(context.Background(), port)
		return ok
	}
}

func (s *commandServer) PID() int                      { return s.p.PID }
func (s *commandServer) Events() <-chan protocol.Event { return s.events }

// Tree lists the server and every process it started.
func (s *commandServer) Tree() func() []int { return s.p.Tree }

// Usage: a server command keeps no account of its CPU for the runner.
func (s *commandServer) Usage(time.Duration) (result.ServerUsage, error) {
	return result.ServerUsage{}, ErrNoUsage
}

// SharesSlack is false: a server command keeps its own timers.
func (s *commandServer) SharesSlack() bool { return false }

// Finished: a server command under launched clients that exited with
// status 0 (finisher).
func (s *commandServer) Finished() bool {
	c := s.t.spec.Client
	return c != nil && !c.Held && s.p.Exited() && s.p.Exit().Code == 0
}

func (s *commandServer) ExitText() string {
	<-s.p.Done()
	s.p.Stop(0) // the rest of its tree, and its last words read
	return fmt.Sprintf("server %s: %s", s.p.Exit(), command.LastLines(s.p.Tail(), 3))
}

// Stop ends the server. Ending on SIGTERM (by the signal, or exiting 0
// or 128+15 as shells do) is clean; having to be killed, or exiting
// otherwise, is said.
func (s *commandServer) Stop(grace time.Duration) (result.ServerStats, string) {
	g := s.t.cmd.Grace()
	if grace < g {
		g = grace
	}
	r := s.p.Stop(g)
	s.stop = &r
	s.rec.Tail = s.p.Tail()
	s.rec.Errors, s.rec.Errnos = command.ErrorLines(s.rec.Tail, 5)
	s.rec.Left = r.Left
	s.rec.Processes = 1 + r.Others
	s.rec.Exit = r.Exit.String()
	var bad string
	switch {
	case r.ExitedBefore && s.Finished():
		// Its clients judged it (finisher): a one-shot server's work ends.
	case r.ExitedBefore:
		bad = "server exited before it was stopped (" + r.Exit.String() + ")"
	case r.Killed:
		bad = fmt.Sprintf("server did not exit within %v of SIGTERM; killed", g)
	case r.Exit.Signal == "SIGTERM" || r.Exit.Code == 0 || r.Exit.Code == 128+15:
	default:
		bad = "server " + r.Exit.String() + " on SIGTERM"
	}
	if len(r.Left) > 0 {
		bad += fmt.Sprintf("; processes %v could not be ended", r.Left)
	}
	if bad != "" {
		s.rec.Exit += " (" + strings.TrimPrefix(bad, "; ") + ")"
	}
	return result.ServerStats{ExitError: strings.TrimPrefix(bad, "; ")}, strings.TrimPrefix(bad, "; ")
}

func (s *commandServer) Kill() { s.p.Stop(0) }

// Record is what the point records of its server command.
func (s *commandServer) Record() *result.TargetPoint { return s.rec }
