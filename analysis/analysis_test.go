package analysis

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// pt is one trial: connected of clients, the rest timed out.
func pt(clients, connected int) result.Point {
	p := result.Point{Clients: clients, Trial: 1, Attempted: clients, Connected: connected,
		Outcomes: map[string]int{result.OutcomeOK: connected}}
	if connected < clients {
		p.Outcomes[result.OutcomeTimeout] = clients - connected
	}
	return p
}

func TestCapacities(t *testing.T) {
	for _, tc := range []struct {
		name                                string
		threshold                           float64
		points                              []result.Point
		capacity, firstFail                 int
		full, firstShort, highest95, practi int
		nonMonotonic                        []int
	}{
		// A published Soft-RoCE table: 100, 100, 100, 92,
		// 85, 94, 98%.
		{name: "published table", threshold: 1,
			points:   []result.Point{pt(100, 100), pt(200, 200), pt(300, 300), pt(400, 368), pt(450, 382), pt(475, 446), pt(500, 490)},
			capacity: 300, firstFail: 400, full: 300, firstShort: 400, highest95: 500, practi: 300,
			nonMonotonic: []int{400, 450, 475}},
		// At a 95% threshold 400 at 96% passes: the capacity moves, the
		// 100% figures do not.
		{name: "95% threshold", threshold: 0.95,
			points:   []result.Point{pt(100, 100), pt(400, 384), pt(500, 450)},
			capacity: 400, firstFail: 500, full: 100, firstShort: 400, highest95: 400, practi: 400},
		{name: "everything passed", threshold: 1,
			points:   []result.Point{pt(10, 10), pt(20, 20)},
			capacity: 20, full: 20, highest95: 20, practi: 20},
		{name: "nothing passed", threshold: 1,
			points:    []result.Point{pt(10, 5), pt(20, 8)},
			firstFail: 10, firstShort: 10},
		// Two trials at 20 pool to 39/40: below 100% although one trial
		// connected every client.
		{name: "pooled trials", threshold: 1,
			points:   []result.Point{pt(10, 10), pt(20, 20), {Clients: 20, Trial: 2, Attempted: 20, Connected: 19}},
			capacity: 10, firstFail: 20, full: 10, firstShort: 20, highest95: 20, practi: 20},
		// A point that itself failed fails its count whatever it counted.
		{name: "point error", threshold: 1,
			points:   []result.Point{pt(10, 10), {Clients: 20, Trial: 1, Attempted: 20, Connected: 20, Error: "server exited"}},
			capacity: 10, firstFail: 20, full: 20, highest95: 20, practi: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Analyse(&result.Run{Config: result.Config{Threshold: tc.threshold}, Points: tc.points})
			got := []int{f.Capacity, f.FirstFail, f.Full, f.FirstShort, f.Highest95, f.Practical}
			want := []int{tc.capacity, tc.firstFail, tc.full, tc.firstShort, tc.highest95, tc.practi}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("capacity, first fail, full, first short, highest ≥95%%, practical = %v, want %v", got, want)
			}
			if !reflect.DeepEqual(f.NonMonotonic, tc.nonMonotonic) {
				t.Errorf("non-monotonic %v, want %v", f.NonMonotonic, tc.nonMonotonic)
			}
		})
	}
}

func TestPool(t *testing.T) {
	a := pt(20, 20)
	a.Connect.P50, a.Connect.P99 = 3, 9
	b := pt(20, 18)
	b.Trial, b.Connect.P50, b.Connect.P99 = 2, 4, 7
	cs := Pool([]result.Point{b, pt(10, 10), a}, 0.95)
	if len(cs) != 2 || cs[0].Clients != 10 || cs[1].Clients != 20 {
		t.Fatalf("counts %+v", cs)
	}
	c := cs[1]
	lo, hi := Wilson(38, 40, Z95)
	want := Count{Clients: 20, Trials: 2, Attempted: 40, Connected: 38, Rate: 0.95, CILow: lo, CIHigh: hi, Passed: true,
		ConnectP50: 4, ConnectP99: 9, Failures: map[string]int{result.OutcomeTimeout: 2}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("pooled 20:\n got %+v\nwant %+v", c, want)
	}
}

// The limiting factor: what the saved points say, in this order.
func TestLimit(t *testing.T) {
	diag := func(limit string) *result.Diagnosis { return &result.Diagnosis{Limit: limit, Summary: limit} }
	with := func(p result.Point, d *result.Diagnosis) result.Point { p.Diagnosis = d; return p }
	for _, tc := range []struct {
		name   string
		run    result.Run
		limit  string
		at     int
		derive bool
	}{
		{name: "nothing failed", run: result.Run{Points: []result.Point{pt(10, 10), pt(20, 20)}}},
		{name: "the breaking point's, not the first diagnosed",
			run:   result.Run{Points: []result.Point{with(pt(60, 40), diag("at-60")), pt(20, 20), with(pt(41, 40), diag("at-41"))}},
			limit: "at-41", at: 41},
		{name: "the first diagnosed point without one at the breaking point",
			run:   result.Run{Points: []result.Point{pt(10, 10), pt(20, 15), with(pt(30, 10), diag("at-30")), with(pt(40, 10), diag("at-40"))}},
			limit: "at-30", at: 30},
		{name: "the run's own, saved without its points' diagnoses",
			run:   result.Run{Points: []result.Point{pt(10, 10), pt(20, 15)}, Diagnosis: diag("run")},
			limit: "run", at: 20},
		{name: "made from the failed points when nothing was saved",
			run:   result.Run{Points: []result.Point{pt(10, 10), pt(20, 15), pt(30, 10)}},
			limit: "timeout", at: 20, derive: true},
		// A saved Passed says nothing once the threshold is known: 20 at
		// 75% fails a 100% threshold.
		{name: "judged anew, not by the saved passed flag",
			run: result.Run{Config: result.Config{Threshold: 1}, Points: []result.Point{pt(10, 10), func() result.Point {
				p := pt(20, 15)
				p.Passed = true
				return p
			}()}},
			limit: "timeout", at: 20, derive: true},
		{name: "the limits saved with the point are used",
			run: result.Run{Config: result.Config{MaxClients: 30}, Points: []result.Point{{Clients: 40, Attempted: 40, Connected: 30,
				Outcomes: map[string]int{result.OutcomeOK: 30, result.OutcomeRefused: 10}}}},
			limit: "max-clients", at: 40, derive: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, at := Limit(&tc.run)
			if tc.limit == "" {
				if d != nil {
					t.Errorf("diagnosis %+v at %d for a run where nothing failed", d, at)
				}
				return
			}
			if d == nil || d.Limit != tc.limit || at != tc.at {
				t.Fatalf("diagnosis %+v at %d, want %s at %d", d, at, tc.limit, tc.at)
			}
			if tc.derive && d.Suggestion == "" {
				t.Errorf("a derived diagnosis without a suggestion: %+v", d)
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	lim := &result.Limits{NoFile: 1024}
	a, b := pt(10, 10), pt(20, 15)
	b.Limits = lim
	run := &result.Run{Points: []result.Point{a, b}, Diagnosis: &result.Diagnosis{Limit: "stale"}}
	Summarise(run)
	if run.Limits != lim {
		t.Errorf("limits %+v, want the first point's that has them", run.Limits)
	}
	if run.Diagnosis == nil || run.Diagnosis.Limit != "timeout" {
		t.Errorf("diagnosis %+v, want one made again from the points", run.Diagnosis)
	}
	ok := &result.Run{Points: []result.Point{a}}
	Summarise(ok)
	if ok.Diagnosis != nil || ok.Limits != nil {
		t.Errorf("a clean run got limits %+v, diagnosis %+v", ok.Limits, ok.Diagnosis)
	}
}

func TestRecommendations(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  result.Run
		want []string
	}{
		{name: "published table", run: result.Run{Points: []result.Point{pt(100, 100), pt(200, 200), pt(300, 300), pt(400, 368), pt(500, 490)}},
			want: []string{
				"Conservative: MAX_CLIENTS = 240 (80% of 300, the highest count at which every client connected).",
				"Practical: MAX_CLIENTS = 300 (the highest count such that it and every smaller tested count reached ≥95%).",
				"To go further: raise --timeout, pace launches with --connect-rate, or give the server more CPU.",
				"Re-test 400 with more trials (`--trials 3`): their results contradict the larger counts.",
			}},
		{name: "everything passed, simulated", run: result.Run{Backend: result.Backend{Simulated: true}, Points: []result.Point{pt(10, 10), pt(20, 20)}},
			want: []string{
				"Conservative: MAX_CLIENTS = 16 (80% of 20, the highest count at which every client connected).",
				"Practical: MAX_CLIENTS = 20 (the highest count such that it and every smaller tested count reached ≥95%).",
				"Every tested count passed: search higher (e.g. `--lo 20` without `--hi`) to find the limit.",
				"These figures are simulated: confirm them on Soft-RoCE (`--backend vm`) or a real device.",
			}},
		{name: "nothing at 100%", run: result.Run{Points: []result.Point{pt(10, 9)}},
			want: []string{
				"No count reached 100%: test smaller counts before choosing MAX_CLIENTS.",
				"To go further: raise --timeout, pace launches with --connect-rate, or give the server more CPU.",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Analyse(&tc.run).Recommendations; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// Costs come from each count's first trial that has one, saved or made
// from its peak.
func TestCosts(t *testing.T) {
	saved := pt(10, 10)
	saved.Cost = &result.Cost{Clients: 10, QPs: 1}
	fromPeak := pt(20, 20)
	fromPeak.Server.Resources = map[string]int{"qp": 20, "cq": 40}
	f := Analyse(&result.Run{Points: []result.Point{fromPeak, pt(30, 30), saved}})
	if len(f.Costs) != 2 || f.Costs[0].Clients != 10 || f.Costs[0].QPs != 1 || f.Costs[1].Clients != 20 || f.Costs[1].CQs != 2 {
		t.Errorf("costs %+v", f.Costs)
	}
}

func TestMapsPerClient(t *testing.T) {
	sample := func(role string, maps int) result.Sample {
		return result.Sample{Procs: []result.ProcSample{{Role: role, Maps: maps}}}
	}
	for _, tc := range []struct {
		name string
		p    result.Point
		want string
	}{
		{"no peak", result.Point{Connected: 10}, "–"},
		{"none connected", result.Point{Peak: &result.Peak{ServerMaps: 500}}, "–"},
		{"no server sample", result.Point{Connected: 100, Peak: &result.Peak{ServerMaps: 500},
			Samples: []result.Sample{sample("clients-0", 90)}}, "–"},
		// srq on rxe: one mapping per client over the first sample.
		{"srq", result.Point{Connected: 100, Peak: &result.Peak{ServerMaps: 212},
			Samples: []result.Sample{sample("clients-0", 90), sample("server", 110)}}, "1.02"},
		{"per-client", result.Point{Connected: 2000, Peak: &result.Peak{ServerMaps: 8134},
			Samples: []result.Sample{sample("server", 94)}}, "4.02"},
	} {
		got := "–"
		if maps, ok := mapsPerClient(tc.p); ok {
			got = fmt.Sprintf("%.2f", maps)
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A staircase's steps pool as counts of their own, marked, until a fresh
// point measures the same count: then that count is the fresh point's.
func TestPoolSteps(t *testing.T) {
	step := func(n, ok int) result.Point { p := pt(n, ok); p.Cumulative = true; return p }
	cs := Pool([]result.Point{step(10, 10), step(20, 20), step(30, 25), pt(25, 24)}, 1)
	var got [][3]int
	for _, c := range cs {
		got = append(got, [3]int{c.Clients, c.Steps, c.Connected})
	}
	if want := [][3]int{{10, 1, 10}, {20, 1, 20}, {25, 0, 24}, {30, 1, 25}}; !reflect.DeepEqual(got, want) {
		t.Errorf("clients, steps, connected = %v, want %v", got, want)
	}
	cs = Pool([]result.Point{step(10, 10), step(20, 18), pt(20, 20)}, 1)
	if c := cs[1]; c.Clients != 20 || c.Trials != 1 || c.Steps != 0 || !c.Passed {
		t.Errorf("20 with a failed step and a passed fresh point: %+v, want the fresh point's pass alone", c)
	}
}
