package child

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"golang.org/x/sys/unix"
)

// Generate runs the generator's clients. With events (the runner's
// child) it says "started", then "ready" once its device is open, waits
// for the server's address on in (the release), reports "progress" and
// "done" on out, and holds its connected clients until in closes; in
// closing at any time ends it (a generator whose launcher's connection
// dropped exits by itself). Without, it connects to spec.Addr and prints
// one line of counts.
func Generate(ctx context.Context, spec protocol.GeneratorSpec, in *bufio.Reader, out io.Writer, events bool) error {
	RaiseNoFile()
	if spec.Command != nil {
		return generateCommands(ctx, spec, in, out, events)
	}
	if spec.CM != nil {
		return generateCM(ctx, spec, in, out, events)
	}
	emit := protocol.NewEmitter(out)
	if events {
		emit.Emit(protocol.Event{Event: "started", PID: os.Getpid()})
	}
	failf := func(err error) error {
		if events {
			emit.Emit(protocol.Event{Event: "error", Error: err.Error()})
		}
		return err
	}
	stopProfile, err := startProfile(spec.CPUProfile)
	if err != nil {
		return failf(err)
	}
	defer stopProfile()
	if spec.N < 1 {
		return failf(fmt.Errorf("--n must be at least 1"))
	}
	tlsConf, err := clientTLS(spec)
	if err != nil {
		return failf(err)
	}
	p, err := spec.Fabric.Provider()
	if err != nil {
		return failf(err)
	}
	dev, err := p.Open(ctx, spec.Fabric.DeviceConfig())
	if err != nil {
		return failf(fmt.Errorf("open device: %w", err))
	}
	defer dev.Close()
	addr := spec.Addr
	var lines *runnerLines
	if events {
		// Started, device open: the runner sends the server's address
		// when the server and every generator are ready, so the clients
		// of all generators start together and no start-up is timed.
		env := collectors.Environment()
		emit.Emit(protocol.Event{Event: "ready", PID: os.Getpid(), Env: &env,
			Device: &result.DeviceInfo{Name: dev.Name(), Caps: dev.Caps(), Port: dev.Port()}})
		line, err := in.ReadString('\n')
		if err != nil {
			return nil // released before the start: the point was abandoned
		}
		addr = strings.TrimSpace(line)
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		lines = watchRunner(in, cancel)
	}
	d, err := client.NewDialer(dev, client.Config{Addr: addr, TLS: tlsConf,
		Rounds: spec.Rounds, MsgSize: spec.MsgSize, Timeout: spec.Timeout, Depth: spec.Traffic.Depth, BusyPoll: spec.Traffic.BusyPoll,
		Mux: spec.Mux, UD: spec.UD})
	if err != nil {
		return failf(err)
	}
	defer d.Close()

	// round connects one round of clients: the point's, or a
	// staircase's step added on top of those held.
	round := func(spec protocol.GeneratorSpec) ([]result.ClientRecord, []*client.Conn, int) {
		restore := protocol.SlackenThreads(0, protocol.ConnectTimerSlack)
		defer func() {
			if !protocol.KeepsSlack(spec.Traffic) {
				restore()
			}
		}()
		return runClients(ctx, d, spec, emit, events)
	}
	recs, conns, unlaunched := round(spec)
	if events {
		done := func(recs []result.ClientRecord, ok, unlaunched int) {
			usage := selfUsage(spec.Proc, dev.Name(), spec.Fabric.Backend)
			emit.Emit(protocol.Event{Event: "done", OK: ok, Records: recs, Unlaunched: unlaunched, Usage: &usage})
			// The connects' garbage (handshakes, records) goes back to
			// the machine: held, the process is what its clients keep,
			// which the samples' RSS then shows.
			debug.FreeOSMemory()
		}
		done(recs, len(conns), unlaunched)
		holdForRunner(ctx, spec.Traffic, emit, lines, func(ctx context.Context, cfg client.TrafficConfig) result.Traffic {
			return d.Traffic(ctx, conns, cfg)
		}, func(a protocol.Add) {
			more := spec
			more.N, more.IDBase, more.FailAllowance = a.N, a.IDBase, a.FailAllowance
			recs, added, unlaunched := round(more)
			conns = append(conns, added...)
			done(recs, len(added), unlaunched)
		})
	} else if err := standalone(ctx, d, spec, recs, conns, in, out); err != nil {
		return err
	}
	client.CloseAll(conns)
	return nil
}

// clientTLS is the clients' TLS: pinned to the run's CA, with the key
// exchange and session resumption the spec asks for.
func clientTLS(spec protocol.GeneratorSpec) (*tls.Config, error) {
	tlsConf, err := certs.Pinned(spec.CA, certs.Pair{CertPEM: spec.Cert, KeyPEM: spec.Key})
	if err != nil {
		return nil, err
	}
	if err := certs.SetKeyExchange(tlsConf, spec.TLSKex); err != nil {
		return nil, err
	}
	if spec.TLSResume {
		tlsConf.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	}
	return tlsConf, nil
}

// runnerLines are what the runner says to a generator once its clients
// started.
type runnerLines struct {
	// released is closed when in ends after the release: the runner let
	// the clients go, or it (or the connection to it) is gone.
	released chan struct{}
	// startTraffic gets a traffic phase's window on the runner's
	// protocol.StartTraffic line: a channel closed on its
	// EndTrafficWindow line. Each phase has its own, since a staircase
	// runs one per step.
	startTraffic chan chan struct{}
	// add gets the runner's protocol.Add lines: more clients on top of
	// those held.
	add chan protocol.Add
}

// watchRunner reads the runner's lines from in until the release, then
// closes released and calls cancel.
func watchRunner(in *bufio.Reader, cancel func()) *runnerLines {
	l := &runnerLines{released: make(chan struct{}), startTraffic: make(chan chan struct{}, 1), add: make(chan protocol.Add, 1)}
	go func() {
		// The lines are read in order by this goroutine alone: a
		// phase's end line always finds its own window.
		var window chan struct{}
		watchRelease(in, protocol.HeartbeatLost, func(line string) {
			switch strings.TrimSpace(line) {
			case protocol.StartTraffic:
				window = make(chan struct{})
				select {
				case l.startTraffic <- window:
				default:
				}
			case protocol.EndTrafficWindow:
				if window != nil {
					close(window)
					window = nil
				}
			default:
				if a, ok := protocol.ParseAdd(line); ok {
					// The runner waits for a step's clients before it
					// sends the next: this never blocks the reading,
					// whose silence would count as the runner gone.
					select {
					case l.add <- a:
					default:
					}
				}
			}
		})
		close(l.released)
		cancel()
	}()
	return l
}

// holdForRunner holds every connected client until the runner releases
// them, meanwhile running a traffic phase (run) each time the runner
// asks (every client it holds connected) and adding clients (add) on
// each of the runner's protocol.Add lines, one at a time in the order
// the runner sent them.
func holdForRunner(ctx context.Context, traffic client.TrafficConfig, emit *protocol.Emitter, l *runnerLines,
	run func(context.Context, client.TrafficConfig) result.Traffic, add func(protocol.Add)) {
	for {
		select {
		case window := <-l.startTraffic:
			if traffic.Duration <= 0 {
				continue
			}
			cfg := traffic
			cfg.Shared = &client.SharedWindow{End: window,
				Measured: func() { emit.Emit(protocol.Event{Event: "measured"}) }}
			cfg.Progress = func(n int64) { emit.Emit(protocol.Event{Event: "traffic-progress", Messages: n}) }
			// (Traffic returns at once when ctx ends, with what it
			// measured: an interrupted phase is reported too.)
			tr := run(ctx, cfg)
			emit.Emit(protocol.Event{Event: "traffic", Traffic: &tr})
		case a := <-l.add:
			if add != nil {
				add(a)
			}
		case <-l.released:
			return
		case <-ctx.Done():
			return
		}
	}
}

// standalone, without a runner: print the counts, run the traffic
// phase, and hold the clients as long as the spec says.
func standalone(ctx context.Context, d *client.Dialer, spec protocol.GeneratorSpec, recs []result.ClientRecord, conns []*client.Conn, in io.Reader, out io.Writer) error {
	printCounts(out, recs, len(conns))
	if spec.HoldStdin && len(conns) < len(recs) {
		// Held only when every client connected: a client command
		// that failed must say so by its exit, now.
		client.CloseAll(conns)
		return fmt.Errorf("%d of %d clients did not connect", len(recs)-len(conns), len(recs))
	}
	if spec.Traffic.Duration > 0 && len(conns) > 0 {
		tr := d.Traffic(ctx, conns, spec.Traffic)
		printTraffic(out, tr)
	}
	holdStandalone(ctx, in, spec)
	return nil
}

// holdStandalone holds a generator run by hand, without a runner: until
// its stdin closes (--hold-stdin), for --hold, or not at all.
func holdStandalone(ctx context.Context, in io.Reader, spec protocol.GeneratorSpec) {
	if spec.HoldStdin {
		io.Copy(io.Discard, in)
	} else if spec.Hold > 0 {
		t := time.NewTimer(spec.Hold)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// runClients runs the load and, with events, reports progress every
// 250 ms while it changes.
func runClients(ctx context.Context, d *client.Dialer, spec protocol.GeneratorSpec, emit *protocol.Emitter, events bool) ([]result.ClientRecord, []*client.Conn, int) {
	var done, ok atomic.Int64
	failed := &tally{}
	stopProgress := reportProgress(emit, events, &done, &ok, failed)
	recs, conns, unlaunched := client.Run(ctx, d, client.Load{N: spec.N, IDBase: spec.IDBase,
		Proc: spec.Proc, Rate: spec.Rate, InFlight: spec.InFlight, Lead: spec.TLSResume, Ended: failed.add,
		WallStop: spec.WallStop, FailAllowance: spec.FailAllowance}, func(n, k int) {
		done.Store(int64(n))
		ok.Store(int64(k))
	})
	stopProgress()
	return recs, conns, unlaunched
}

// reportProgress emits a "progress" event (with events) every 250 ms
// while done changes, until the returned stop is called.
func reportProgress(emit *protocol.Emitter, events bool, done, ok *atomic.Int64, failed *tally) (stop func()) {
	tick := time.NewTicker(250 * time.Millisecond)
	stopTick := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		last := int64(-1)
		for {
			select {
			case <-tick.C:
				if n := done.Load(); events && n != last {
					last = n
					emit.Emit(protocol.Event{Event: "progress", Done: int(n), OK: int(ok.Load()), Failed: failed.counts(), Phases: failed.phaseCounts()})
				}
			case <-stopTick:
				return
			}
		}
	}()
	return func() {
		tick.Stop()
		close(stopTick)
		<-ticked
	}
}

// printCounts is the line a generator run by hand prints: "5/5 clients
// connected", with the failures by class.
func printCounts(out io.Writer, recs []result.ClientRecord, connected int) {
	counts := map[string]int{}
	for _, r := range recs {
		counts[r.Outcome]++
	}
	fmt.Fprintf(out, "%d/%d clients connected", connected, len(recs))
	for _, o := range result.Outcomes {
		if o != result.OutcomeOK && counts[o] > 0 {
			fmt.Fprintf(out, ", %s %d", o, counts[o])
		}
	}
	fmt.Fprintln(out)
}

// watchRelease returns when in ends (the release) or stays silent for
// lost; every line read meanwhile (heartbeats are empty) goes to onLine.
func watchRelease(in *bufio.Reader, lost time.Duration, onLine func(string)) {
	lines := make(chan struct{})
	go func() {
		// Left blocked if the silence ends the wait: the process exits.
		for {
			line, err := in.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			onLine(line)
			lines <- struct{}{}
		}
	}()
	t := time.NewTimer(lost)
	defer t.Stop()
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return
			}
			t.Reset(lost)
		case <-t.C:
			return
		}
	}
}

// selfUsage is the generator's reading of itself for its "done" event:
// on another host nothing else samples it. On a kernel device it also
// counts the device's resources, every process of the host together.
func selfUsage(proc int, device, backend string) result.GeneratorUsage {
	u := result.GeneratorUsage{Generator: proc, PID: os.Getpid()}
	if ps, err := collectors.Process(os.Getpid()); err == nil {
		u.RSS, u.CPUSec, u.Threads, u.FDs, u.Maps = ps.RSS, ps.CPUSec, ps.Threads, ps.FDs, ps.Maps
	}
	if backend == "verbs" {
		if m, err := collectors.DeviceResources(device); err == nil {
			u.RDMA = m
		}
	}
	u.Limits = map[string]string{}
	for _, k := range []string{"net/ipv4/ip_local_port_range", "vm/max_map_count"} {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			u.Limits[strings.ReplaceAll(k, "/", ".")] = strings.Join(strings.Fields(string(b)), " ")
		}
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		u.Limits["RLIMIT_NOFILE"] = strconv.FormatUint(rl.Cur, 10)
	}
	return u
}

// printTraffic is the line a generator run by hand prints after its
// traffic phase.
func printTraffic(out io.Writer, t result.Traffic) {
	fmt.Fprintf(out, "traffic: %s of %d bytes, depth %d, %d clients: %d messages in %.1f s, %.0f msg/s, %.2f MB/s, latency p50 %.0f us p99 %.0f us",
		t.Op, t.MsgBytes, t.Depth, t.Clients, t.Messages, t.DurationSec, t.MsgRate, t.MBps, t.Latency.P50, t.Latency.P99)
	for _, k := range t.ErrorClasses() {
		fmt.Fprintf(out, ", %s %d", k, t.Errors[k])
	}
	if t.Error != "" {
		fmt.Fprintf(out, " (%s)", t.Error)
	}
	fmt.Fprintln(out)
}
