package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// trafficGrace is how long the runner waits for the generators'
// reports beyond the phase and its message timeout (their drain, the
// read-back of WRITEs, the report's encoding) before calling them hung.
const trafficGrace = 30 * time.Second

// trafficPhase runs the point's traffic phase once every generator is
// done connecting: the generators with connected clients are told to
// start together, and their reports merged. samplesAt is the clock of
// the collectors' samples (Sample.T counts from it), so the phase's
// window can be found among them. Interrupted (ctx), the generators are
// released and what they report is kept, with the phase's Error set.
func (l *Local) trafficPhase(ctx context.Context, c *collection, srv Server, samplesAt time.Time) *result.Traffic {
	cfg := l.spec.traffic()
	var gens []*process
	var index []int // of each in c.gens
	for i, g := range c.gens {
		if c.st[i].done && (c.st[i].progress.OK > 0 || i < len(c.held) && c.held[i] > 0) {
			gens = append(gens, g)
			index = append(index, i)
		}
	}
	if len(gens) == 0 || ctx.Err() != nil {
		return nil
	}
	tr := &result.Traffic{Op: cfg.Op, MsgBytes: l.spec.MsgSize, Depth: cfg.Depth, RatePerClient: cfg.Rate}
	cpu := startServerCPU(srv)
	host := hostCPU{}
	if l.opts.ServerHost == nil {
		host = startHostCPU() // the server runs here
	}
	start := time.Now()
	if !samplesAt.IsZero() {
		tr.SampleT = start.Sub(samplesAt).Seconds()
	}
	for _, g := range gens {
		// A generator that died meanwhile shows as closed events.
		g.send(protocol.StartTraffic)
	}
	quit := make(chan struct{})
	defer close(quit)
	reports := fanIn(gens, quit,
		func(ev protocol.Event) bool {
			return ev.Event == "traffic" || ev.Event == "measured" || ev.Event == "error" || ev.Event == "traffic-progress" ||
				ev.Event == "dropped"
		},
		func(ev protocol.Event) bool { return ev.Event == "traffic" })
	// The window ends for all once every generator's clients are
	// measured (or its phase over): one that reported or died holds
	// no one's window open.
	settled := make([]bool, len(gens))
	sofar := make([]int64, len(gens)) // each generator's last traffic-progress
	// The phase has begun: a view shows it before the first count.
	c.trafficProgress(sofar, l.spec.MsgSize, 0)
	unsettled := len(gens)
	settle := func(i int) {
		if settled[i] {
			return
		}
		settled[i] = true
		if unsettled--; unsettled == 0 {
			for _, g := range gens {
				g.send(protocol.EndTrafficWindow)
			}
		}
	}
	deadline := time.NewTimer(max(cfg.Duration, cfg.MaxDuration) + cfg.Timeout + trafficGrace)
	defer deadline.Stop()
	setErr := func(why string) {
		if tr.Error == "" {
			tr.Error = why
		}
	}
	done := ctx.Done()
	for remaining := len(gens); remaining > 0; {
		select {
		case t := <-reports:
			g := gens[t.i]
			switch {
			case t.closed:
				<-g.exited
				setErr(g.exitText() + " during the traffic phase")
				remaining--
				settle(t.i)
			case t.ev.Event == "measured":
				settle(t.i)
			case t.ev.Event == "dropped":
				c.dropped(index[t.i], t.ev.Records)
			case t.ev.Event == "traffic-progress":
				sofar[t.i] = t.ev.Messages
				c.trafficProgress(sofar, l.spec.MsgSize, time.Since(start))
			case t.ev.Event == "error":
				setErr(g.name + ": " + t.ev.Error)
			case t.ev.Traffic != nil:
				tr.Merge(*t.ev.Traffic)
				remaining--
				settle(t.i)
			default:
				setErr(g.name + " sent an empty traffic report")
				remaining--
				settle(t.i)
			}
		case <-done:
			done = nil
			setErr("interrupted")
			for _, g := range gens {
				// Released: its phase ends at once and reports what it
				// measured, on any launcher.
				g.closeStdin()
			}
			deadline.Reset(interruptGrace)
		case <-deadline.C:
			setErr(fmt.Sprintf("%d load generators sent no traffic report within %v of the phase's end", remaining, cfg.Timeout+trafficGrace))
			remaining = 0
		}
	}
	cpu.end(tr, time.Since(start))
	host.end(tr)
	tr.Summarize()
	return tr
}

// hostCPU is the machine's CPU times at the start of a phase; ok is
// false when they could not be read.
type hostCPU struct {
	at collectors.CPUShare
	ok bool
}

func startHostCPU() hostCPU {
	at, err := collectors.CPUTimes()
	return hostCPU{at: at, ok: err == nil}
}

// end sets tr's host CPU and softirq over the phase, in cores.
func (h hostCPU) end(tr *result.Traffic) {
	if !h.ok {
		return
	}
	if now, err := collectors.CPUTimes(); err == nil {
		if busy, soft, ok := now.Since(h.at); ok {
			tr.HostCPU, tr.HostSoftirq = busy, soft
		}
	}
}

// usageTimeout bounds the wait for a server's answer to a usage request:
// it answers at once unless its process gets no CPU for that long. A
// variable for tests.
var usageTimeout = 10 * time.Second

// serverCPU is the server's CPU reading at the start of a phase: its own
// (Server.Usage: the built-in one, on any host), else its process's here
// (a command's server on this machine), else none (one on another host).
type serverCPU struct {
	us    Server // the server that said its usage, else nil
	usage result.ServerUsage
	pid   int // else the process read, else 0
	proc  time.Duration
}

func startServerCPU(srv Server) serverCPU {
	if u, err := srv.Usage(usageTimeout); err == nil {
		return serverCPU{us: srv, usage: u}
	}
	if pid := srv.PID(); pid > 0 {
		if t, err := collectors.ProcessCPU(pid); err == nil {
			return serverCPU{pid: pid, proc: t}
		}
	}
	return serverCPU{}
}

// end sets tr's server CPU over the phase's wall time, in cores, and
// the part spent busy-polling in vain, where the server says.
func (c serverCPU) end(tr *result.Traffic, wall time.Duration) {
	if wall <= 0 {
		return
	}
	switch {
	case c.us != nil:
		if u, err := c.us.Usage(usageTimeout); err == nil {
			tr.ServerCPU = (u.CPUSec - c.usage.CPUSec) / wall.Seconds()
			tr.ServerSys = (u.SysSec - c.usage.SysSec) / wall.Seconds()
			tr.ServerSpin = (u.SpinSec - c.usage.SpinSec) / wall.Seconds()
		}
	case c.pid > 0:
		if t, err := collectors.ProcessCPU(c.pid); err == nil {
			tr.ServerCPU = (t - c.proc).Seconds() / wall.Seconds()
		}
	}
}
