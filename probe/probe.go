// Package probe decides which client counts to measure and what the
// measurements mean: ramp lists, a bisection for the breaking point, pooled
// trials, Wilson intervals and the one-sentence verdict. It does no I/O; the
// runner supplies a Measure function and progress flows out through an
// observer callback.
//
// Real servers are not monotonic: the predecessor measured 100, 100, 100, 92,
// 85, 94 and 98% at 100..500 clients. A plain bisection would silently trust
// whichever side of such a dip it happened to sample, so every measurement
// is checked against all earlier ones, inconsistent points are re-tested
// with their trials pooled, and the stated capacity is the conservative one:
// the largest N that passed together with every tested N below it.
package probe

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Defaults applied by Search and Ramp to zero Config fields.
const (
	DefaultThreshold = 1.0
	DefaultTrials    = 1
	DefaultRetests   = 2
	DefaultMaxN      = 1_000_000
)

// Step notes, recorded in result.Step.Note in the order decisions were made.
const (
	NoteLower       = "lower bound"
	NoteUpper       = "upper bound"
	NoteCheck       = "check: monotonic"
	NoteExponential = "exponential"
	NoteBisect      = "bisect"
	NoteRetest      = "re-test: non-monotonic"
	NoteRamp        = "ramp"
)

// Event kinds passed to the observer.
const (
	EventPoint = "point"
	EventStep  = "step"
	EventNote  = "note"
)

// Measure runs one trial with n concurrent clients. trial counts from 1 per
// n and keeps counting across re-tests. The probe overwrites Clients and
// Trial with what it asked for and recomputes SuccessRate, CILow, CIHigh and
// Passed from Attempted, Connected and Error with its own threshold, so the
// runner need not know the threshold. A non-nil error stops the probe; a
// failure that belongs to the measurement (server died mid-point) should be
// returned as a point with Error set and a nil error.
type Measure func(ctx context.Context, n, trial int) (result.Point, error)

// Config drives Search and Ramp. Zero fields take the defaults above.
type Config struct {
	// Lo is the first client count tested; it must be at least 1.
	Lo int
	// Hi bounds the search. Zero searches upward from Lo by doubling until a
	// count fails or MaxN is reached.
	Hi int
	// MaxN caps the exponential search (Hi == 0); ignored otherwise.
	MaxN int
	// Threshold is the success rate (0..1] a client count must reach.
	Threshold float64
	// Trials is how many trials are run per tested count; their clients are
	// pooled for the pass decision and the interval.
	Trials int
	// Retests is how many more rounds of Trials an inconsistent count gets.
	// Zero means DefaultRetests; a negative value disables re-tests (the
	// inconsistency is still reported).
	Retests int
	// StopOnPointError ends the probe at the first point that itself
	// failed (server died, load generator crashed or hung), returning
	// ErrPointFailed; by default such a point counts as failed and the
	// probe goes on.
	StopOnPointError bool
}

// ErrPointFailed is returned (wrapped) when StopOnPointError stops a probe.
var ErrPointFailed = errors.New("point failed")

// Event reports progress. Point and Step point to copies.
type Event struct {
	Kind  string
	Point *result.Point
	Step  *result.Step
	Note  string
}

func (c Config) withDefaults() (Config, error) {
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Threshold < 0 || c.Threshold > 1 {
		return c, fmt.Errorf("threshold %g is outside (0, 1]", c.Threshold)
	}
	if c.Trials <= 0 {
		c.Trials = DefaultTrials
	}
	switch {
	case c.Retests == 0:
		c.Retests = DefaultRetests
	case c.Retests < 0:
		c.Retests = 0
	}
	if c.MaxN <= 0 {
		c.MaxN = DefaultMaxN
	}
	return c, nil
}

// Search finds the largest client count that reaches cfg.Threshold. It tests
// Lo, then Hi (or doubles from Lo when Hi is 0), then bisects the first
// bracket between a pass and a fail down to adjacent integers. When Hi
// passes it also tests the midpoint of [Lo, Hi] before claiming that all of
// the range passes, because one dip inside the range is exactly what a
// non-monotonic server produces. It returns every point measured, also when
// it stops early on ctx cancellation (error ctx.Err()) or a Measure error.
func Search(ctx context.Context, cfg Config, m Measure, observe func(Event)) (result.Search, []result.Point, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return result.Search{}, nil, err
	}
	if cfg.Lo < 1 {
		return result.Search{}, nil, fmt.Errorf("lo %d: need at least 1 client", cfg.Lo)
	}
	if cfg.Hi != 0 && cfg.Hi < cfg.Lo {
		return result.Search{}, nil, fmt.Errorf("hi %d is below lo %d", cfg.Hi, cfg.Lo)
	}
	if cfg.Hi == 0 && cfg.MaxN < cfg.Lo {
		return result.Search{}, nil, fmt.Errorf("lo %d is above the search limit %d", cfg.Lo, cfg.MaxN)
	}
	p := newProber(ctx, cfg, m, observe)
	err = p.search()
	return p.finish(cfg.Lo, cfg.Hi, err), p.points, err
}

// Ramp measures each client count in order (cfg.Trials trials each),
// re-testing counts that contradict each other, and states the largest count
// that passed together with every smaller one. Lo, Hi and MaxN are ignored.
func Ramp(ctx context.Context, clients []int, cfg Config, m Measure, observe func(Event)) (result.Search, []result.Point, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return result.Search{}, nil, err
	}
	if len(clients) == 0 {
		return result.Search{}, nil, errors.New("ramp: no client counts given")
	}
	for _, n := range clients {
		if n < 1 {
			return result.Search{}, nil, fmt.Errorf("ramp: client count %d: need at least 1", n)
		}
	}
	p := newProber(ctx, cfg, m, observe)
	for _, n := range clients {
		if err = p.step(n, NoteRamp); err != nil {
			break
		}
	}
	return p.finish(0, 0, err), p.points, err
}

// tally pools the trials at one client count.
type tally struct {
	trials, attempted, connected int
	errored                      bool
	// reconciled is set once the count's re-tests were spent (or skipped),
	// so that each count is re-tested at most once and the probe ends.
	reconciled bool
}

func (t *tally) add(pt result.Point) {
	t.trials++
	t.attempted += pt.Attempted
	t.connected += pt.Connected
	if pt.Error != "" {
		t.errored = true
	}
}

func (t *tally) rate() float64 {
	if t.attempted == 0 {
		return 0
	}
	return float64(t.connected) / float64(t.attempted)
}

func (t *tally) passed(threshold float64) bool {
	return !t.errored && passes(t.connected, t.attempted, threshold)
}

type prober struct {
	ctx     context.Context
	cfg     Config
	measure Measure
	observe func(Event)
	tallies map[int]*tally
	points  []result.Point
	steps   []result.Step
}

func newProber(ctx context.Context, cfg Config, m Measure, observe func(Event)) *prober {
	if observe == nil {
		observe = func(Event) {}
	}
	return &prober{ctx: ctx, cfg: cfg, measure: m, observe: observe, tallies: map[int]*tally{}}
}

func (p *prober) search() error {
	c := p.cfg
	if err := p.step(c.Lo, NoteLower); err != nil {
		return err
	}
	if !p.passed(c.Lo) {
		p.notef("%d clients failed (%s): the capacity is below the lower bound; try a lower --lo.", c.Lo, pct(p.tallies[c.Lo].rate()))
		return nil
	}
	if c.Hi > 0 {
		if c.Hi > c.Lo {
			if err := p.step(c.Hi, NoteUpper); err != nil {
				return err
			}
		}
		if _, first := p.bracket(); first == 0 && c.Hi-c.Lo >= 2 {
			if err := p.step(c.Lo+(c.Hi-c.Lo)/2, NoteCheck); err != nil {
				return err
			}
		}
	} else {
		for {
			_, first := p.bracket()
			top := p.largest()
			if first != 0 || top >= c.MaxN {
				break
			}
			if err := p.step(min(2*top, c.MaxN), NoteExponential); err != nil {
				return err
			}
		}
		if _, first := p.bracket(); first == 0 {
			p.notef("Every count up to the search limit %d passed; raise the limit to look further.", c.MaxN)
		}
	}
	for {
		capacity, first := p.bracket()
		// With no passing count below the first failure there is nothing
		// to bisect: the search never goes below Lo.
		if capacity == 0 || first == 0 || first-capacity <= 1 {
			return nil
		}
		if err := p.step(capacity+(first-capacity)/2, NoteBisect); err != nil {
			return err
		}
	}
}

// step measures n and then settles any inconsistency the new result causes.
func (p *prober) step(n int, note string) error {
	if err := p.run(n, note); err != nil {
		return err
	}
	return p.reconcile()
}

// run measures cfg.Trials trials at n and records one Step for them. The
// Step carries the pooled state of n after it (Trials counts every trial so
// far at n, Rate and Passed are pooled), so the last Step at an N is the
// decision the search acted on.
func (p *prober) run(n int, note string) error {
	t := p.tallies[n]
	if t == nil {
		t = &tally{}
		p.tallies[n] = t
	}
	for range p.cfg.Trials {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		trial := t.trials + 1
		pt, err := p.measure(p.ctx, n, trial)
		if err != nil {
			if ctxErr := p.ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return fmt.Errorf("measure %d clients (trial %d): %w", n, trial, err)
		}
		pt.Clients, pt.Trial = n, trial
		Summarise(&pt, p.cfg.Threshold)
		p.points = append(p.points, pt)
		t.add(pt)
		p.observe(Event{Kind: EventPoint, Point: &pt})
		if pt.Error != "" && p.cfg.StopOnPointError {
			return fmt.Errorf("%w at %d clients (trial %d): %s", ErrPointFailed, n, trial, pt.Error)
		}
	}
	s := result.Step{Clients: n, Trials: t.trials, Passed: t.passed(p.cfg.Threshold), Rate: t.rate(), Note: note}
	p.steps = append(p.steps, s)
	p.observe(Event{Kind: EventStep, Step: &s})
	return nil
}

// reconcile re-tests every count that failed while a larger count passed,
// together with the nearest larger count that passed, once each. Re-tests
// can flip results and expose new pairs, hence the loop; it ends because
// each count is reconciled at most once.
func (p *prober) reconcile() error {
	for {
		var pairs [][2]int
		todo := map[int]bool{}
		for _, pr := range p.inversions() {
			f, w := pr[0], pr[1]
			if p.tallies[f].reconciled && p.tallies[w].reconciled {
				continue
			}
			pairs = append(pairs, pr)
			for _, n := range pr {
				if !p.tallies[n].reconciled {
					todo[n] = true
				}
			}
		}
		if len(todo) == 0 {
			return nil
		}
		ns := sortedKeys(todo)
		for _, n := range ns {
			p.tallies[n].reconciled = true
		}
		desc := make([]string, len(pairs))
		for i, pr := range pairs {
			desc[i] = fmt.Sprintf("%d failed (%s) while %d passed (%s)", pr[0], pct(p.tallies[pr[0]].rate()), pr[1], pct(p.tallies[pr[1]].rate()))
		}
		if p.cfg.Retests == 0 {
			p.notef("Not monotonic: %s; re-tests are disabled, so the capacity stated is the conservative one.", joinClauses(desc))
			continue
		}
		p.notef("Not monotonic: %s; re-testing %s %s, pooling the trials.", joinClauses(desc), joinInts(ns), times(p.cfg.Retests, len(ns)))
		for _, n := range ns {
			for range p.cfg.Retests {
				if err := p.run(n, NoteRetest); err != nil {
					return err
				}
			}
		}
		after := make([]string, len(ns))
		for i, n := range ns {
			t := p.tallies[n]
			verb := "fails"
			if t.passed(p.cfg.Threshold) {
				verb = "passes"
			}
			after[i] = fmt.Sprintf("%d %s (%s over %d trials)", n, verb, pct(t.rate()), t.trials)
		}
		p.notef("After re-tests: %s.", joinClauses(after))
	}
}

// inversions pairs every failing count with the smallest larger count that
// passed.
func (p *prober) inversions() [][2]int {
	ns := p.tested()
	var out [][2]int
	for i, f := range ns {
		if p.passed(f) {
			continue
		}
		for _, w := range ns[i+1:] {
			if p.passed(w) {
				out = append(out, [2]int{f, w})
				break
			}
		}
	}
	return out
}

// bracket returns the conservative capacity (largest tested count that
// passed with every tested count below it, 0 if none) and the smallest
// failing count (0 if none).
func (p *prober) bracket() (capacity, firstFail int) {
	for _, n := range p.tested() {
		if !p.passed(n) {
			return capacity, n
		}
		capacity = n
	}
	return capacity, 0
}

func (p *prober) nonMonotonic() []int {
	var out []int
	for _, pr := range p.inversions() {
		out = append(out, pr[0])
	}
	return out
}

func (p *prober) passed(n int) bool {
	t := p.tallies[n]
	return t != nil && t.passed(p.cfg.Threshold)
}

func (p *prober) tested() []int {
	ns := make([]int, 0, len(p.tallies))
	for n, t := range p.tallies {
		if t.trials > 0 {
			ns = append(ns, n)
		}
	}
	sort.Ints(ns)
	return ns
}

func (p *prober) largest() int {
	ns := p.tested()
	if len(ns) == 0 {
		return 0
	}
	return ns[len(ns)-1]
}

func (p *prober) notef(format string, args ...any) {
	p.observe(Event{Kind: EventNote, Note: fmt.Sprintf(format, args...)})
}

// finish turns the state into a result.Search. lo and hi are 0 for a ramp.
func (p *prober) finish(lo, hi int, err error) result.Search {
	capacity, first := p.bracket()
	s := result.Search{
		Steps:        p.steps,
		Capacity:     capacity,
		FirstFail:    first,
		NonMonotonic: p.nonMonotonic(),
	}
	if s.Steps == nil {
		s.Steps = []result.Step{}
	}
	if err != nil {
		s.Verdict = interrupted(p.points, capacity, first, err)
		return s
	}
	s.AboveHi = len(p.points) > 0 && first == 0
	s.Verdict = Verdict(s, p.points, lo, hi, p.cfg.Threshold)
	if len(s.NonMonotonic) == 0 {
		if a, b, ok := rateInversion(pool(p.points), p.cfg.Threshold); ok {
			p.notef("Success rate is not monotonic in N: %d clients reached %s but %d reached %s, and their 95%% intervals do not overlap.",
				a.n, pct(a.rate()), b.n, pct(b.rate()))
		}
	}
	return s
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}
