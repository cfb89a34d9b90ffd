// Package runner runs one probe point: it starts the server process,
// waits for its ready line, starts the load generators, collects and
// validates their outcomes, stops everything and reaps every child.
package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Config of the points a Local runner runs.
type Config struct {
	// Exe is the rdmaprobe binary started as server and load generators.
	Exe string
	// FabricArgs select the fabric in both, e.g. ["--backend", "sim"].
	FabricArgs []string
	// MaxClients is the server's cap; 0 means each point's N.
	MaxClients int
	Mode       string
	Procs      int
	Rate       float64
	Timeout    time.Duration // per client
	Rounds     int
	MsgSize    int
	Threshold  float64
	// CertFile/KeyFile are the server's pair; clients pin CertFile.
	CertFile, KeyFile string
	// ClientCertFile/ClientKeyFile are the clients' pair (mutual TLS):
	// the server authorises ClientCertFile, the clients present both.
	ClientCertFile, ClientKeyFile string
	// ProfileDir, if set, receives CPU profiles of the server and each
	// generator: <dir>/<n>-<trial>-server.pprof, ...-clients-<i>.pprof.
	ProfileDir string
	// InFlight bounds each generator's connection attempts in progress.
	InFlight int
	// TLSResume lets a generator's clients resume TLS sessions.
	TLSResume bool
	// Detach has the server close each client's control connection once
	// accepted (serve --detach, server.Config.Detach).
	Detach bool
	// TLSKex is the handshake's key exchange (certs.KexHybrid, KexX25519)
	// for the server and every generator.
	TLSKex string
	// GoMaxProcs is how the server's and generators' Go runtimes share
	// this machine's CPUs: GoMaxProcsSplit (the default, "") or
	// GoMaxProcsAll.
	GoMaxProcs string
	// ServerArgs are extra flags for serve (e.g. --backlog).
	ServerArgs []string
	// SampleInterval is the collectors' period (0 = their default, < 0 =
	// off); SampleDevice is the RDMA device whose resources are counted
	// ("" = none, as on sim).
	SampleInterval time.Duration
	SampleDevice   string
	// CalibrationWindow is how long each point measures this machine's
	// speed just before its server starts and again just after its last
	// client's outcome (certs.HandshakeRate, recorded in
	// Point.Calibration); 0 = DefaultCalibration, < 0 = off.
	CalibrationWindow time.Duration
	// StartTimeout bounds waiting for the server's ready line.
	StartTimeout time.Duration
	// Progress, if set, receives live counts during a point.
	Progress func(Progress) `json:"-"`
}

// Progress is a live view of a running point.
type Progress struct {
	Clients, Done, OK int
}

// Local runs points as child processes on this machine.
type Local struct {
	cfg   Config
	calib *calibration
	// Device is what the server reported at its last start.
	Device *result.DeviceInfo
}

// NewLocal returns a runner; cfg.Exe defaults to this executable.
func NewLocal(cfg Config) (*Local, error) {
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Exe = exe
	}
	if cfg.Procs < 1 {
		cfg.Procs = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, fmt.Errorf("runner needs the server certificate and key files")
	}
	calib, err := newCalibration(cfg)
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	return &Local{cfg: cfg, calib: calib}, nil
}

// RunPoint runs one trial with n clients. Failures of the point itself
// (server died, generator crashed or hung) are recorded in Point.Error
// with the outcomes collected so far; the error return is for ctx
// cancellation and for a server that never became ready.
func (l *Local) RunPoint(ctx context.Context, n, trial int) (result.Point, error) {
	cfg := l.cfg
	pt := result.Point{Clients: n, Trial: trial, StartedAt: time.Now().UTC()}
	max := cfg.MaxClients
	if max <= 0 {
		max = n
	}
	srvArgs := append([]string{"serve", "--listen", "127.0.0.1:0",
		"--max-clients", strconv.Itoa(max), "--mode", cfg.Mode,
		"--cert", cfg.CertFile, "--key", cfg.KeyFile, "--client-ca", cfg.ClientCertFile, "--events",
		// The server waits for a client as long as the client itself may
		// take, so a slow client is the client's timeout, not the server's.
		"--handshake-timeout", cfg.Timeout.String(), "--exchange-timeout", cfg.Timeout.String()}, cfg.FabricArgs...)
	if cfg.MsgSize > 0 {
		srvArgs = append(srvArgs, "--msg-size", strconv.Itoa(cfg.MsgSize))
	}
	if cfg.TLSKex != "" {
		srvArgs = append(srvArgs, "--tls-kex", cfg.TLSKex)
	}
	if cfg.TLSResume {
		srvArgs = append(srvArgs, "--tls-tickets")
	}
	if cfg.Detach {
		srvArgs = append(srvArgs, "--detach")
	}
	srvArgs = append(srvArgs, cfg.ServerArgs...)
	if cfg.ProfileDir != "" {
		srvArgs = append(srvArgs, "--cpuprofile", filepath.Join(cfg.ProfileDir, fmt.Sprintf("%d-%d-server.pprof", n, trial)))
	}
	if l.calib != nil {
		pt.Calibration = &result.Calibration{WindowSec: l.calib.window.Seconds()}
		pt.Calibration.BeforeHS = l.calib.measure(ctx, pt.Calibration)
	}
	smp := startSampler(ctx, cfg)
	srvProcs, _ := splitCPUs(cfg.GoMaxProcs, runtime.NumCPU(), cfg.Procs)
	started := time.Now()
	srv, err := startChild("server", cfg.Exe, srvArgs, srvProcs)
	if err != nil {
		smp.finish(&pt, max)
		return pt, err
	}
	// The generators start while the server does: each opens its device
	// and says "ready", and all are released at once when the server and
	// every one of them is (see collect). The connect clock starts there,
	// so process start-up is not counted as connection time.
	gens, err := l.startGenerators(n, trial)
	if err != nil {
		srv.stop(10 * time.Second)
		smp.finish(&pt, max)
		return pt, err
	}
	addr, err := l.awaitReady(ctx, srv)
	if err != nil {
		for _, g := range gens {
			g.kill()
		}
		srv.kill()
		smp.finish(&pt, max)
		return pt, err
	}
	smp.serverUp(srv.cmd.Process.Pid, l.Device)
	for i, g := range gens {
		smp.add(fmt.Sprintf("clients-%d", i), g.cmd.Process.Pid)
	}
	recs, pointErr, released := l.collect(ctx, n, srv, gens, addr)
	if !released.IsZero() {
		pt.StartupSec = released.Sub(started).Seconds()
		pt.ConnectSec = time.Since(released).Seconds()
	}
	smp.loaded()
	if l.calib != nil {
		// The clients are connected and idle: the server is not working.
		// After the full-load sample, whose CPU figures must not include
		// the calibration's.
		pt.Calibration.AfterHS = l.calib.measure(ctx, pt.Calibration)
	}

	// Release the clients (stdin EOF), then stop the server, which prints
	// its own view as it exits.
	for _, g := range gens {
		g.stdin.Close()
	}
	for _, g := range gens {
		g.drain(30 * time.Second)
	}
	smp.serverDone()
	for _, ev := range srv.stop(30 * time.Second) {
		if ev.Event == "stats" && ev.Server != nil {
			pt.Server = *ev.Server
		}
	}
	if srv.err != nil && pointErr == "" {
		pt.Server.ExitError = srv.exitText()
	}
	pt.Error = pointErr
	pt.Records = recs
	Summarise(&pt, cfg.Threshold)
	smp.finish(&pt, max)
	pt.DurationSec = time.Since(pt.StartedAt).Seconds()
	if ctx.Err() != nil {
		return pt, ctx.Err()
	}
	return pt, nil
}

func (l *Local) awaitReady(ctx context.Context, srv *child) (string, error) {
	t := time.NewTimer(l.cfg.StartTimeout)
	defer t.Stop()
	for {
		select {
		case ev, ok := <-srv.events:
			if !ok {
				<-srv.exited
				return "", fmt.Errorf("server did not start: %s", srv.exitText())
			}
			switch ev.Event {
			case "ready":
				l.Device = ev.Device
				return ev.Addr, nil
			case "error":
				return "", fmt.Errorf("server: %s", ev.Error)
			}
		case <-t.C:
			return "", fmt.Errorf("server not ready after %s: %s", l.cfg.StartTimeout, srv.tail.String())
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// share splits n clients over procs processes as evenly as possible.
func share(n, procs, i int) int {
	s := n / procs
	if i < n%procs {
		s++
	}
	return s
}

// startGenerators starts the load generators; each waits for the
// server's address on its stdin (collect sends it).
func (l *Local) startGenerators(n, trial int) ([]*child, error) {
	cfg := l.cfg
	procs := cfg.Procs
	_, genProcs := splitCPUs(cfg.GoMaxProcs, runtime.NumCPU(), procs)
	if procs > n {
		procs = n
	}
	var gens []*child
	base := 0
	for i := 0; i < procs; i++ {
		k := share(n, procs, i)
		args := append([]string{"clients", "--n", strconv.Itoa(k),
			"--id-base", strconv.Itoa(base), "--proc", strconv.Itoa(i),
			"--timeout", cfg.Timeout.String(), "--rounds", strconv.Itoa(cfg.Rounds),
			"--ca", cfg.CertFile, "--cert", cfg.ClientCertFile, "--key", cfg.ClientKeyFile,
			"--events", "--inflight", strconv.Itoa(cfg.InFlight)}, cfg.FabricArgs...)
		if cfg.Rate > 0 {
			args = append(args, "--rate", strconv.FormatFloat(cfg.Rate/float64(procs), 'f', -1, 64))
		}
		if cfg.MsgSize > 0 {
			args = append(args, "--msg-size", strconv.Itoa(cfg.MsgSize))
		}
		if cfg.TLSResume {
			args = append(args, "--tls-resume")
		}
		if cfg.TLSKex != "" {
			args = append(args, "--tls-kex", cfg.TLSKex)
		}
		if cfg.ProfileDir != "" {
			args = append(args, "--cpuprofile", filepath.Join(cfg.ProfileDir, fmt.Sprintf("%d-%d-clients-%d.pprof", n, trial, i)))
		}
		g, err := startChild(fmt.Sprintf("load generator %d", i), cfg.Exe, args, genProcs)
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

// collect releases the generators once each has said "ready" (or died):
// it writes the server's address to their stdin and returns when that
// was (zero if none was released). Then it waits for every generator's
// "done" line. A generator that exits without it, or does not finish
// before the deadline, has its clients recorded as failed with the
// reason.
func (l *Local) collect(ctx context.Context, n int, srv *child, gens []*child, addr string) ([]result.ClientRecord, string, time.Time) {
	cfg := l.cfg
	launch := time.Duration(0)
	if cfg.Rate > 0 {
		launch = time.Duration(float64(n) / cfg.Rate * float64(time.Second))
	}
	// Every client has its own deadline (cfg.Timeout from its launch), and
	// a generator reports progress as its clients finish: one silent for
	// longer than a client may take is hung.
	quiet := cfg.Timeout + 10*time.Second + cfg.Timeout/4
	// Until the release, the deadline is the generators' start-up bound.
	deadline := time.NewTimer(cfg.StartTimeout)
	defer deadline.Stop()

	type state struct {
		ready    bool
		done     bool
		progress Event
		recs     []result.ClientRecord
	}
	st := make([]state, len(gens))
	var pointErr string
	var released time.Time
	// release starts the clients once no generator is still starting.
	release := func() {
		if !released.IsZero() {
			return
		}
		for _, s := range st {
			if !s.ready && !s.done {
				return
			}
		}
		released = time.Now()
		for i, g := range gens {
			if st[i].ready && !st[i].done {
				// A generator that died meanwhile shows as closed events.
				io.WriteString(g.stdin, addr+"\n")
			}
		}
		deadline.Reset(launch + quiet)
	}
	report := func() {
		if cfg.Progress == nil {
			return
		}
		p := Progress{Clients: n}
		for _, s := range st {
			p.Done += s.progress.Done
			p.OK += s.progress.OK
		}
		cfg.Progress(p)
	}
	lost := func(i int, why string) {
		base := 0
		for j := 0; j < i; j++ {
			base += share(n, len(gens), j)
		}
		k := share(n, len(gens), i)
		for id := base; id < base+k; id++ {
			st[i].recs = append(st[i].recs, result.ClientRecord{ID: id, Proc: i,
				Outcome: result.OutcomeTimeout, Error: why})
		}
		st[i].done = true
	}
	// Fan the generators' events into one channel until collect returns.
	type tagged struct {
		i      int
		ev     Event
		closed bool
	}
	merged := make(chan tagged)
	quit := make(chan struct{})
	defer close(quit)
	for i, g := range gens {
		go func(i int, g *child) {
			for {
				ev, ok := <-g.events
				select {
				case merged <- tagged{i: i, ev: ev, closed: !ok}:
				case <-quit:
					return
				}
				if !ok || ev.Event == "done" {
					return
				}
			}
		}(i, g)
	}
	remaining := len(gens)
	srvEvents := srv.events
	for remaining > 0 {
		select {
		case t := <-merged:
			i, g, ev := t.i, gens[t.i], t.ev
			if st[i].done {
				continue // killed and recorded already
			}
			if t.closed {
				<-g.exited
				why := g.exitText() + " before reporting"
				if pointErr == "" {
					pointErr = why
				}
				lost(i, why)
				remaining--
				release()
				continue
			}
			switch ev.Event {
			case "ready":
				st[i].ready = true
				release()
			case "progress":
				if ev.Done > st[i].progress.Done {
					deadline.Reset(quiet)
				}
				st[i].progress = ev
				report()
			case "done":
				st[i].recs = ev.Records
				st[i].progress = Event{Done: len(ev.Records), OK: ev.OK}
				st[i].done = true
				remaining--
				report()
			case "error":
				if pointErr == "" {
					pointErr = g.name + ": " + ev.Error
				}
			}
		case <-ctx.Done():
			for i, g := range gens {
				if !st[i].done {
					g.kill()
					lost(i, "interrupted")
				}
			}
			return flatten(st, func(s state) []result.ClientRecord { return s.recs }), "interrupted", released
		case <-deadline.C:
			if released.IsZero() {
				// Start the clients of the generators that are ready.
				for i, g := range gens {
					if !st[i].ready && !st[i].done {
						g.kill()
						why := fmt.Sprintf("%s hung: not ready %s after it started", g.name, cfg.StartTimeout)
						if pointErr == "" {
							pointErr = why
						}
						lost(i, why)
						remaining--
					}
				}
				release()
				continue
			}
			for i, g := range gens {
				if !st[i].done {
					g.kill()
					why := g.name + " hung: no result before the point's deadline"
					if pointErr == "" {
						pointErr = why
					}
					lost(i, why)
					remaining--
				}
			}
		case ev, ok := <-srvEvents:
			if !ok {
				srvEvents = nil
				<-srv.exited
				if pointErr == "" {
					pointErr = "server died during the point: " + srv.exitText()
				}
			} else if ev.Event == "error" && pointErr == "" {
				pointErr = "server: " + ev.Error
			}
			if srvEvents == nil && released.IsZero() {
				// No server to release the clients at.
				for i, g := range gens {
					if !st[i].done {
						g.kill()
						lost(i, "not started: "+pointErr)
						remaining--
					}
				}
			}
		}
	}
	return flatten(st, func(s state) []result.ClientRecord { return s.recs }), pointErr, released
}

func flatten[S any](st []S, f func(S) []result.ClientRecord) []result.ClientRecord {
	var out []result.ClientRecord
	for _, s := range st {
		out = append(out, f(s)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// GoMaxProcs policies (Config.GoMaxProcs, --gomaxprocs).
const (
	// GoMaxProcsSplit gives the server half of the CPUs (at least one)
	// and each load generator an equal share of the rest (at least one).
	// Server and generators share one machine here, unlike in a real
	// deployment; left at Go's default, each runtime sizes itself to every
	// CPU and their idle Ps spin against each other. In the 2-vCPU TCG
	// guest that cost a third of the connect throughput (82 vs 115
	// connects/s at 2000 clients, srq).
	GoMaxProcsSplit = "split"
	// GoMaxProcsAll leaves every process at Go's default (all CPUs).
	GoMaxProcsAll = "all"
)

// GoMaxProcsPolicies lists the accepted policies.
var GoMaxProcsPolicies = []string{GoMaxProcsSplit, GoMaxProcsAll}

// splitCPUs returns GOMAXPROCS for the server and for each of procs
// generators on a machine with cpus CPUs; 0 means Go's default.
func splitCPUs(policy string, cpus, procs int) (server, generator int) {
	if policy == GoMaxProcsAll {
		return 0, 0
	}
	if procs < 1 {
		procs = 1
	}
	server = max(1, cpus/2)
	generator = max(1, (cpus-server)/procs)
	return server, generator
}
