// Package probe decides which client counts to measure: ramp lists and a
// bisection for the breaking point. What a measurement means (a point's
// and a count's pass, the intervals, the one-sentence verdict) is package
// analysis's, so the search decides by the rule the report shows. It does
// no I/O; the runner supplies a Measure function and progress flows out
// through an observer callback.
//
// Real servers are not monotonic: the C server of linjiw/rdma-multi-client
// connected 100, 100, 100, 92, 85, 94 and 98% at 100..500 clients. A plain bisection would silently trust
// whichever side of such a dip it happened to sample, so every measurement
// is checked against all earlier ones, inconsistent points are re-tested
// with their trials pooled, and the stated capacity is the conservative one:
// the largest N that passed together with every tested N below it.
package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Defaults applied by Search and Ramp to zero Config fields.
const (
	DefaultThreshold = analysis.DefaultThreshold
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
	NoteRetest      = analysis.NoteRetest
	NoteRamp        = "ramp"
	// NoteWall tests the most clients the failing count's wall let
	// connect at once; NoteWallAbove tests just above the capacity when
	// that count already passed.
	NoteWall      = "wall"
	NoteWallAbove = "wall: just above"
	// NoteBend re-tests either side of a first failure its traffic
	// phase alone decided (confirmBend).
	NoteBend = "re-test: bend"
)

// Event kinds passed to the observer.
const (
	EventPoint = "point"
	EventStep  = "step"
	EventNote  = "note"
	// EventDecision says, before a count is measured, why it was chosen
	// (Note holds the reason, Step.Clients the count).
	EventDecision = "decision"
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
	// Epsilon, when set, has the probe re-test a bend in the traffic
	// phase's message rate (analysis.Bend with this ε) decided by fewer
	// than MinBendTrials trials (confirmBend).
	Epsilon float64
	// Resolution stops a search once the bracket between the capacity
	// and the first failure is that narrow; zero means adjacent counts.
	Resolution Resolution
}

// Resolution is a bracket width: Clients, or Percent of the capacity
// found. The zero value is one client (an exact answer).
type Resolution struct {
	Clients int
	Percent float64
}

// ParseResolution reads "50" (clients) or "2%" (of the capacity).
func ParseResolution(s string) (Resolution, error) {
	s = strings.TrimSpace(strings.ReplaceAll(s, "_", ""))
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(f > 0 && f < 100) {
			return Resolution{}, fmt.Errorf("%q: want a percentage in (0, 100), like 2%%", s)
		}
		return Resolution{Percent: f}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return Resolution{}, fmt.Errorf("%q: want a client count of at least 1, or a percentage like 2%%", s)
	}
	return Resolution{Clients: n}, nil
}

func (r Resolution) String() string { return analysis.DescribeResolution(r.Clients, r.Percent) }

// width is the bracket width, in clients, that is narrow enough at
// capacity: never below 1 (adjacent counts).
func (r Resolution) width(capacity int) int {
	if r.Percent > 0 {
		return max(1, int(math.Floor(r.Percent/100*float64(capacity))))
	}
	return max(1, r.Clients)
}

// ErrPointFailed is returned (wrapped) when StopOnPointError stops a probe.
var ErrPointFailed = errors.New("point failed")

// Event reports progress. Point and Step point to copies.
type Event struct {
	Kind  string
	Point *result.Point
	Step  *result.Step
	Note  string
	// Design is the server design the event is of, in a probe of
	// several (RampDesigns, SearchDesigns); empty otherwise.
	Design string
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
	if c.Resolution.Clients < 0 || c.Resolution.Percent < 0 || c.Resolution.Percent >= 100 {
		return c, fmt.Errorf("resolution %+v: want clients >= 1 or a percentage in (0, 100)", c.Resolution)
	}
	return c, nil
}

// Search finds the largest client count that reaches cfg.Threshold. It tests
// Lo, then Hi (or doubles from Lo when Hi is 0). When Hi passes it also
// tests the midpoint of [Lo, Hi] before claiming that all of the range
// passes, because one dip inside the range is exactly what a
// non-monotonic server produces. Then it narrows the bracket between the
// capacity and the first failure until the two are adjacent, or as
// narrow as cfg.Resolution:
//
//   - when the first failure was a wall (every failed client refused by a
//     resource: refused-at-capacity, or ENOMEM, EAGAIN, EMFILE, ENFILE,
//     ENOSPC creating its resources) with k clients connected at once, it
//     tests the largest count k can pass (k at a 100% threshold), then
//     just above the capacity, in steps that double while they pass;
//   - otherwise (timeouts, mixed failures, a point error, a search that
//     was not monotonic, or a wall that moved twice) it bisects, because
//     such failures say only that N was too many, not how many fit.
//
// Every step records why it was chosen. It returns every point measured,
// also when it stops early on ctx cancellation (error ctx.Err()) or a
// Measure error.
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
		if err = p.step(n, NoteRamp, "listed"); err != nil {
			break
		}
	}
	if err == nil {
		_, err = p.confirmBend()
	}
	return p.finish(0, 0, err), p.points, err
}

// tally pools the trials at one client count.
type tally struct {
	trials, attempted, connected int
	errored                      bool
	sloMissed                    int // trials whose traffic phase decided against them
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
	if pt.Traffic.Failed() {
		t.sloMissed++
	}
}

func (t *tally) rate() float64 {
	if t.attempted == 0 {
		return 0
	}
	return float64(t.connected) / float64(t.attempted)
}

func (t *tally) passed(threshold float64) bool {
	return !t.errored && !analysis.MissesSLOs(t.sloMissed, t.trials) && analysis.Passes(t.connected, t.attempted, threshold)
}

type prober struct {
	ctx     context.Context
	cfg     Config
	measure Measure
	observe func(Event)
	// turns, when set, is shared with the probes of the other designs
	// measured in the same run: each count's trials wait for this
	// design's turn (id), and the next count hands it on.
	turns   *turns
	id      int
	ran     bool
	tallies map[int]*tally
	points  []result.Point
	steps   []result.Step
	// above is how many steps just above the capacity passed in a row;
	// the next one goes 2^above above it.
	above int
	// bendChecked are the counts past a bend confirmBend re-tested.
	bendChecked map[int]bool
	// misses counts wall-guided counts that failed anyway; distrust,
	// once set, says why a wall's evidence is no longer followed.
	misses   int
	distrust string
}

func newProber(ctx context.Context, cfg Config, m Measure, observe func(Event)) *prober {
	if observe == nil {
		observe = func(Event) {}
	}
	return &prober{ctx: ctx, cfg: cfg, measure: m, observe: observe, tallies: map[int]*tally{}, bendChecked: map[int]bool{}}
}

func (p *prober) search() error {
	c := p.cfg
	if err := p.step(c.Lo, NoteLower, "--lo"); err != nil {
		return err
	}
	if !p.passed(c.Lo) {
		hint := "try a lower --lo"
		if ev := readEvidence(p.pointsAt(c.Lo)); ev.wall && ev.held > 0 {
			hint = fmt.Sprintf("it held %s at once (%s): try --lo %d", analysis.Thousands(ev.held), ev.cause, ev.held)
		}
		p.notef("%d clients failed (%s): the capacity is below the lower bound; %s.", c.Lo, pct(p.tallies[c.Lo].rate()), hint)
		return nil
	}
	if c.Hi > 0 {
		if c.Hi > c.Lo {
			if err := p.step(c.Hi, NoteUpper, "--hi"); err != nil {
				return err
			}
		}
		if _, first := p.bracket(); first == 0 && c.Hi-c.Lo >= 2 {
			mid := c.Lo + (c.Hi-c.Lo)/2
			if err := p.step(mid, NoteCheck, fmt.Sprintf("%s passed: test the midpoint %s before claiming every count in [%s, %s] does",
				analysis.Thousands(c.Hi), analysis.Thousands(mid), analysis.Thousands(c.Lo), analysis.Thousands(c.Hi))); err != nil {
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
			n, why := 2*top, fmt.Sprintf("%s passed: double it", analysis.Thousands(top))
			if n > c.MaxN {
				n, why = c.MaxN, fmt.Sprintf("%s passed: test the search limit %s", analysis.Thousands(top), analysis.Thousands(c.MaxN))
			}
			if err := p.step(n, NoteExponential, why); err != nil {
				return err
			}
		}
		if _, first := p.bracket(); first == 0 {
			p.notef("Every count up to the search limit %d passed; raise the limit to look further.", c.MaxN)
		}
	}
	for {
		n, note, why := p.next()
		if n == 0 {
			again, err := p.confirmBend()
			if err != nil || !again {
				return err
			}
			continue
		}
		if err := p.step(n, note, why); err != nil {
			return err
		}
		p.follow(n, note)
	}
}

// next chooses the count that narrows the bracket [capacity, first
// failure] most surely, with the reason; 0 when the search is done (see
// Search for the rules).
func (p *prober) next() (n int, note, why string) {
	capacity, first := p.bracket()
	// With no passing count below the first failure there is nothing
	// to narrow: the search never goes below Lo.
	if capacity == 0 || first == 0 || first-capacity <= 1 {
		return 0, "", ""
	}
	if w := p.cfg.Resolution.width(capacity); first-capacity <= w {
		p.notef("Stopped at the resolution %s: %s passed and %s failed, %s apart.",
			p.cfg.Resolution, analysis.Thousands(capacity), analysis.Thousands(first), analysis.Thousands(first-capacity))
		return 0, "", ""
	}
	ev := readEvidence(p.pointsAt(first))
	distrust := ev.why
	if ev.wall && p.distrust != "" {
		distrust = p.distrust
	}
	if ev.wall && p.distrust == "" {
		// The most clients that pass while only ev.held can be held:
		// ev.held itself at a 100% threshold.
		fit := int(math.Floor(float64(ev.held)/p.cfg.Threshold + 1e-9))
		held := fmt.Sprintf("held %s at once at %s (%s)", analysis.Thousands(ev.held), analysis.Thousands(first), ev.cause)
		if fit > capacity && fit < first {
			return fit, NoteWall, fmt.Sprintf("%s: test %s", held, analysis.Thousands(fit))
		}
		n := min(capacity+1<<p.above, first-1)
		return n, NoteWallAbove, fmt.Sprintf("%s, and %s passed: test %s, just above it", held, analysis.Thousands(capacity), analysis.Thousands(n))
	}
	n = capacity + (first-capacity)/2
	return n, NoteBisect, fmt.Sprintf("%s failed, but %s: bisect [%s, %s] at %s", analysis.Thousands(first), distrust, analysis.Thousands(capacity), analysis.Thousands(first), analysis.Thousands(n))
}

// follow keeps the account of wall-guided steps: steps just above the
// capacity grow while they pass, and a wall that let fewer clients in at
// the count it pointed to has moved; after two such misses the search
// stops following walls and bisects.
func (p *prober) follow(n int, note string) {
	if p.passed(n) {
		if note == NoteWallAbove {
			p.above++
		}
		return
	}
	p.above = 0
	if note != NoteWall {
		return
	}
	p.misses++
	if p.misses >= 2 && p.distrust == "" {
		ev := readEvidence(p.pointsAt(n))
		p.distrust = fmt.Sprintf("the wall moved: %s clients, where an earlier wall pointed, failed again with %s held", analysis.Thousands(n), analysis.Thousands(ev.held))
		p.notef("Not following the wall any more: %s.", p.distrust)
	}
}

// step measures n and then settles any inconsistency the new result causes.
func (p *prober) step(n int, note, why string) error {
	if err := p.run(n, note, why); err != nil {
		return err
	}
	return p.reconcile()
}

// run measures cfg.Trials trials at n and records one Step for them. The
// Step carries the pooled state of n after it (Trials counts every trial so
// far at n, Rate and Passed are pooled), so the last Step at an N is the
// decision the search acted on.
func (p *prober) run(n int, note, why string) error {
	if p.turns != nil {
		if p.ran {
			p.turns.pass()
			p.turns.wait(p.id)
		}
		// Another design's search may have ended the run meanwhile.
		if err := p.ctx.Err(); err != nil {
			return err
		}
	}
	p.ran = true
	t := p.tallies[n]
	if t == nil {
		t = &tally{}
		p.tallies[n] = t
	}
	p.observe(Event{Kind: EventDecision, Step: &result.Step{Clients: n, Note: note, Reason: why}, Note: why})
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
		analysis.Judge(&pt, p.cfg.Threshold)
		p.points = append(p.points, pt)
		t.add(pt)
		p.observe(Event{Kind: EventPoint, Point: &pt})
		if pt.Error != "" && p.cfg.StopOnPointError {
			return fmt.Errorf("%w at %d clients (trial %d): %s", ErrPointFailed, n, trial, pt.Error)
		}
	}
	s := result.Step{Clients: n, Trials: t.trials, Passed: t.passed(p.cfg.Threshold), Rate: t.rate(), Note: note, Reason: why}
	p.steps = append(p.steps, s)
	p.observe(Event{Kind: EventStep, Step: &s})
	return nil
}

// MinBendTrials is how many trials a count either side of a bend needs
// before the bend stands: their median decides it. One trial of the sim
// on a loaded host fell to a third of the peak with no bend behind it,
// its medians of three to 65% (results/README.md, "The bend").
const MinBendTrials = 3

// maxBendChecks bounds the bends re-tested in one probe: a re-test that
// moves the bend may show the next one.
const maxBendChecks = 2

// confirmBend re-tests either side of a bend, cfg.Retests more rounds
// each, so that the median of at least MinBendTrials trials decides both
// counts: a bend in the message rate is noisier than a refusal. A bend
// is the first failure when only its traffic phase failed it (its
// clients connected at the threshold; the SLOs missed, as
// rate>=0.9*peak does past a bend), or, with cfg.Epsilon, the first
// count whose median rate fell below (1−ε) of the peak (analysis.Bend).
// again says it re-tested, so a search narrows the bracket the re-tests
// left.
func (p *prober) confirmBend() (again bool, err error) {
	if p.cfg.Retests == 0 || len(p.bendChecked) >= maxBendChecks {
		return false, nil
	}
	var ns []int
	why := ""
	capacity, first := p.bracket()
	if t := p.tallies[first]; first != 0 && !t.errored && !t.reconciled && !p.bendChecked[first] &&
		analysis.MissesSLOs(t.sloMissed, t.trials) && analysis.Passes(t.connected, t.attempted, p.cfg.Threshold) {
		ns, why = []int{capacity, first}, fmt.Sprintf("%s failed by its traffic phase alone", analysis.Thousands(first))
	} else if b, ok := analysis.Bend(p.points, p.cfg.Epsilon); p.cfg.Epsilon > 0 && ok && b.BendAt != 0 && !p.bendChecked[b.BendAt] &&
		min(p.tallies[b.Performant].trials, p.tallies[b.BendAt].trials) < MinBendTrials {
		ns, why = []int{b.Performant, b.BendAt}, fmt.Sprintf("the message rate fell from %.0f at %s to %.0f at %s, below %s of the peak",
			b.Rate, analysis.Thousands(b.Performant), b.BendRate, analysis.Thousands(b.BendAt), pct(1-b.Epsilon))
	}
	if why == "" {
		return false, nil
	}
	if ns[0] == 0 {
		ns = ns[1:]
	}
	p.bendChecked[ns[len(ns)-1]] = true
	why += ": re-test either side of the bend, each count decided by its median trial"
	p.notef("%s; re-testing %s %s.", why, joinInts(ns), times(p.cfg.Retests, len(ns)))
	for _, n := range ns {
		for range p.cfg.Retests {
			if err := p.run(n, NoteBend, why); err != nil {
				return false, err
			}
		}
	}
	after := p.afterRetests(ns, false)
	if b, ok := analysis.Bend(p.points, p.cfg.Epsilon); p.cfg.Epsilon > 0 && ok {
		at := "no count falls below it"
		if b.BendAt != 0 {
			at = fmt.Sprintf("%s falls to %.0f msg/s", analysis.Thousands(b.BendAt), b.BendRate)
		}
		after = append(after, fmt.Sprintf("by the median rates %s is performant (peak %.0f msg/s) and %s", analysis.Thousands(b.Performant), b.Peak, at))
	}
	p.notef("After re-tests: %s.", joinClauses(after))
	return true, p.reconcile()
}

// afterRetests says of each count in ns whether it passes over all its
// trials, with its pooled connect rate when withRate is set.
func (p *prober) afterRetests(ns []int, withRate bool) []string {
	after := make([]string, len(ns))
	for i, n := range ns {
		t := p.tallies[n]
		verb := "fails"
		if t.passed(p.cfg.Threshold) {
			verb = "passes"
		}
		if withRate {
			after[i] = fmt.Sprintf("%d %s (%s over %d trials)", n, verb, pct(t.rate()), t.trials)
		} else {
			after[i] = fmt.Sprintf("%d %s over %d trials", n, verb, t.trials)
		}
	}
	return after
}

// pointsAt is the trials measured at n.
func (p *prober) pointsAt(n int) []result.Point {
	var out []result.Point
	for _, pt := range p.points {
		if pt.Clients == n {
			out = append(out, pt)
		}
	}
	return out
}

// reconcile re-tests every count that failed while a larger count passed,
// together with the nearest larger count that passed, once each. Re-tests
// can flip results and expose new pairs, hence the loop; it ends because
// each count is reconciled at most once. A search that was not monotonic
// stops following walls: a count that fails here and passes there says
// that a failure's count of clients held is not a fixed wall.
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
		if p.distrust == "" {
			p.distrust = "the search was not monotonic (" + desc[0] + ")"
		}
		if p.cfg.Retests == 0 {
			p.notef("Not monotonic: %s; re-tests are disabled, so the capacity stated is the conservative one.", joinClauses(desc))
			continue
		}
		p.notef("Not monotonic: %s; re-testing %s %s, pooling the trials.", joinClauses(desc), joinInts(ns), times(p.cfg.Retests, len(ns)))
		for _, n := range ns {
			for range p.cfg.Retests {
				if err := p.run(n, NoteRetest, "not monotonic: "+joinClauses(desc)+": re-test, pooling the trials"); err != nil {
					return err
				}
			}
		}
		after := p.afterRetests(ns, true)
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
	if lo > 0 && (p.cfg.Resolution.Clients > 1 || p.cfg.Resolution.Percent > 0) {
		s.ResolutionClients, s.ResolutionPercent = p.cfg.Resolution.Clients, p.cfg.Resolution.Percent
	}
	if err != nil {
		return s
	}
	s.AboveHi = len(p.points) > 0 && first == 0
	if len(s.NonMonotonic) == 0 {
		if a, b, ok := analysis.RateInversion(analysis.Pool(p.points, p.cfg.Threshold)); ok {
			p.notef("Success rate is not monotonic in N: %d clients reached %s but %d reached %s, and their 95%% intervals do not overlap.",
				a.Clients, pct(a.Rate), b.Clients, pct(b.Rate))
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
