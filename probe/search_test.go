package probe

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// fake is a deterministic Measure: n clients attempted, round(rate*n)
// connected.
type fake struct {
	rate  func(n, trial int) float64
	calls []int
	// hook runs before each call with its 1-based index; a non-nil error is
	// returned from Measure.
	hook func(call int) error
}

func (f *fake) measure(ctx context.Context, n, trial int) (result.Point, error) {
	f.calls = append(f.calls, n)
	if f.hook != nil {
		if err := f.hook(len(f.calls)); err != nil {
			return result.Point{}, err
		}
	}
	return result.Point{Attempted: n, Connected: int(math.Round(f.rate(n, trial) * float64(n)))}, nil
}

// capAt models a server that refuses every client beyond c.
func capAt(c int) func(n, _ int) float64 {
	return func(n, _ int) float64 { return math.Min(1, float64(c)/float64(n)) }
}

// published interpolates a published Soft-RoCE table linearly:
// 100→100%, 200→100%, 300→100%, 400→92%, 450→85%, 475→94%, 500→98%.
func published(n, _ int) float64 {
	knots := [][2]float64{{100, 1}, {200, 1}, {300, 1}, {400, .92}, {450, .85}, {475, .94}, {500, .98}}
	x := float64(n)
	if x <= knots[0][0] {
		return knots[0][1]
	}
	for i := 1; i < len(knots); i++ {
		if x <= knots[i][0] {
			a, b := knots[i-1], knots[i]
			return a[1] + (x-a[0])/(b[0]-a[0])*(b[1]-a[1])
		}
	}
	return knots[len(knots)-1][1]
}

// flakyAt fails (90%) the first trial at n and connects everyone otherwise.
func flakyAt(bad int) func(n, trial int) float64 {
	return func(n, trial int) float64 {
		if n == bad && trial == 1 {
			return 0.9
		}
		return 1
	}
}

type recorder struct {
	points, steps int
	notes         []string
}

func (r *recorder) observe(e Event) {
	switch e.Kind {
	case EventPoint:
		r.points++
	case EventStep:
		r.steps++
	case EventNote:
		r.notes = append(r.notes, e.Note)
	}
}

func TestSearch(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		rate      func(n, trial int) float64
		capacity  int
		firstFail int
		aboveHi   bool
		nonMono   []int
		maxCalls  int
	}{
		{
			name: "capacity exactly 450 in [300, 600]", cfg: Config{Lo: 300, Hi: 600}, rate: capAt(450),
			capacity: 450, firstFail: 451,
			maxCalls: 2 + 9, // lo, hi, ceil(log2(300)) bisections
		},
		{
			name: "capacity above hi", cfg: Config{Lo: 300, Hi: 600}, rate: capAt(1000),
			capacity: 600, aboveHi: true, maxCalls: 3, // lo, hi, midpoint check
		},
		{
			name: "capacity below lo", cfg: Config{Lo: 300, Hi: 600}, rate: capAt(200),
			capacity: 0, firstFail: 300, maxCalls: 1,
		},
		{
			name: "lo equals hi and passes", cfg: Config{Lo: 50, Hi: 50}, rate: capAt(450),
			capacity: 50, aboveHi: true, maxCalls: 1,
		},
		{
			name: "unbounded: doubling from 10 then bisect", cfg: Config{Lo: 10}, rate: capAt(450),
			capacity: 450, firstFail: 451,
			maxCalls: 7 + 8, // 10..640 doubling, then ceil(log2(640-320)) bisections
		},
		{
			name: "unbounded reaches MaxN", cfg: Config{Lo: 1, MaxN: 100}, rate: capAt(1000),
			capacity: 100, aboveHi: true, maxCalls: 8, // 1,2,4,...,64,100
		},
		{
			name: "threshold 0.95", cfg: Config{Lo: 300, Hi: 600, Threshold: 0.95},
			// 400 connect at most: 400/421 = 95.01%, 400/422 = 94.79%.
			rate:     capAt(400),
			capacity: 421, firstFail: 422, maxCalls: 2 + 9,
		},
		{
			name: "same outcome at threshold 1.0", cfg: Config{Lo: 300, Hi: 600}, rate: capAt(400),
			capacity: 400, firstFail: 401, maxCalls: 2 + 9,
		},
		{
			name: "published table, 100% threshold: monotonic pass/fail, rate dip named",
			cfg:  Config{Lo: 100, Hi: 500}, rate: published,
			// Rounding keeps 301 and 302 at 100%; 303 is 99.7%.
			capacity: 302, firstFail: 303, maxCalls: 2 + 9,
		},
		{
			name: "published table, 95% threshold: dip found by the check, re-tested",
			cfg:  Config{Lo: 300, Hi: 500, Threshold: 0.95}, rate: published,
			capacity: 363, firstFail: 364, nonMono: []int{364, 365, 368, 375, 400},
			// Every failing count is re-tested, as is the witness 500.
			maxCalls: (1 + 2) * (3 + 8),
		},
		{
			name: "flaky point recovers on re-test (95%)", cfg: Config{Lo: 300, Hi: 600, Threshold: 0.95}, rate: flakyAt(450),
			capacity: 600, aboveHi: true, maxCalls: 3 + 4,
		},
		{
			name: "flaky point stays failed when pooled at 100%", cfg: Config{Lo: 300, Hi: 600}, rate: flakyAt(450),
			capacity: 449, firstFail: 450, nonMono: []int{450}, maxCalls: 3 + 4 + 8,
		},
		{
			name: "three trials per point", cfg: Config{Lo: 300, Hi: 600, Trials: 3}, rate: capAt(450),
			capacity: 450, firstFail: 451, maxCalls: 3 * (2 + 9),
		},
		{
			name: "re-tests disabled", cfg: Config{Lo: 300, Hi: 600, Retests: -1}, rate: flakyAt(450),
			capacity: 449, firstFail: 450, nonMono: []int{450}, maxCalls: 3 + 8,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{rate: tt.rate}
			rec := &recorder{}
			s, points, err := Search(context.Background(), tt.cfg, f.measure, rec.observe)
			if err != nil {
				t.Fatal(err)
			}
			if s.Capacity != tt.capacity || s.FirstFail != tt.firstFail || s.AboveHi != tt.aboveHi {
				t.Errorf("capacity %d, first fail %d, above hi %v; want %d, %d, %v",
					s.Capacity, s.FirstFail, s.AboveHi, tt.capacity, tt.firstFail, tt.aboveHi)
			}
			if !reflect.DeepEqual(s.NonMonotonic, tt.nonMono) {
				t.Errorf("non-monotonic %v, want %v", s.NonMonotonic, tt.nonMono)
			}
			if len(f.calls) > tt.maxCalls {
				t.Errorf("%d Measure calls %v, want at most %d", len(f.calls), f.calls, tt.maxCalls)
			}
			if len(points) != len(f.calls) || rec.points != len(points) || rec.steps != len(s.Steps) {
				t.Errorf("%d calls, %d points, %d point events, %d steps, %d step events",
					len(f.calls), len(points), rec.points, len(s.Steps), rec.steps)
			}
			noSentence(t, s)
			checkSteps(t, s, points, tt.cfg)
			if len(tt.nonMono) > 0 && tt.cfg.Retests >= 0 && !hasNote(rec.notes, "Not monotonic") {
				t.Errorf("no non-monotonic note in %q", rec.notes)
			}
		})
	}
}

// checkSteps verifies the bookkeeping every search and ramp must keep: steps
// pool every trial so far at their N, trials are numbered 1.. per N, and
// every point is summarised with the probe's threshold.
func checkSteps(t *testing.T, s result.Search, points []result.Point, cfg Config) {
	t.Helper()
	thr := cfg.Threshold
	if thr == 0 {
		thr = 1
	}
	trials := map[int]int{}
	att, con := map[int]int{}, map[int]int{}
	for _, p := range points {
		trials[p.Clients]++
		if p.Trial != trials[p.Clients] {
			t.Errorf("point at %d numbered trial %d, want %d", p.Clients, p.Trial, trials[p.Clients])
		}
		q := p
		analysis.Judge(&q, thr)
		if !reflect.DeepEqual(q, p) {
			t.Errorf("point at %d not summarised: %+v", p.Clients, p)
		}
		att[p.Clients] += p.Attempted
		con[p.Clients] += p.Connected
	}
	last := map[int]result.Step{}
	for _, st := range s.Steps {
		last[st.Clients] = st
	}
	for n, st := range last {
		if st.Trials != trials[n] || st.Passed != analysis.Passes(con[n], att[n], thr) {
			t.Errorf("last step at %d: %+v; want %d trials pooled, passed %v", n, st, trials[n], analysis.Passes(con[n], att[n], thr))
		}
	}
}

func hasNote(notes []string, sub string) bool {
	for _, n := range notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

func TestSearchSteps(t *testing.T) {
	f := &fake{rate: published}
	s, _, err := Search(context.Background(), Config{Lo: 300, Hi: 500, Threshold: 0.95}, f.measure, nil)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		n      int
		passed bool
		note   string
	}
	var got []step
	for _, st := range s.Steps[:9] {
		got = append(got, step{st.Clients, st.Passed, st.Note})
	}
	want := []step{
		{300, true, NoteLower},
		{500, true, NoteUpper},
		{400, false, NoteCheck},
		{400, false, NoteRetest},
		{400, false, NoteRetest},
		{500, true, NoteRetest},
		{500, true, NoteRetest},
		{350, true, NoteBisect},
		{375, false, NoteBisect},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("first steps\n got %v\nwant %v", got, want)
	}
}

func TestSearchExponentialSteps(t *testing.T) {
	f := &fake{rate: capAt(450)}
	s, _, err := Search(context.Background(), Config{Lo: 10}, f.measure, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{10, 20, 40, 80, 160, 320, 640, 480, 400, 440, 460, 450, 455, 452, 451}
	if !reflect.DeepEqual(f.calls, want) {
		t.Errorf("measured %v, want %v", f.calls, want)
	}
	for i, st := range s.Steps {
		wantNote := NoteBisect
		switch {
		case i == 0:
			wantNote = NoteLower
		case i < 7:
			wantNote = NoteExponential
		}
		if st.Note != wantNote {
			t.Errorf("step %d at %d: note %q, want %q", i, st.Clients, st.Note, wantNote)
		}
	}
}

func TestRamp(t *testing.T) {
	list := []int{100, 200, 300, 400, 450, 475, 500}
	tests := []struct {
		name      string
		cfg       Config
		rate      func(n, trial int) float64
		capacity  int
		firstFail int
		aboveHi   bool
		nonMono   []int
		calls     int
	}{
		{
			name: "published table at 95%: dip flagged and re-tested", cfg: Config{Threshold: 0.95}, rate: published,
			capacity: 300, firstFail: 400, nonMono: []int{400, 450, 475},
			calls: 7 + 4*2, // 400, 450, 475 and the witness 500, twice each
		},
		{
			name: "published table at 100%: rate dip named", cfg: Config{}, rate: published,
			capacity: 300, firstFail: 400, calls: 7,
		},
		{
			name: "all pass", cfg: Config{}, rate: capAt(1000),
			capacity: 500, aboveHi: true, calls: 7,
		},
		{
			name: "none pass", cfg: Config{}, rate: capAt(50),
			capacity: 0, firstFail: 100, calls: 7,
		},
		{
			name: "smallest count fails, a larger one passes", cfg: Config{}, rate: func(n, _ int) float64 {
				if n == 100 {
					return 0.5
				}
				return 1
			},
			capacity: 0, firstFail: 100, nonMono: []int{100}, calls: 7 + 2*2,
		},
		{
			name: "flaky recovers at 95%", cfg: Config{Threshold: 0.95}, rate: flakyAt(450),
			capacity: 500, aboveHi: true, calls: 7 + 2*2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{rate: tt.rate}
			rec := &recorder{}
			s, points, err := Ramp(context.Background(), list, tt.cfg, f.measure, rec.observe)
			if err != nil {
				t.Fatal(err)
			}
			if s.Capacity != tt.capacity || s.FirstFail != tt.firstFail || s.AboveHi != tt.aboveHi {
				t.Errorf("capacity %d, first fail %d, above hi %v; want %d, %d, %v",
					s.Capacity, s.FirstFail, s.AboveHi, tt.capacity, tt.firstFail, tt.aboveHi)
			}
			if !reflect.DeepEqual(s.NonMonotonic, tt.nonMono) {
				t.Errorf("non-monotonic %v, want %v", s.NonMonotonic, tt.nonMono)
			}
			if len(f.calls) != tt.calls {
				t.Errorf("%d Measure calls %v, want %d", len(f.calls), f.calls, tt.calls)
			}
			// Re-tests may interleave, but each listed count is first
			// measured in list order.
			var order []int
			seen := map[int]bool{}
			for _, n := range f.calls {
				if !seen[n] {
					seen[n] = true
					order = append(order, n)
				}
			}
			if !reflect.DeepEqual(order, list) {
				t.Errorf("first measured in order %v, want %v", order, list)
			}
			noSentence(t, s)
			checkSteps(t, s, points, tt.cfg)
		})
	}
}

func TestRampNotes(t *testing.T) {
	f := &fake{rate: published}
	rec := &recorder{}
	if _, _, err := Ramp(context.Background(), []int{100, 200, 300, 400, 450, 475, 500}, Config{Threshold: 0.95}, f.measure, rec.observe); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Not monotonic: 400 failed (92%) while 500 passed (98%); 450 failed (85.1%) while 500 passed (98%); " +
			"475 failed (94.1%) while 500 passed (98%); re-testing 400, 450, 475 and 500 twice more each, pooling the trials.",
		"After re-tests: 400 fails (92% over 3 trials); 450 fails (85.1% over 3 trials); 475 fails (94.1% over 3 trials); 500 passes (98% over 3 trials).",
	}
	if !reflect.DeepEqual(rec.notes, want) {
		t.Errorf("notes\n got %q\nwant %q", rec.notes, want)
	}
}

func TestCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fake{rate: capAt(450), hook: func(call int) error {
		if call == 3 {
			// The runner notices cancellation after finishing this point.
			cancel()
		}
		return nil
	}}
	s, points, err := Search(ctx, Config{Lo: 300, Hi: 600}, f.measure, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(points) != 3 || len(f.calls) != 3 {
		t.Fatalf("%d points from %d calls, want the 3 measured", len(points), len(f.calls))
	}
	if s.AboveHi || len(s.Steps) != 3 || s.Capacity != 450 || s.FirstFail != 600 {
		t.Errorf("partial search %+v", s)
	}
	noSentence(t, s)
}

// noSentence holds the search to figures: since run.json version 12 the
// run's answer is its verdict (analysis.Conclude) alone, and a search
// writes no sentence of its own that could tell a second story.
func noSentence(t *testing.T, s result.Search) {
	t.Helper()
	if s.Verdict != "" {
		t.Errorf("search wrote a sentence of its own: %q", s.Verdict)
	}
}

func TestCancelledInsideMeasure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fake{rate: capAt(450), hook: func(call int) error {
		if call == 2 {
			cancel()
			return errors.New("load generator: signal: killed")
		}
		return nil
	}}
	_, points, err := Ramp(ctx, []int{100, 200, 300}, Config{}, f.measure, nil)
	if err != context.Canceled || len(points) != 1 {
		t.Errorf("err %v with %d points, want context.Canceled with 1", err, len(points))
	}
}

func TestMeasureError(t *testing.T) {
	boom := errors.New("server binary not found")
	f := &fake{rate: capAt(450), hook: func(call int) error {
		if call == 2 {
			return boom
		}
		return nil
	}}
	s, points, err := Search(context.Background(), Config{Lo: 300, Hi: 600}, f.measure, nil)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "measure 600 clients (trial 1)") {
		t.Errorf("err = %v", err)
	}
	if len(points) != 1 || points[0].Clients != 300 {
		t.Errorf("points %+v, want only the 300 point", points)
	}
	noSentence(t, s)
}

func TestPointErrorFails(t *testing.T) {
	m := func(ctx context.Context, n, trial int) (result.Point, error) {
		p := result.Point{Attempted: n, Connected: n}
		if n > 400 {
			p.Error = "server exited: signal: killed"
		}
		return p, nil
	}
	s, _, err := Search(context.Background(), Config{Lo: 300, Hi: 600}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Capacity != 400 || s.FirstFail != 401 {
		t.Errorf("capacity %d first fail %d, want 400 and 401", s.Capacity, s.FirstFail)
	}
}

func TestConfigErrors(t *testing.T) {
	m := (&fake{rate: capAt(1)}).measure
	for _, cfg := range []Config{
		{Lo: 0, Hi: 10},
		{Lo: 10, Hi: 5},
		{Lo: 10, Threshold: 1.5},
		{Lo: 10, Threshold: -0.1},
		{Lo: 200, MaxN: 100},
	} {
		if _, _, err := Search(context.Background(), cfg, m, nil); err == nil {
			t.Errorf("Search(%+v) accepted", cfg)
		}
	}
	if _, _, err := Ramp(context.Background(), nil, Config{}, m, nil); err == nil {
		t.Error("Ramp with no counts accepted")
	}
	if _, _, err := Ramp(context.Background(), []int{10, 0}, Config{}, m, nil); err == nil {
		t.Error("Ramp with a zero count accepted")
	}
}
