package probe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// DesignMeasure runs one trial with n clients against the server in
// design (a resource mode), as Measure does for a probe of one.
type DesignMeasure func(ctx context.Context, design string, n, trial int) (result.Point, error)

// RampDesigns measures each client count of clients for every design in
// turns (every design at the first count, then every design at the
// next), so that a host whose speed drifts through the run touches every
// design alike. Each design keeps its own tallies, re-tests and verdict,
// as Ramp; the searches are returned in designs' order and the points in
// the order they were measured, each with its Design set.
func RampDesigns(ctx context.Context, designs []string, clients []int, cfg Config, m DesignMeasure, observe func(Event)) ([]result.Search, []result.Point, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if err := checkDesigns(designs); err != nil {
		return nil, nil, err
	}
	if len(clients) == 0 {
		return nil, nil, errors.New("ramp: no client counts given")
	}
	for _, n := range clients {
		if n < 1 {
			return nil, nil, fmt.Errorf("ramp: client count %d: need at least 1", n)
		}
	}
	var all []result.Point
	ps := make([]*prober, len(designs))
	for i, d := range designs {
		ps[i] = designProber(ctx, cfg, d, len(designs) > 1, m, observe, &all)
	}
	for _, n := range clients {
		for _, p := range ps {
			if err = p.step(n, NoteRamp, "listed"); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	for _, p := range ps {
		if err == nil {
			_, err = p.confirmBend()
		}
	}
	out := make([]result.Search, len(ps))
	for i, p := range ps {
		out[i] = p.finish(0, 0, err)
	}
	return out, all, err
}

// SearchDesigns runs one search (Search) per design in the same run,
// since each design stops at its own wall. The searches take turns, one
// count's trials each, for as long as more than one goes on, so that
// host drift touches every design alike; a search that is done drops
// out of the rotation. The first error (a Measure error, ctx ending)
// stops every search at its next count. It returns the searches in
// designs' order and the points in the order they were measured.
func SearchDesigns(ctx context.Context, designs []string, cfg Config, m DesignMeasure, observe func(Event)) ([]result.Search, []result.Point, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if err := checkDesigns(designs); err != nil {
		return nil, nil, err
	}
	if cfg.Lo < 1 {
		return nil, nil, fmt.Errorf("lo %d: need at least 1 client", cfg.Lo)
	}
	if cfg.Hi != 0 && cfg.Hi < cfg.Lo {
		return nil, nil, fmt.Errorf("hi %d is below lo %d", cfg.Hi, cfg.Lo)
	}
	if cfg.Hi == 0 && cfg.MaxN < cfg.Lo {
		return nil, nil, fmt.Errorf("lo %d is above the search limit %d", cfg.Lo, cfg.MaxN)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var all []result.Point
	tr := newTurns(len(designs))
	out := make([]result.Search, len(designs))
	errs := make([]error, len(designs))
	var wg sync.WaitGroup
	for i, d := range designs {
		p := designProber(ctx, cfg, d, len(designs) > 1, m, observe, &all)
		p.turns, p.id = tr, i
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Everything a search does, its notes included, happens while
			// it holds the turn: one design at a time, in a fixed order.
			tr.wait(i)
			defer tr.leave(i)
			errs[i] = p.search()
			if errs[i] != nil {
				cancel()
			}
			out[i] = p.finish(cfg.Lo, cfg.Hi, errs[i])
		}()
	}
	wg.Wait()
	return out, all, firstError(errs)
}

// firstError is the error that stopped the searches: one that is not
// only the others being stopped for it.
func firstError(errs []error) error {
	var first error
	for _, e := range errs {
		if e == nil {
			continue
		}
		if !errors.Is(e, context.Canceled) {
			return e
		}
		if first == nil {
			first = e
		}
	}
	return first
}

func checkDesigns(designs []string) error {
	if len(designs) == 0 {
		return errors.New("no server design given")
	}
	for i, d := range designs {
		if slices.Contains(designs[:i], d) {
			return fmt.Errorf("server design %q is named twice", d)
		}
	}
	return nil
}

// designProber is the prober of one design: its points carry the
// design and are also appended to all, and its events name it when
// several designs are probed (named).
func designProber(ctx context.Context, cfg Config, design string, named bool, m DesignMeasure, observe func(Event), all *[]result.Point) *prober {
	if observe == nil {
		observe = func(Event) {}
	}
	obs := func(ev Event) {
		if named {
			ev.Design = design
		}
		if ev.Point != nil {
			*all = append(*all, *ev.Point)
		}
		observe(ev)
	}
	measure := func(ctx context.Context, n, trial int) (result.Point, error) {
		pt, err := m(ctx, design, n, trial)
		pt.Design = design
		return pt, err
	}
	return newProber(ctx, cfg, measure, obs)
}

// turns lets one design's probe run at a time, in a fixed rotation among
// those still going.
type turns struct {
	mu     sync.Mutex
	cond   *sync.Cond
	active []int // ids still probing, in turn order
	cur    int   // index in active of the one whose turn it is
}

func newTurns(n int) *turns {
	t := &turns{}
	t.cond = sync.NewCond(&t.mu)
	for i := range n {
		t.active = append(t.active, i)
	}
	return t
}

// wait blocks until it is id's turn.
func (t *turns) wait(id int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.active[t.cur] != id {
		t.cond.Wait()
	}
}

// pass hands the turn to the next probe still going.
func (t *turns) pass() {
	t.mu.Lock()
	t.cur = (t.cur + 1) % len(t.active)
	t.cond.Broadcast()
	t.mu.Unlock()
}

// leave takes id, whose turn it is, out of the rotation; the next one
// goes on.
func (t *turns) leave(id int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.Index(t.active, id)
	t.active = slices.Delete(t.active, i, i+1)
	if i < t.cur {
		t.cur--
	}
	if len(t.active) > 0 {
		t.cur %= len(t.active)
	}
	t.cond.Broadcast()
}
