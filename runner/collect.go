package runner

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// collection gathers one point's outcomes from its load generators: it
// releases them once each has said "ready" (or died), then waits for
// every generator's "done". A generator that exits without it, or does
// not finish before the deadline, has its clients recorded as failed
// with the reason; the first such reason is the point's error.
type collection struct {
	ctx      context.Context // run's
	spec     Spec
	n        int
	gens     []*process
	st       []genState
	progress func(Progress)
	// remote, if set, places the generators on other hosts: it
	// classifies how one ended.
	remote RemoteLauncher

	// launch is how long the --connect-rate schedule takes to launch every
	// client; quiet how long a released generator may stay silent.
	launch, quiet time.Duration
	deadline      *time.Timer
	remaining     int

	// idBase is the first client ID of the collection (a staircase's
	// step: the clients asked for before it), lines what releases
	// generator i when it is not the server's address (a step's
	// protocol.Add), and held the clients each generator holds from
	// earlier steps, who join its traffic phase.
	idBase int
	lines  func(i int) string
	held   []int

	pointErr string
	// serverDied is set when the server exited during the point, which
	// pointErr then says.
	serverDied bool
	released   time.Time // zero until the release
	// interrupted is set when ctx ended the point before every
	// generator was done (Point.Interrupted).
	interrupted bool
}

// serverExited records that the server exited during the point.
func (c *collection) serverExited(srv Server) {
	c.setErr("server died during the point: " + srv.ExitText())
	c.serverDied = true
}

// Interrupted is the Error of a point cut short by its context (Ctrl-C).
const Interrupted = "interrupted"

// interruptGrace is how long a generator asked to stop has to report the
// outcomes its clients had. Stopping cancels the attempts in progress,
// which takes a generator 1-12 s with 256 of them in the TCG guest on
// this loaded 2-core host; past the grace it is killed and its outcomes
// are lost, so the grace is generous (a second Ctrl-C quits at once). A
// variable only so that tests can shorten it.
var interruptGrace = 45 * time.Second

type genState struct {
	ready, done bool
	progress    protocol.Event
	recs        []result.ClientRecord
	unlaunched  int
	// readyEv is the generator's "ready" (its device and host), doneAt
	// when its "done" came, usage what it said of itself then, fault
	// how it failed.
	readyEv *protocol.Event
	doneAt  time.Time
	usage   *result.GeneratorUsage
	fault   *result.HostFault
}

// tagged is one generator's event, or the end of its events.
type tagged struct {
	i      int
	ev     protocol.Event
	closed bool
}

func newCollection(spec Spec, n int, gens []*process, progress func(Progress)) *collection {
	c := &collection{spec: spec, n: n, gens: gens, st: make([]genState, len(gens)),
		progress: progress, remaining: len(gens)}
	if spec.Rate > 0 {
		c.launch = time.Duration(float64(n) / spec.Rate * float64(time.Second))
	}
	// Every client has its own deadline (Timeout from its launch), and a
	// generator reports progress as its clients finish: one silent for
	// longer than a client may take is hung.
	slack := spec.GeneratorSlack
	if slack <= 0 {
		slack = 10 * time.Second
	}
	c.quiet = spec.Timeout + slack + spec.Timeout/4
	return c
}

// run collects until every generator is done, hung, dead or the point
// is interrupted; srv is watched meanwhile, and addr is what the
// generators are released at.
func (c *collection) run(ctx context.Context, srv Server, addr string) {
	c.ctx = ctx
	// Until the release, the deadline is the generators' start-up bound.
	c.deadline = time.NewTimer(c.spec.StartTimeout)
	defer c.deadline.Stop()
	quit := make(chan struct{})
	defer close(quit)
	merged := fanIn(c.gens, quit, nil, func(ev protocol.Event) bool { return ev.Event == "done" })
	srvEvents := srv.Events()
	finished := false // the server ended its work on its own (finisher)
	c.release(addr)   // a staircase's held generators are ready already
	for c.remaining > 0 {
		select {
		case t := <-merged:
			c.onGenerator(t, addr)
		case <-ctx.Done():
			c.interrupt(merged)
			return
		case <-c.deadline.C:
			c.onDeadline(addr)
		case ev, ok := <-srvEvents:
			if !ok {
				srvEvents = nil
				if f, ok := srv.(finisher); ok && f.Finished() && !c.released.IsZero() {
					finished = true // judged by its clients, below
					continue
				}
				c.serverExited(srv)
				if c.released.IsZero() {
					// No server to release the clients at.
					c.failAll("not started: "+c.pointErr, "")
				}
			} else if ev.Event == "error" {
				c.setErr("server: " + ev.Error)
			}
		}
	}
	if finished && !c.interrupted {
		for _, r := range c.records() {
			if r.Outcome != result.OutcomeOK {
				c.serverExited(srv)
				break
			}
		}
	}
}

// finisher is a Server that may end its work on its own: a one-shot
// server command (ibv_rc_pingpong's serves one client and exits 0) under
// launched clients, each of which also does its work and exits. Its
// exit is a death only if a client failed.
type finisher interface {
	// Finished reports whether the server has exited as one that
	// finished does.
	Finished() bool
}

// fanIn merges the events of gens into one channel until quit: of each
// generator, the events keep accepts (nil: all), up to the first that
// last accepts, or the end of its events (closed).
func fanIn(gens []*process, quit <-chan struct{}, keep, last func(protocol.Event) bool) <-chan tagged {
	merged := make(chan tagged)
	for i, g := range gens {
		go func(i int, g *process) {
			for {
				ev, ok := <-g.events
				if ok && keep != nil && !keep(ev) {
					continue
				}
				select {
				case merged <- tagged{i: i, ev: ev, closed: !ok}:
				case <-quit:
					return
				}
				if !ok || last(ev) {
					return
				}
			}
		}(i, g)
	}
	return merged
}

func (c *collection) onGenerator(t tagged, addr string) {
	i, g, ev := t.i, c.gens[t.i], t.ev
	if c.st[i].done {
		return // killed and recorded already
	}
	if t.closed {
		<-g.exited
		if c.ctx.Err() != nil {
			// Ctrl-C reached the generator too: its clients were cut
			// short, not failed.
			c.st[i].done = true
			c.remaining--
			return
		}
		why := g.exitText() + " before reporting"
		class, detail := result.FaultDied, why
		if c.remote != nil {
			class, detail = c.remote.Fault(i, g.ended())
			why = g.name + " " + class + ": " + detail
		}
		c.st[i].fault = &result.HostFault{Generator: i, Class: class, Detail: detail}
		c.setErr(why)
		c.lost(i, why)
		c.release(addr)
		return
	}
	switch ev.Event {
	case "ready":
		c.st[i].ready = true
		c.st[i].readyEv = &ev
		c.release(addr)
	case "progress":
		if ev.Done > c.st[i].progress.Done {
			c.deadline.Reset(c.quiet)
		}
		c.st[i].progress = ev
		c.report()
	case "done":
		c.st[i].recs, c.st[i].unlaunched = ev.Records, ev.Unlaunched
		c.st[i].progress = protocol.Event{Done: len(ev.Records), OK: ev.OK, Failed: failedOf(ev.Records), Phases: phasesOf(ev.Records)}
		c.st[i].done = true
		c.st[i].doneAt = time.Now()
		c.st[i].usage = ev.Usage
		c.remaining--
		c.report()
	case "error":
		c.setErr(g.name + ": " + ev.Error)
	case "dropped":
		c.dropped(i, ev.Records)
	}
}

// dropped marks generator i's clients in recs, connected and then
// dropped by the server while held (an rdma_cm generator's "dropped"
// event, which may come at any time after its "done"), with their new
// outcome: the point did not hold them.
func (c *collection) dropped(i int, recs []result.ClientRecord) {
	for _, d := range recs {
		for j := range c.st[i].recs {
			if r := &c.st[i].recs[j]; r.ID == d.ID && r.Outcome == result.OutcomeOK {
				r.Outcome, r.Error = d.Outcome, d.Error
			}
		}
	}
}

// onDeadline: before the release, start the clients of the generators
// that are ready and give up on the others; after it, every generator
// not done is hung.
func (c *collection) onDeadline(addr string) {
	if c.released.IsZero() {
		for i, g := range c.gens {
			if !c.st[i].ready && !c.st[i].done {
				why := fmt.Sprintf("%s hung: not ready %s after it started", g.name, c.spec.StartTimeout)
				c.setErr(why)
				g.kill()
				c.st[i].fault = &result.HostFault{Generator: i, Class: result.FaultHung, Detail: why}
				c.lost(i, why)
			}
		}
		c.release(addr)
		return
	}
	c.failAll("", " hung: no result before the point's deadline")
}

// interrupt ends a point whose context ended: every generator not done
// has its stdin closed, which a released generator takes as the end of
// its point (it cancels the attempts in progress and reports the
// outcomes its clients had, which the point keeps) and one not released
// yet as the end of it. Stdin reaches a generator on another host
// through its launcher, where a signal would end only the launcher. A
// client cut short has no outcome, and neither have the clients of a
// generator that does not report within interruptGrace: it is killed.
// Nothing here counts as a failure.
func (c *collection) interrupt(merged <-chan tagged) {
	c.interrupted = true
	c.pointErr = Interrupted
	for i, g := range c.gens {
		if !c.st[i].done {
			g.closeStdin()
		}
	}
	grace := time.NewTimer(interruptGrace)
	defer grace.Stop()

	for c.remaining > 0 {
		select {
		case t := <-merged:
			st := &c.st[t.i]
			switch {
			case st.done:
			case t.closed:
				<-c.gens[t.i].exited
				st.done = true
				c.remaining--
			case t.ev.Event == "done":
				st.recs, st.unlaunched, st.done, st.doneAt, st.usage = t.ev.Records, t.ev.Unlaunched, true, time.Now(), t.ev.Usage
				c.remaining--
			}
		case <-grace.C:
			for i, g := range c.gens {
				if !c.st[i].done {
					g.kill()
					c.st[i].done = true
					c.remaining--
				}
			}
		}
	}
}

// failAll kills every generator not done and records its clients as
// lost, with why, or with its name and suffix as the point's error.
func (c *collection) failAll(why, suffix string) {
	for i, g := range c.gens {
		if c.st[i].done {
			continue
		}
		g.kill()
		w := why
		if suffix != "" {
			w = g.name + suffix
			c.setErr(w)
			c.st[i].fault = &result.HostFault{Generator: i, Class: result.FaultHung, Detail: w}
		}
		c.lost(i, w)
	}
}

// release starts the clients once no generator is still starting: it
// writes the server's address to their stdin.
func (c *collection) release(addr string) {
	if !c.released.IsZero() {
		return
	}
	for _, s := range c.st {
		if !s.ready && !s.done {
			return
		}
	}
	c.released = time.Now()
	for i, g := range c.gens {
		if c.st[i].ready && !c.st[i].done {
			line := addr
			if c.lines != nil {
				line = c.lines(i)
			}
			g.send(line)
			g.heartbeat(protocol.HeartbeatEvery)
		}
	}
	c.deadline.Reset(c.launch + c.quiet)
	c.report() // the connect phase starts with the release
}

// lost records generator i's clients as timed out with why, and the
// generator as done.
func (c *collection) lost(i int, why string) {
	base := c.idBase
	for j := 0; j < i; j++ {
		base += share(c.n, len(c.gens), j)
	}
	k := share(c.n, len(c.gens), i)
	for id := base; id < base+k; id++ {
		c.st[i].recs = append(c.st[i].recs, result.ClientRecord{ID: id, Proc: i,
			Outcome: result.OutcomeTimeout, Error: why})
	}
	c.st[i].done = true
	c.remaining--
}

func (c *collection) setErr(why string) {
	if c.pointErr == "" {
		c.pointErr = why
	}
}

func (c *collection) report() {
	if c.progress == nil {
		return
	}
	p := Progress{Phase: PhaseConnect, Clients: c.n, Hosts: c.hostProgress()}
	for _, s := range c.st {
		p.Done += s.progress.Done
		p.OK += s.progress.OK
		for ph, c := range s.progress.Phases {
			if p.Phases == nil {
				p.Phases = map[string][]int{}
			}
			sum := p.Phases[ph]
			if sum == nil {
				sum = make([]int, len(c))
				p.Phases[ph] = sum
			}
			for i := range min(len(c), len(sum)) {
				sum[i] += c[i]
			}
		}
		for class, n := range s.progress.Failed {
			if p.Failed == nil {
				p.Failed = map[string]int{}
			}
			p.Failed[class] += n
		}
	}
	c.progress(p)
}

// records are every generator's records, by client ID.
func (c *collection) records() []result.ClientRecord {
	var out []result.ClientRecord
	for _, s := range c.st {
		out = append(out, s.recs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// unlaunched counts the clients the generators never launched
// (client.Load.WallStop).
func (c *collection) unlaunched() int {
	n := 0
	for _, s := range c.st {
		n += s.unlaunched
	}
	return n
}

// failedOf counts records' failures by outcome class.
func failedOf(recs []result.ClientRecord) map[string]int {
	var m map[string]int
	for _, r := range recs {
		if r.Outcome != result.OutcomeOK {
			if m == nil {
				m = map[string]int{}
			}
			m[r.Outcome]++
		}
	}
	return m
}

// phasesOf counts records' connect phases in result.PhaseBounds'
// buckets, as a generator's progress does.
func phasesOf(recs []result.ClientRecord) map[string][]int {
	var m map[string][]int
	for _, r := range recs {
		for ph, us := range r.PhasesUS {
			if m == nil {
				m = map[string][]int{}
			}
			if m[ph] == nil {
				m[ph] = make([]int, len(result.PhaseBounds)+1)
			}
			m[ph][result.PhaseBucket(us)]++
		}
	}
	return m
}

// progressFeed sends a point's live counts on, and each reading of the
// collectors and the traffic phase's progress with the latest counts
// beside them, so that a consumer of
// Progress sees the processes' CPU and memory and the device's objects
// while the point runs, not only at its end.
type progressFeed struct {
	out  func(Progress)
	mu   sync.Mutex
	last Progress
}

// send passes p on: counts become the last ones; a traffic phase's
// progress goes with them.
func (f *progressFeed) send(p Progress) {
	if f.out == nil {
		return
	}
	f.mu.Lock()
	if tp := p.Traffic; tp != nil {
		p = f.last
		p.Phase, p.Traffic = PhaseTraffic, tp
	} else {
		f.last = p
	}
	f.mu.Unlock()
	f.out(p)
}

// phase says the point of n clients entered phase, with the last counts.
func (f *progressFeed) phase(phase string, n int) {
	if f.out == nil {
		return
	}
	f.mu.Lock()
	f.last.Phase, f.last.Clients = phase, n
	p := f.last
	f.mu.Unlock()
	f.out(p)
}

func (f *progressFeed) sample(s result.Sample) {
	if f.out == nil {
		return
	}
	f.mu.Lock()
	p := f.last
	f.mu.Unlock()
	p.Sample = &s
	f.out(p)
}

// trafficProgress passes the traffic phase so far on to Progress: the
// sum of each generator's last count.
func (c *collection) trafficProgress(sofar []int64, size int, since time.Duration) {
	if c.progress == nil {
		return
	}
	tp := &TrafficProgress{Sec: since.Seconds()}
	for _, n := range sofar {
		tp.Messages += n
	}
	tp.Bytes = tp.Messages * int64(size)
	c.progress(Progress{Traffic: tp})
}
