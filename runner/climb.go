package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// Climber is a Runner that climbs a staircase (ramp --staircase): it
// adds clients on top of those it holds instead of starting every point
// afresh, so a climb to N costs N connects.
type Climber interface {
	// Climb adds clients on top of those held since the last Climb
	// until n have been asked for, runs the traffic phase over every
	// client held, and returns the step (result.Point.Cumulative). The
	// first Climb after a Descend starts the server, its cap sized for
	// top clients, and the load generators, which stay for the climb.
	// An error means the climb cannot go on (ctx ended: the step cut
	// short is returned, interrupted); the caller must Descend.
	Climb(ctx context.Context, n, top int) (result.Point, error)
	// Descend releases every client held and stops the server; every
	// process of the climb is reaped.
	Descend() error
}

// liveStats is a Server that tells its own view while it runs
// (rdmaprobe's own).
type liveStats interface {
	Stats(timeout time.Duration) (result.ServerStats, error)
}

// climbState is what a Local holds between the steps of a climb.
type climbState struct {
	srv     Server
	addr    string
	gens    []*process
	dev     *result.DeviceInfo
	restore func() // the server's timer slack
	// asked counts the clients asked for so far (the next ID), held
	// those connected; heldBy is held per generator, outcomes the
	// climb's outcomes so far.
	asked, held int
	heldBy      []int
	outcomes    map[string]int
	// broken says why the climb cannot take another step; serverDied,
	// that the server exited during a step, which that step recorded.
	broken     string
	serverDied bool
	// first and top are the first step's clients and the climb's
	// largest, which name its processes' CPU profiles.
	first, top int
}

// Climb adds clients on top of those held until n (Climber).
func (l *Local) Climb(ctx context.Context, n, top int) (result.Point, error) {
	spec := l.spec
	if spec.Server != nil || spec.Client != nil || spec.CM != nil {
		return result.Point{}, errors.New("a staircase adds clients to the built-in TLS clients and server: not with --server-cmd, --client-cmd or rdma_cm clients")
	}
	cl := l.climb
	if cl != nil && cl.broken != "" {
		return result.Point{}, fmt.Errorf("the climb cannot go on: %s", cl.broken)
	}
	if cl != nil && n <= cl.asked {
		return result.Point{}, fmt.Errorf("a step of %d clients: %d are asked for already", n, cl.asked)
	}
	feed := &progressFeed{out: l.opts.Progress}
	pt := result.Point{Clients: n, Trial: 1, StartedAt: time.Now().UTC(), Cumulative: true}
	max := spec.MaxClientsAt(top)
	feed.phase(PhaseStart, n)
	smp := startSampler(ctx, spec.SampleInterval, l.sampleDevice, feed.sample)
	var c *collection
	first := cl == nil
	if first {
		var err error
		if cl, c, err = l.climbFirst(ctx, n, top, smp, feed); err != nil {
			smp.finish(&pt, max)
			return pt, err
		}
	} else {
		pt.Held = cl.held
		l.sampleProcesses(smp, cl.srv, cl.gens, cl.dev)
		c = l.climbMore(ctx, cl, n, feed)
	}
	if !c.released.IsZero() {
		pt.ConnectSec = time.Since(c.released).Seconds()
	}
	// Only the first step splits the device's objects by process: a
	// later step's dump would read every object of every client held,
	// a cost that grows with each step, to find the first step's
	// objects per client again. Later steps have the device's count of
	// every process's objects, which the samples read.
	smp.loaded(first)
	c.held = cl.heldBy
	if protocol.RunsTraffic(spec.Traffic, spec.Client, spec.CM) && c.pointErr == "" {
		pt.Traffic = l.trafficPhase(ctx, c, cl.srv, smp.started)
	}
	if ls, ok := cl.srv.(liveStats); ok && c.pointErr == "" && ctx.Err() == nil {
		// The server's own view (its resources, refusals, failures),
		// which a point reads as it stops, for the diagnosis.
		if st, err := ls.Stats(usageTimeout); err == nil {
			pt.Server = st
		}
	}
	pt.Error = c.pointErr
	pt.Records = c.records()
	pt.Unlaunched = c.unlaunched()
	analysis.SummarisePoint(&pt, spec.Threshold) // the step's own clients
	cl.asked = n
	cl.held += pt.Connected
	for i := range cl.gens {
		if c.st[i].done {
			cl.heldBy[i] += c.st[i].progress.OK
		}
	}
	for o, k := range pt.Outcomes {
		cl.outcomes[o] += k
	}
	pt.Attempted, pt.Connected, pt.Outcomes = n, cl.held, maps.Clone(cl.outcomes)
	if ctx.Err() != nil {
		pt.Interrupted, pt.Error = true, Interrupted
	}
	analysis.Judge(&pt, spec.Threshold)
	if pt.Error != "" {
		cl.broken = pt.Error
	}
	cl.serverDied = cl.serverDied || c.serverDied
	smp.serverDone()
	smp.finish(&pt, max)
	pt.DurationSec = time.Since(pt.StartedAt).Seconds()
	if ctx.Err() != nil {
		l.Descend()
		return pt, ctx.Err()
	}
	return pt, nil
}

// climbFirst starts the server, sized for top clients, and the load
// generators with the first step's n, as RunPoint does, and connects
// them.
func (l *Local) climbFirst(ctx context.Context, n, top int, smp *sampler, feed *progressFeed) (*climbState, *collection, error) {
	spec := l.spec
	if !l.refTaken {
		l.refTaken = true
		l.dataRef = l.dataPathReference(ctx)
	}
	srv, err := l.target.Start(ctx, top, 1)
	if err != nil {
		return nil, nil, err
	}
	gens, err := l.startGenerators(n, 1, "")
	if err != nil {
		srv.Stop(10 * time.Second)
		return nil, nil, err
	}
	addr, dev, err := srv.Ready(ctx, spec.StartTimeout)
	if err != nil {
		for _, g := range gens {
			g.kill()
		}
		srv.Kill()
		return nil, nil, err
	}
	l.device = dev
	cl := &climbState{srv: srv, addr: addr, gens: gens, dev: dev, heldBy: make([]int, len(gens)),
		outcomes: map[string]int{}, restore: func() {}, first: n, top: top}
	l.climb = cl
	l.sampleProcesses(smp, srv, gens, dev)
	c := newCollection(spec, n, gens, feed.send)
	if srv.SharesSlack() {
		cl.restore = protocol.SlackenThreads(srv.PID(), protocol.ConnectTimerSlack)
	}
	c.run(ctx, srv, addr)
	return cl, c, nil
}

// climbMore has the held generators add the clients from cl.asked up to
// n, split among them as a point's are (share), and collects them.
func (l *Local) climbMore(ctx context.Context, cl *climbState, n int, feed *progressFeed) *collection {
	k := n - cl.asked
	c := newCollection(l.spec, k, cl.gens, feed.send)
	c.idBase = cl.asked
	allowance := 0
	if l.spec.WallStop > 0 {
		failed := cl.asked - cl.held
		allowance = max(0, analysis.FailAllowance(n, l.spec.Threshold)-failed)
	}
	bases := make([]int, len(cl.gens))
	for i := range cl.gens {
		c.st[i].ready = true // since the first step
		if i > 0 {
			bases[i] = bases[i-1] + share(k, len(cl.gens), i-1)
		}
	}
	c.lines = func(i int) string {
		return protocol.Add{N: share(k, len(cl.gens), i), IDBase: cl.asked + bases[i], FailAllowance: allowance}.Line()
	}
	c.run(ctx, cl.srv, cl.addr)
	return c
}

// Descend releases every client of the climb and stops its server
// (Climber); a climb that never started, or has ended, holds nothing.
func (l *Local) Descend() error {
	cl := l.climb
	if cl == nil {
		return nil
	}
	l.climb = nil
	for _, g := range cl.gens {
		g.closeStdin()
	}
	for _, g := range cl.gens {
		g.drain(30 * time.Second)
	}
	_, exitErr := cl.srv.Stop(30 * time.Second)
	cl.restore()
	l.nameClimbProfiles(cl)
	// A server that died during a step (the guest's OOM killer ending
	// it at the memory wall) is that step's recorded failure, the wall
	// the climb found, not a failure to descend: the confirming point
	// still runs.
	if exitErr != "" && !cl.serverDied {
		return fmt.Errorf("server: %s", exitErr)
	}
	return nil
}

// nameClimbProfiles renames the CPU profiles of the climb's processes,
// written as they exit, to climb-server.pprof and climb-clients-I.pprof:
// under the point names they started with (the top's server, the first
// step's generators), the confirming point's would overwrite them.
func (l *Local) nameClimbProfiles(cl *climbState) {
	dir := l.opts.ProfileDir
	if !l.spec.Profile || dir == "" {
		return
	}
	os.Rename(filepath.Join(dir, serverProfile(cl.top, 1)), filepath.Join(dir, "climb-server.pprof"))
	for i := range cl.gens {
		os.Rename(filepath.Join(dir, clientsProfile(cl.first, 1, i)), filepath.Join(dir, fmt.Sprintf("climb-clients-%d.pprof", i)))
	}
}

// serverProfile and clientsProfile name the CPU profiles (--profile) of
// a point's server and of its i-th load generator.
func serverProfile(n, trial int) string { return fmt.Sprintf("%d-%d-server.pprof", n, trial) }

func clientsProfile(n, trial, i int) string {
	return fmt.Sprintf("%d-%d-clients-%d.pprof", n, trial, i)
}
