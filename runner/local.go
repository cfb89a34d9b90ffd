package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// LocalOptions are what a Local runner needs besides the Spec: things of
// this host and this run that never travel with the workload.
type LocalOptions struct {
	// Exe is the rdmaprobe binary started as server and load generators;
	// default this executable.
	Exe string
	// Certs are the run's server and client pairs.
	Certs certs.Pairs
	// ProfileDir receives the CPU profiles when Spec.Profile is set:
	// <dir>/<n>-<trial>-server.pprof, ...-clients-<i>.pprof.
	ProfileDir string
	// Progress, if set, receives live counts during a point.
	Progress func(Progress)
	// Target is the server under test; default rdmaprobe's own serve.
	Target Target
	// Launcher places the load generators; default this machine.
	Launcher Launcher
	// ServerHost, if set, runs rdmaprobe's own server on its first host
	// instead of this machine (--server-host); Spec.Listen must then be
	// an address of that host.
	ServerHost RemoteLauncher
	// Build builds a server command per client count (Spec.Server.Build);
	// default a build on this machine, cached in DefaultBuildCache.
	Build BuildFunc
	// WorkDir holds each point's working directory ({dir} of server and
	// client commands); default a directory under os.TempDir.
	WorkDir string
	// Out, if set, is told the data-path references' figures.
	Out io.Writer
	// NoReference takes no data-path reference (Referencer): the guest
	// agent's, whose host takes and records it (vm.Guest).
	NoReference bool
}

// Local runs points with a Target and load generators placed by a
// Launcher; by default all as child processes on this machine.
type Local struct {
	spec     Spec
	opts     LocalOptions
	calib    *calibration
	launcher Launcher
	target   Target
	device   *result.DeviceInfo
	// sampleDevice is the RDMA device whose resources the collectors
	// count ("" = none, as on sim).
	sampleDevice string
	// dataRef is perftest's data path between this host and each
	// generator host (Referencer), taken before the first point.
	dataRef  []result.Reference
	refTaken bool
	// climb is the staircase being climbed (Climber), nil between
	// climbs.
	climb *climbState
}

// NewLocal returns a runner of spec's points.
func NewLocal(spec Spec, opts LocalOptions) (*Local, error) {
	if opts.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Exe = exe
	}
	spec = spec.withDefaults()
	// The kernel counts a real device's resources; a simulated one lives
	// in the server's process, out of its sight.
	var sampleDevice string
	if spec.Fabric.Backend == "verbs" {
		if sampleDevice = spec.Fabric.Device; sampleDevice == "" {
			sampleDevice = protocol.HostRDMADevice()
		}
	}
	calib, err := newCalibration(spec, opts.Certs)
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	l := &Local{spec: spec, opts: opts, calib: calib, launcher: opts.Launcher, target: opts.Target,
		sampleDevice: sampleDevice}
	if l.launcher == nil {
		l.launcher = localLauncher{exe: opts.Exe}
	}
	if l.opts.WorkDir == "" {
		l.opts.WorkDir = filepath.Join(os.TempDir(), fmt.Sprintf("rdmaprobe-points-%d", os.Getpid()))
	}
	if l.target == nil && spec.Server != nil {
		if l.target, err = newCommandTarget(spec, l.opts); err != nil {
			return nil, err
		}
	}
	if l.target == nil {
		l.target = &builtinTarget{exe: opts.Exe, spec: spec, certs: opts.Certs, profileDir: opts.ProfileDir, remote: opts.ServerHost}
	}
	if spec.Client != nil {
		if err := spec.Client.Check(spec.Server != nil && len(spec.Server.Build) > 0); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// pointDir is the working directory of a point of n clients, trial.
func pointDir(workDir string, n, trial int) string {
	return filepath.Join(workDir, fmt.Sprintf("%d-%d", n, trial))
}

// notStarted records a point whose server could not be built, started
// or made ready: its clients were never launched.
func notStarted(pt *result.Point, n int, why string) {
	pt.Error = why
	for id := 0; id < n; id++ {
		pt.Records = append(pt.Records, result.ClientRecord{ID: id, Outcome: result.OutcomeTimeout, Error: "not started: " + why})
	}
}

// Device is what the server reported at its last start.
func (l *Local) Device() *result.DeviceInfo { return l.device }

// Close ends a climb left standing; every point reaps its own
// processes.
func (l *Local) Close() error { return l.Descend() }

// Describe names a real device's port in the backend's description, and
// records the generators' hosts when they are other machines.
func (l *Local) Describe(run *result.Run) {
	if r := l.remote(); r != nil {
		run.Hosts = r.Hosts()
		run.Config.Launcher = r.Name()
		run.Config.ServerAddr = l.spec.ListenAddr()
	}
	if s := l.opts.ServerHost; s != nil {
		if hs := s.Hosts(); len(hs) > 0 {
			run.ServerHost = &hs[0]
		}
		run.Config.ServerAddr = l.spec.ListenAddr()
	}
	if l.dataRef != nil {
		run.Environment.DataPath = l.dataRef
	}
	if d := l.device; d != nil && run.Backend.Name == "verbs" {
		run.Backend.Description = fmt.Sprintf("verbs: %s port %d (%s) on Linux %s",
			d.Name, d.Port.Port, d.Port.LinkLayer, ShortRelease(run.Environment.Kernel))
	}
}

// SetMode sets the server design of the points to come
// (ModeSetter). A server command of the operator's has its own.
func (l *Local) SetMode(mode string) {
	l.spec.Mode = mode
	if t, ok := l.target.(*builtinTarget); ok {
		t.spec.Mode = mode
	}
}

// RunPoint runs one trial with n clients (Runner.RunPoint).
func (l *Local) RunPoint(ctx context.Context, n, trial int) (result.Point, error) {
	spec := l.spec
	if !l.refTaken {
		l.refTaken = true
		l.dataRef = l.dataPathReference(ctx)
	}
	feed := &progressFeed{out: l.opts.Progress}
	pt, err := l.beginPoint(ctx, n, trial, feed)
	if err != nil {
		return pt, err
	}
	feed.phase(PhaseStart, n)
	max := spec.MaxClientsAt(n)
	smp := startSampler(ctx, spec.SampleInterval, l.sampleDevice, feed.sample)
	started := time.Now()
	// A server command's build, start or readiness failing is the
	// point's failure (PointError), not the run's.
	failed := func(err error) (result.Point, error) {
		var pe *PointError
		if !errors.As(err, &pe) || ctx.Err() != nil {
			smp.finish(&pt, max)
			return pt, err
		}
		notStarted(&pt, n, err.Error())
		analysis.SummarisePoint(&pt, spec.Threshold)
		smp.finish(&pt, max)
		pt.DurationSec = time.Since(pt.StartedAt).Seconds()
		return pt, nil
	}
	srv, err := l.target.Start(ctx, n, trial)
	if err != nil {
		return failed(err)
	}
	// The generators start while the server does: each opens its device
	// and says "ready", and all are released at once when the server and
	// every one of them is (see collect). The connect clock starts there,
	// so process start-up is not counted as connection time.
	var build string
	if r := srv.Record(); r != nil && r.Build != nil {
		build = r.Build.Dir
	}
	gens, err := l.startGenerators(n, trial, build)
	if err != nil {
		srv.Stop(10 * time.Second)
		smp.finish(&pt, max)
		return pt, err
	}
	addr, dev, err := srv.Ready(ctx, spec.StartTimeout)
	if err != nil {
		for _, g := range gens {
			g.kill()
		}
		srv.Kill()
		pt.Target = srv.Record()
		return failed(err)
	}
	l.device = dev
	l.sampleProcesses(smp, srv, gens, dev)
	c := newCollection(spec, n, gens, feed.send)
	c.remote = l.remote()
	// rdmaprobe's own server gets the generators' timer slack while
	// clients connect and through a closed-loop phase (slackenThreads
	// says why); a server command of the operator's keeps its own
	// timers.
	restoreSlack := func() {}
	if srv.SharesSlack() {
		restoreSlack = protocol.SlackenThreads(srv.PID(), protocol.ConnectTimerSlack)
	}
	c.run(ctx, srv, addr)
	if !protocol.KeepsSlack(spec.Traffic) {
		restoreSlack()
	}
	if !c.released.IsZero() {
		pt.StartupSec = c.released.Sub(started).Seconds()
		pt.ConnectSec = time.Since(c.released).Seconds()
	}
	smp.loaded(true)
	if l.calib != nil && !c.interrupted {
		// The clients are connected and idle: the server is not working.
		// After the full-load sample, whose CPU figures must not include
		// the calibration's.
		feed.phase(PhaseCalibration, n)
		pt.Calibration.AfterHS = l.calib.measure(ctx, pt.Calibration)
	}
	if protocol.RunsTraffic(spec.Traffic, spec.Client, spec.CM) && c.pointErr == "" {
		pt.Traffic = l.trafficPhase(ctx, c, srv, smp.started)
	}

	l.endPoint(&pt, c, srv, gens, smp)
	// Cut short in any phase (connect, traffic, the hold until release):
	// what a cancelled point measured is no measurement of n clients,
	// even when every client had connected before the cut.
	if ctx.Err() != nil {
		pt.Interrupted, pt.Error = true, Interrupted
	}
	analysis.SummarisePoint(&pt, spec.Threshold)
	smp.finish(&pt, max)
	pt.DurationSec = time.Since(pt.StartedAt).Seconds()
	if ctx.Err() != nil {
		return pt, ctx.Err()
	}
	return pt, nil
}

// cmSteps is how the rdma_cm generators of a point of n clients step
// their connections (result.Point.CMSteps); "" for other clients.
func (s Spec) cmSteps(n int) string {
	if s.CM == nil {
		return ""
	}
	procs := max(1, s.Procs)
	rate := s.Rate / float64(procs)
	big, small := s.CM.Lockstep((n+procs-1)/procs, s.InFlight, rate), s.CM.Lockstep(n/procs, s.InFlight, rate)
	switch {
	case big:
		return protocol.CMStepsLockstep
	case !small:
		return protocol.CMStepsInterleaved
	}
	return "mixed"
}

// beginPoint is a point before its server starts: the calibration
// before it, and a fresh directory for the commands' files.
func (l *Local) beginPoint(ctx context.Context, n, trial int, feed *progressFeed) (result.Point, error) {
	pt := result.Point{Clients: n, Trial: trial, StartedAt: time.Now().UTC(), CMSteps: l.spec.cmSteps(n)}
	if l.calib != nil {
		feed.phase(PhaseCalibration, n)
		pt.Calibration = &result.Calibration{WindowSec: l.calib.window.Seconds()}
		pt.Calibration.BeforeHS = l.calib.measure(ctx, pt.Calibration)
	}
	if l.spec.Server != nil || l.spec.Client != nil {
		dir := pointDir(l.opts.WorkDir, n, trial)
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return pt, fmt.Errorf("point directory: %w", err)
		}
	}
	return pt, nil
}

// sampleProcesses tells the sampler which processes are the point's:
// the server's tree (unless it runs elsewhere) and the generators here.
func (l *Local) sampleProcesses(smp *sampler, srv Server, gens []*process, dev *result.DeviceInfo) {
	if pid := srv.PID(); pid > 0 {
		smp.serverUp(pid, srv.Tree(), dev)
	} else {
		smp.serverElsewhere(dev)
	}
	for i, g := range gens {
		if l.launcher.Host(i) == "" {
			smp.add(fmt.Sprintf("clients-%d", i), g.pid())
			smp.shared = srv.PID() > 0
		}
	}
}

// endPoint releases the clients (stdin EOF), then stops the server,
// which gives its own view as it exits, and records what both said.
func (l *Local) endPoint(pt *result.Point, c *collection, srv Server, gens []*process, smp *sampler) {
	for _, g := range gens {
		g.closeStdin()
	}
	for i, g := range gens {
		for _, ev := range g.drain(30 * time.Second) {
			if ev.Event == "dropped" {
				c.dropped(i, ev.Records)
			}
		}
	}
	smp.serverDone()
	var exitErr string
	pt.Server, exitErr = srv.Stop(30 * time.Second)
	if exitErr != "" && c.pointErr == "" {
		pt.Server.ExitError = exitErr
	}
	pt.Target = srv.Record()
	pt.Error = c.pointErr
	pt.Records = c.records()
	pt.Unlaunched = c.unlaunched()
	if r := l.remote(); r != nil {
		pt.Hosts = c.hostPoints(r)
	}
}

// startGenerators starts the load generators through the Launcher; each
// waits for the server's address on its stdin (collect sends it).
func (l *Local) startGenerators(n, trial int, build string) ([]*process, error) {
	spec := l.spec
	procs := min(spec.Procs, n)
	var env []string
	if _, g := splitCPUs(spec.GoMaxProcs, runtime.NumCPU(), spec.Procs); g > 0 {
		env = []string{"GOMAXPROCS=" + strconv.Itoa(g)}
	}
	var gens []*process
	base := 0
	for i := 0; i < procs; i++ {
		k := share(n, procs, i)
		gs := protocol.GeneratorSpec{N: k, IDBase: base, Proc: i, Fabric: spec.Fabric.Generators(),
			CA: l.opts.Certs.Server.CertPEM, Cert: l.opts.Certs.Client.CertPEM, Key: l.opts.Certs.Client.KeyPEM,
			TLSResume: spec.TLSResume, TLSKex: spec.TLSKex, InFlight: spec.InFlight,
			Timeout: spec.Timeout, Rounds: spec.Rounds, MsgSize: spec.MsgSize, Mux: spec.MuxOrDefault(), UD: spec.Mode == server.ModeUD,
			Command: spec.Client, CM: spec.CM, Total: n, Build: build}
		if spec.Client == nil && spec.CM == nil && spec.WallStop > 0 {
			gs.WallStop, gs.FailAllowance = spec.WallStop, analysis.FailAllowance(n, spec.Threshold)
		}
		if protocol.RunsTraffic(spec.Traffic, spec.Client, spec.CM) {
			gs.Traffic = spec.traffic()
		}
		if spec.Client != nil {
			gs.Dir = pointDir(l.opts.WorkDir, n, trial)
		}
		if spec.Rate > 0 {
			gs.Rate = spec.Rate / float64(procs)
		}
		if spec.Profile && l.opts.ProfileDir != "" {
			gs.CPUProfile = filepath.Join(l.opts.ProfileDir, clientsProfile(n, trial, i))
		}
		genv := env
		if r := l.remote(); r != nil {
			// On its own host a generator shares the CPUs with no
			// server, and its simulated port takes the host's address
			// (the launcher's, or the one towards the server).
			genv = nil
			gs.Fabric.Addr = r.Addr(i)
			if h, _, err := net.SplitHostPort(spec.ListenAddr()); err == nil {
				gs.Fabric.Toward = h
			}
		}
		g, err := l.launch(i, gs, genv)
		if err != nil {
			for _, g := range gens {
				g.kill()
			}
			return nil, err
		}
		gens = append(gens, g)
		base += k
	}
	return gens, nil
}

func (l *Local) launch(i int, gs protocol.GeneratorSpec, env []string) (*process, error) {
	name := fmt.Sprintf("load generator %d", i)
	if h := l.launcher.Host(i); h != "" {
		name += " on " + h
	}
	cmd, err := l.launcher.Command(i, []string{"clients", "--spec", "-"}, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	g, err := startProcess(name, cmd, gs)
	if err != nil {
		return nil, err
	}
	if r := l.remote(); r != nil {
		g.remoteKill = func(pid int) { r.Kill(i, pid) }
	}
	return g, nil
}

// dataPathReference is perftest's data path between this host and each
// generator host, when the launcher can take it (Referencer): on a real
// device, with a traffic phase to set it against, and the server here
// (with --server-host the server's host is another machine).
func (l *Local) dataPathReference(ctx context.Context) []result.Reference {
	r, ok := l.launcher.(Referencer)
	spec := l.spec
	if !ok || l.opts.NoReference || spec.Fabric.Backend != "verbs" || spec.Traffic.Duration <= 0 || l.opts.ServerHost != nil {
		return nil
	}
	size := spec.MsgSize
	if size <= 0 {
		size = 4096
	}
	addr := spec.ListenAddr()
	if spec.Server != nil && spec.Server.Addr != "" {
		addr = spec.Server.Addr
	}
	ip, _, err := net.SplitHostPort(addr)
	if err != nil {
		ip = addr
	}
	if a, err := netip.ParseAddr(ip); err != nil || a.IsLoopback() || a.IsUnspecified() {
		return nil // no address the generator hosts reach this one at
	}
	return r.DataPathReference(ctx, spec.Fabric.Generators(), spec.Traffic.Op, size, ip, l.opts.Out)
}

// remote is the launcher when it places generators on other hosts.
func (l *Local) remote() RemoteLauncher {
	r, _ := l.launcher.(RemoteLauncher)
	return r
}

// ShortRelease turns "6.1.0-56-amd64" into "6.1".
func ShortRelease(r string) string {
	parts := strings.SplitN(r, ".", 3)
	if len(parts) < 2 {
		return r
	}
	return parts[0] + "." + strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
}
