// Package progress is what an operator watches while a probe runs: on a
// terminal a bar per phase of the point in progress (and per generator
// host), drawn by mpb, with every other line of the run written above
// the bars through the same writer so that neither tears the other; off
// a terminal the same figures as a plain line every few seconds; with
// Quiet nothing at all.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/runner"
)

// DefaultEvery is how often a plain line says where a phase is, off a
// terminal.
const DefaultEvery = 10 * time.Second

// refreshEvery is how often the bars are drawn again.
const refreshEvery = 150 * time.Millisecond

// Options set a Screen up.
type Options struct {
	// Quiet shows nothing: the caller prints the verdict at the end.
	Quiet bool
	// Every is how often a plain line is written off a terminal
	// (default DefaultEvery).
	Every time.Duration
	// Traffic is the traffic phase's window, the length of its bar
	// (0: the bar shows no fill).
	Traffic time.Duration
}

// Screen is the one writer of a run's human-readable output. Lines
// written to it go above the bars on a terminal, as they are elsewhere.
type Screen struct {
	out    io.Writer
	quiet  bool
	every  time.Duration
	window time.Duration
	now    func() time.Time

	bars    *mpb.Progress // nil off a terminal and once closed
	refresh chan any
	ended   chan any // closed once mpb has stopped (a terminal it could not draw on)
	stop    chan struct{}
	wg      sync.WaitGroup
	closed  bool

	mu      sync.Mutex
	partial []byte   // a line written in pieces, held until its end
	label   string   // the point in progress ("400 clients"), "" between points
	header  *mpb.Bar // the point's label row
	phases  []*phase // the point's (or the boot's) phases so far
	hosts   map[string]*phase
	hostSeq []*phase  // the hosts in the order they came
	next    time.Time // when the next plain line is due
}

// New returns the Screen writing to w: bars if w is a terminal.
func New(w io.Writer, o Options) *Screen {
	s := &Screen{out: w, quiet: o.Quiet, every: o.Every, window: o.Traffic, now: time.Now, stop: make(chan struct{})}
	if s.every <= 0 {
		s.every = DefaultEvery
	}
	if s.quiet {
		return s
	}
	if screen.Width(w) > 0 { // a terminal
		s.refresh, s.ended = make(chan any), make(chan any)
		s.bars = mpb.New(mpb.WithOutput(w), mpb.WithManualRefresh(s.refresh), mpb.WithShutdownNotifier(s.ended))
	}
	s.wg.Add(1)
	go s.loop()
	return s
}

// loop draws the bars again every refreshEvery on a terminal, and
// elsewhere writes the plain line when it is due.
func (s *Screen) loop() {
	defer s.wg.Done()
	tick := refreshEvery
	if s.bars == nil {
		tick = s.every / 10
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.bars != nil {
				s.fillTraffic()
				s.draw()
				continue
			}
			s.mu.Lock()
			if now := s.now(); len(s.phases) > 0 && !now.Before(s.next) {
				s.next = now.Add(s.every)
				s.plain()
			}
			s.mu.Unlock()
		}
	}
}

// fillTraffic fills the traffic phase's bar to the time it has run,
// between the counts that come once a second.
func (s *Screen) fillTraffic() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ph := s.current(); ph != nil && ph.kind == traffic && ph.bar != nil && s.window > 0 {
		ph.bar.SetCurrent(min(s.now().Sub(ph.started), s.window).Milliseconds())
	}
}

// draw has the bars drawn now, unless mpb has stopped.
func (s *Screen) draw() {
	select {
	case s.refresh <- nil:
	case <-s.ended:
	}
}

// plain writes where the current phase is as plain lines.
func (s *Screen) plain() {
	ph := s.phases[len(s.phases)-1]
	prefix := ""
	if s.label != "" {
		prefix = s.label + ": "
	}
	lines := []string{prefix + ph.name + " " + strings.Join(ph.figures(s.now()), ", ")}
	if ph.name == runner.PhaseConnect {
		for _, h := range s.hostSeq {
			lines = append(lines, prefix+"host "+h.name+" "+strings.Join(h.figures(s.now()), ", "))
		}
	}
	for _, l := range lines {
		fmt.Fprintln(s.out, l)
	}
}

// Write writes whole lines: above the bars on a terminal.
func (s *Screen) Write(b []byte) (int, error) {
	if s.quiet {
		return len(b), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, b...)
	i := strings.LastIndexByte(string(s.partial), '\n')
	if i < 0 {
		return len(b), nil
	}
	lines := s.partial[:i+1]
	s.partial = append([]byte(nil), s.partial[i+1:]...)
	var err error
	if s.bars != nil {
		_, err = s.bars.Write(lines)
	} else {
		_, err = s.out.Write(lines)
	}
	return len(b), err
}

// Boot shows the guest's boot until the returned func is called.
func (s *Screen) Boot() (end func()) {
	if s.quiet {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begin("guest boot", 0)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.clear()
	}
}

// PointStarts shows a point, label ("400 clients"), from its start.
func (s *Screen) PointStarts(label string) {
	if s.quiet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	s.label = label
	if s.bars != nil {
		s.header = s.bars.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Name(label)))
	}
}

// Update shows the point's progress: its phase, counts and traffic.
func (s *Screen) Update(p runner.Progress) {
	if s.quiet || p.Sample != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := p.Phase
	if name == "" {
		name = runner.PhaseConnect
	}
	ph := s.current()
	if ph == nil || ph.name != name {
		ph = s.begin(name, p.Clients)
	}
	ph.mu.Lock()
	ph.total, ph.done, ph.ok = p.Clients, p.Done, p.OK
	if t := p.Traffic; t != nil {
		ph.msgs, ph.sec = t.Messages, t.Sec
	}
	ph.mu.Unlock()
	switch {
	case ph.bar == nil:
	case name == runner.PhaseConnect:
		ph.bar.SetTotal(int64(p.Clients), false)
		ph.bar.SetCurrent(int64(p.Done))
	}
	if name != runner.PhaseConnect {
		return
	}
	for _, hp := range p.Hosts {
		h := s.hosts[hp.Host]
		if h == nil {
			h = s.newPhase(hp.Host, "  host "+hp.Host, hp.Clients, counted)
			if s.hosts == nil {
				s.hosts = map[string]*phase{}
			}
			s.hosts[hp.Host] = h
			s.hostSeq = append(s.hostSeq, h)
		}
		h.mu.Lock()
		h.total, h.done, h.ok = hp.Clients, hp.Done, hp.OK
		h.mu.Unlock()
		if h.bar != nil {
			h.bar.SetCurrent(int64(hp.Done))
		}
	}
}

// PointEnds takes the point's bars away; the caller then writes its
// outcome.
func (s *Screen) PointEnds() {
	if s.quiet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
}

// Close takes every bar away, writes what is left to write and leaves
// the terminal to plain writes.
func (s *Screen) Close() {
	if s.quiet || s.closed {
		return
	}
	s.closed = true
	close(s.stop)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	if len(s.partial) > 0 {
		s.partial = append(s.partial, '\n')
		if s.bars != nil {
			s.bars.Write(s.partial)
		} else {
			s.out.Write(s.partial)
		}
		s.partial = nil
	}
	if s.bars != nil {
		// The first render writes the lines and the dropped bars' last
		// frame, the second clears the bars.
		s.draw()
		s.draw()
		s.bars.Shutdown()
		s.bars = nil
	}
}

// current is the phase in progress, nil between points.
func (s *Screen) current() *phase {
	if len(s.phases) == 0 {
		return nil
	}
	return s.phases[len(s.phases)-1]
}

// begin ends the current phase and starts the one named, of n clients.
func (s *Screen) begin(name string, n int) *phase {
	now := s.now()
	if ph := s.current(); ph != nil {
		ph.mu.Lock()
		ph.ended = now
		ph.mu.Unlock()
		if ph.bar != nil && ph.kind == spinner {
			ph.bar.Abort(true) // gone: a counted phase's bar stays to the point's end
		}
	}
	ph := s.newPhase(name, "  "+name, n, kindOf(name))
	s.phases = append(s.phases, ph)
	s.next = now.Add(s.every)
	return ph
}

// newPhase starts a phase's figures and, on a terminal, its bar.
func (s *Screen) newPhase(name, title string, n int, k kind) *phase {
	ph := &phase{name: name, kind: k, started: s.now(), total: n, window: s.window}
	if s.bars == nil {
		return ph
	}
	figures := decor.Any(func(decor.Statistics) string { return strings.Join(ph.figures(s.now()), "  ") })
	opts := []mpb.BarOption{mpb.PrependDecorators(decor.Name(title, decor.WC{W: 14, C: decor.DindentRight})),
		mpb.AppendDecorators(figures)}
	switch ph.kind {
	case spinner:
		// One column, in ASCII, which every terminal draws.
		ph.bar = s.bars.New(0, mpb.SpinnerStyle("-", "\\", "|", "/"), append(opts, mpb.BarWidth(1))...)
	default:
		// Made with no total, a bar never completes on its own, so that
		// it stays (frozen) until the point ends and is then taken away
		// (a completed bar cannot be); SetTotal only draws the length.
		ph.bar = s.bars.New(0, mpb.BarStyle(), opts...)
		if ph.kind == traffic {
			ph.bar.SetTotal(s.window.Milliseconds(), false)
		} else {
			ph.bar.SetTotal(int64(n), false)
		}
	}
	return ph
}

// clear takes the point's (or boot's) bars away.
func (s *Screen) clear() {
	now := s.now()
	for _, ph := range append(s.phases, s.hostSeq...) {
		ph.mu.Lock()
		if ph.ended.IsZero() {
			ph.ended = now
		}
		ph.mu.Unlock()
		if ph.bar != nil {
			ph.bar.Abort(true)
		}
	}
	if s.header != nil {
		s.header.Abort(true)
	}
	s.phases, s.hosts, s.hostSeq, s.header, s.label = nil, nil, nil, nil, ""
}
