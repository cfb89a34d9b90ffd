package probe

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// server is a fake Measure that answers with per-client records, as the
// runner does: held(n, trial) clients connect and the rest fail as
// fail(n, trial, i) says for client i (class and errno).
type server struct {
	held  func(n, trial int) int
	fail  func(n, trial, i int) (class, errno string)
	calls []int
}

func (s *server) measure(_ context.Context, n, trial int) (result.Point, error) {
	s.calls = append(s.calls, n)
	k := min(n, s.held(n, trial))
	pt := result.Point{Attempted: n, Connected: k, Outcomes: map[string]int{result.OutcomeOK: k}}
	pt.Records = make([]result.ClientRecord, n)
	for i := range pt.Records {
		pt.Records[i] = result.ClientRecord{ID: i, Outcome: result.OutcomeOK}
		if i >= k {
			class, errno := s.fail(n, trial, i)
			pt.Records[i] = result.ClientRecord{ID: i, Outcome: class, Errno: errno}
			pt.Outcomes[class]++
		}
	}
	return pt, nil
}

// wall holds at most w clients at once, whatever the load.
func wall(w int) func(n, _ int) int { return func(n, _ int) int { return min(n, w) } }

func enomem(int, int, int) (string, string)   { return result.OutcomeQPCreate, "ENOMEM" }
func timeouts(int, int, int) (string, string) { return result.OutcomeTimeout, "" }

// after is how many points were measured after the first failing one.
func after(s result.Search) int {
	for i, st := range s.Steps {
		if !st.Passed {
			return len(s.Steps) - 1 - i
		}
	}
	return 0
}

func notes(s result.Search) []string {
	var out []string
	for _, st := range s.Steps {
		out = append(out, st.Note)
	}
	return out
}

// The case: the map-count wall at 15,821 clients, searched from
// 1,000 with no upper bound. Doubling fails first at 16,000, which held
// 15,821: the wall is found exactly in two more points instead of the
// eight a bisection of [8,000, 16,000] takes.
func TestSearchFollowsWall(t *testing.T) {
	srv := &server{held: wall(15821), fail: enomem}
	rec := &recorder{}
	var decisions []string
	obs := func(e Event) {
		rec.observe(e)
		if e.Kind == EventDecision {
			decisions = append(decisions, e.Note)
		}
	}
	s, points, err := Search(context.Background(), Config{Lo: 1000}, srv.measure, obs)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1000, 2000, 4000, 8000, 16000, 15821, 15822}
	if !reflect.DeepEqual(srv.calls, want) {
		t.Errorf("measured %v, want %v", srv.calls, want)
	}
	if s.Capacity != 15821 || s.FirstFail != 15822 {
		t.Errorf("capacity %d, first fail %d; want 15821, 15822", s.Capacity, s.FirstFail)
	}
	if n := after(s); n > 3 {
		t.Errorf("%d points after the first failure, want at most 3", n)
	}
	wantReasons := []string{
		"--lo",
		"1,000 passed: double it",
		"2,000 passed: double it",
		"4,000 passed: double it",
		"8,000 passed: double it",
		"held 15,821 at once at 16,000 (179 qp-create ENOMEM): test 15,821",
		"held 15,821 at once at 16,000 (179 qp-create ENOMEM), and 15,821 passed: test 15,822, just above it",
	}
	var reasons []string
	for _, st := range s.Steps {
		reasons = append(reasons, st.Reason)
	}
	if !reflect.DeepEqual(reasons, wantReasons) {
		t.Errorf("reasons\n got %q\nwant %q", reasons, wantReasons)
	}
	if !reflect.DeepEqual(decisions, wantReasons) {
		t.Errorf("decision events %q, want the steps' reasons, before each point", decisions)
	}
	if got := notes(s)[5:]; !reflect.DeepEqual(got, []string{NoteWall, NoteWallAbove}) {
		t.Errorf("notes after the first failure %q", got)
	}
	checkSteps(t, s, points, Config{})
	if s.Capacity != 15821 || s.FirstFail != 15822 {
		t.Errorf("bracket [%d, %d], want [15821, 15822]", s.Capacity, s.FirstFail)
	}
	noSentence(t, s)
}

func TestSearchWallCases(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		srv       *server
		calls     []int // exact when set
		maxAfter  int   // points after the first failure, at most
		capacity  int
		firstFail int
	}{
		{
			name: "bounded: refused at capacity", cfg: Config{Lo: 8000, Hi: 24000},
			srv:   &server{held: wall(15821), fail: func(int, int, int) (string, string) { return result.OutcomeRefused, "" }},
			calls: []int{8000, 24000, 15821, 15822}, capacity: 15821, firstFail: 15822,
		},
		{
			// rxe's answer when its QP pool is full.
			name: "device cap: qp-create EINVAL", cfg: Config{Lo: 100},
			srv:   &server{held: wall(300), fail: func(int, int, int) (string, string) { return result.OutcomeQPCreate, "EINVAL" }},
			calls: []int{100, 200, 400, 300, 301}, capacity: 300, firstFail: 301,
		},
		{
			// 400 held: 421 is the most that passes at 95% (400/421).
			name: "threshold 95%", cfg: Config{Lo: 300, Hi: 600, Threshold: 0.95},
			srv:   &server{held: wall(400), fail: enomem},
			calls: []int{300, 600, 421, 422}, capacity: 421, firstFail: 422,
		},
		{
			// Clients still being set up are reserved against the limit,
			// so a larger burst holds a few fewer: the held count
			// understates the wall and the steps above it double, in
			// fewer points than the 8 of a bisection of [15,817, 16,000].
			name: "held count understates the wall", cfg: Config{Lo: 1000},
			srv: &server{held: func(n, _ int) int {
				const w = 15821
				return min(n, w-min(5, max(0, n-w)/40))
			}, fail: enomem},
			calls:    []int{1000, 2000, 4000, 8000, 16000, 15817, 15818, 15820, 15824, 15821, 15822},
			maxAfter: 6, capacity: 15821, firstFail: 15822,
		},
		{
			// A wall that gives one client less wherever it is asked:
			// after two misses the search bisects.
			name: "the wall moves with the count", cfg: Config{Lo: 100},
			srv: &server{held: func(n, _ int) int {
				if n <= 1000 {
					return n
				}
				return n - 1
			}, fail: enomem},
			calls:    []int{100, 200, 400, 800, 1600, 1599, 1598, 1199, 999, 1099, 1049, 1024, 1011, 1005, 1002, 1000, 1001},
			capacity: 1000, firstFail: 1001,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, points, err := Search(context.Background(), tt.cfg, tt.srv.measure, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s.Capacity != tt.capacity || s.FirstFail != tt.firstFail {
				t.Errorf("capacity %d, first fail %d; want %d, %d", s.Capacity, s.FirstFail, tt.capacity, tt.firstFail)
			}
			if tt.calls != nil && !reflect.DeepEqual(tt.srv.calls, tt.calls) {
				t.Errorf("measured %v, want %v", tt.srv.calls, tt.calls)
			}
			if tt.maxAfter > 0 && after(s) > tt.maxAfter {
				t.Errorf("%d points after the first failure (%v), want at most %d", after(s), tt.srv.calls, tt.maxAfter)
			}
			for i, st := range s.Steps {
				if st.Reason == "" {
					t.Errorf("step %d at %d has no reason", i, st.Clients)
				}
			}
			checkSteps(t, s, points, tt.cfg)
		})
	}
}

// Failures that are not a resource's refusal say only that N was too
// many: the search bisects, and every bisection says why.
func TestSearchDoesNotTrustAmbiguousFailures(t *testing.T) {
	tests := []struct {
		name   string
		fail   func(n, trial, i int) (string, string)
		reason string
		// wallsLater: failures below the first are walls, so the search
		// follows them once the bisection meets one.
		wallsLater bool
	}{
		{"timeouts", timeouts, "its failures (179 timeout) are not a resource's refusal", false},
		{"tls", func(int, int, int) (string, string) { return result.OutcomeTLS, "" }, "are not a resource's refusal", false},
		{"mixed", func(n, _, i int) (string, string) {
			// The first fail (16,000) is mixed: refusals, and a
			// timeout among them.
			if n == 16000 && i == n-1 {
				return result.OutcomeTimeout, ""
			}
			return result.OutcomeQPCreate, "ENOMEM"
		}, "its failures are mixed (178 qp-create ENOMEM, 1 timeout)", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &server{held: wall(15821), fail: tt.fail}
			s, _, err := Search(context.Background(), Config{Lo: 1000}, srv.measure, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s.Capacity != 15821 || s.FirstFail != 15822 {
				t.Errorf("capacity %d, first fail %d", s.Capacity, s.FirstFail)
			}
			first := s.Steps[5]
			if first.Note != NoteBisect || first.Clients != 12000 || !strings.Contains(first.Reason, tt.reason) {
				t.Errorf("step after the first failure: %+v; want a bisection at 12,000 because %q", first, tt.reason)
			}
			if !tt.wallsLater && after(s) < 10 {
				t.Errorf("only %d points after the first failure: the ambiguous failure was followed", after(s))
			}
		})
	}
}

// A point whose failures mix a wall with a timeout is not a wall.
func TestReadEvidenceMixed(t *testing.T) {
	pt := result.Point{Attempted: 4, Connected: 2, Records: []result.ClientRecord{
		{Outcome: result.OutcomeOK}, {Outcome: result.OutcomeOK},
		{Outcome: result.OutcomeQPCreate, Errno: "ENOMEM"}, {Outcome: result.OutcomeTimeout},
	}}
	ev := readEvidence([]result.Point{pt})
	if ev.wall || ev.why != "its failures are mixed (1 qp-create ENOMEM, 1 timeout)" {
		t.Errorf("%+v", ev)
	}
	pt.Records[3] = result.ClientRecord{Outcome: result.OutcomeRefused}
	pt.Diagnosis = &result.Diagnosis{Limit: "vm.max_map_count"}
	ev = readEvidence([]result.Point{pt, {Attempted: 4, Connected: 3, Records: pt.Records[1:]}})
	if !ev.wall || ev.held != 2 || ev.cause != "2 qp-create ENOMEM, 2 refused-at-capacity; vm.max_map_count" {
		t.Errorf("two trials of walls: %+v; want held 2 (the fewer)", ev)
	}
	ev = readEvidence([]result.Point{{Attempted: 4, Connected: 2, Error: "server exited"}})
	if ev.wall || !strings.Contains(ev.why, "server exited") {
		t.Errorf("point error: %+v", ev)
	}
	// Without records only a refusal names its cause.
	ev = readEvidence([]result.Point{{Attempted: 4, Connected: 2, Outcomes: map[string]int{result.OutcomeRefused: 2}}})
	if !ev.wall {
		t.Errorf("refusals without records: %+v", ev)
	}
	ev = readEvidence([]result.Point{{Attempted: 4, Connected: 2, Outcomes: map[string]int{result.OutcomeQPCreate: 2}}})
	if ev.wall {
		t.Errorf("qp-create without an errno counted as a wall: %+v", ev)
	}
}

// A search that was not monotonic no longer follows walls: 550 failed
// with 500 held on its first trial while 1,000 passed, so the bisection
// takes over, although 550's failures were refusals.
func TestSearchNonMonotonicDistrustsWalls(t *testing.T) {
	srv := &server{held: func(n, trial int) int {
		if n == 550 && trial == 1 {
			return 500
		}
		return n
	}, fail: enomem}
	s, _, err := Search(context.Background(), Config{Lo: 100, Hi: 1000}, srv.measure, nil)
	if err != nil {
		t.Fatal(err)
	}
	var nextAfterRetests *result.Step
	for i, st := range s.Steps {
		if st.Note == NoteRetest && i+1 < len(s.Steps) && s.Steps[i+1].Note != NoteRetest {
			nextAfterRetests = &s.Steps[i+1]
		}
	}
	if nextAfterRetests == nil {
		t.Fatalf("no re-tests: %+v", s.Steps)
	}
	if nextAfterRetests.Note != NoteBisect || nextAfterRetests.Clients != 325 || !strings.Contains(nextAfterRetests.Reason, "not monotonic") {
		t.Errorf("after the re-tests: %+v; want a bisection at 325 naming the non-monotonic result", *nextAfterRetests)
	}
	for _, st := range s.Steps {
		if st.Note == NoteWall || st.Note == NoteWallAbove {
			t.Errorf("followed a wall after a non-monotonic result: %+v", st)
		}
	}
}

func TestSearchResolution(t *testing.T) {
	tests := []struct {
		res    Resolution
		maxGap int
		note   string
	}{
		{Resolution{Percent: 2}, 316, "Stopped at the resolution 2%: 15,750 passed and 16,000 failed, 250 apart."},
		{Resolution{Clients: 100}, 100, "Stopped at the resolution 100 clients: 15,812 passed and 15,875 failed, 63 apart."},
	}
	for _, tt := range tests {
		t.Run(tt.res.String(), func(t *testing.T) {
			// Timeouts: bisection, which the resolution cuts short.
			srv := &server{held: wall(15821), fail: timeouts}
			rec := &recorder{}
			s, _, err := Search(context.Background(), Config{Lo: 8000, Hi: 24000, Resolution: tt.res}, srv.measure, rec.observe)
			if err != nil {
				t.Fatal(err)
			}
			gap := s.FirstFail - s.Capacity
			if s.Capacity > 15821 || s.FirstFail <= 15821 || gap > tt.maxGap || gap <= 1 {
				t.Errorf("bracket [%d, %d]: want 15,821 inside, at most %d wide, and stopped before adjacent", s.Capacity, s.FirstFail, tt.maxGap)
			}
			if !hasNote(rec.notes, tt.note) {
				t.Errorf("notes %q lack %q", rec.notes, tt.note)
			}
			if s.ResolutionClients != tt.res.Clients || s.ResolutionPercent != tt.res.Percent {
				t.Errorf("resolution recorded %d, %g", s.ResolutionClients, s.ResolutionPercent)
			}
			if !hasNote(rec.notes, "Stopped at the resolution") {
				t.Errorf("notes %q", rec.notes)
			}
		})
	}
	// The default stays exact, and is not recorded.
	srv := &server{held: wall(15821), fail: timeouts}
	s, _, _ := Search(context.Background(), Config{Lo: 8000, Hi: 24000}, srv.measure, nil)
	if s.FirstFail-s.Capacity != 1 || s.ResolutionClients != 0 || s.ResolutionPercent != 0 {
		t.Errorf("default resolution: [%d, %d], recorded %d, %g", s.Capacity, s.FirstFail, s.ResolutionClients, s.ResolutionPercent)
	}
}

func TestParseResolution(t *testing.T) {
	for in, want := range map[string]Resolution{"50": {Clients: 50}, "2%": {Percent: 2}, " 0.5 %": {Percent: 0.5}, "1_000": {Clients: 1000}} {
		got, err := ParseResolution(in)
		if err != nil || got != want {
			t.Errorf("ParseResolution(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5", "0%", "100%", "x%", "2.5"} {
		if _, err := ParseResolution(in); err == nil {
			t.Errorf("ParseResolution(%q) accepted", in)
		}
	}
	if w := (Resolution{Percent: 2}).width(15821); w != 316 {
		t.Errorf("2%% of 15,821 = %d clients, want 316", w)
	}
}

// A lower bound that fails at a wall says where to start instead.
func TestSearchLoAtWall(t *testing.T) {
	srv := &server{held: wall(700), fail: enomem}
	rec := &recorder{}
	s, _, err := Search(context.Background(), Config{Lo: 1000}, srv.measure, rec.observe)
	if err != nil {
		t.Fatal(err)
	}
	if s.FirstFail != 1000 || !hasNote(rec.notes, "it held 700 at once (300 qp-create ENOMEM): try --lo 700") {
		t.Errorf("first fail %d, notes %q", s.FirstFail, rec.notes)
	}
}
