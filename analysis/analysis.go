// Package analysis says what a run's points mean: the verdict of each point
// and of each client count (trials pooled, 95% Wilson intervals), the
// capacities (the threshold's conservative capacity, the highest count at
// 100%, the highest at ≥95% and the practical one), the non-monotonic
// counts, the recommendations, the limiting factor and the per-client
// cost. It computes them once, from saved points (result.Run,
// result.Point), so a run re-rendered from its JSON reads what the live run
// did; it does no I/O: no files, no /proc, no clock.
//
// Imports go one way: analysis imports only result. probe imports analysis
// to judge each point and each count with the same rule the report shows
// (Judge, Passes, Pool) and to phrase its verdict (Verdict); the runner
// judges, costs and diagnoses each point with it; report formats Findings;
// collectors only sample and read limits.
package analysis

import (
	"fmt"
	"sort"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Findings is what a run's points say.
type Findings struct {
	// Threshold is the success rate a count had to reach.
	Threshold float64
	// Counts are the tested client counts, trials pooled, in increasing
	// order.
	Counts []Count
	// Capacity is the largest count that passed together with every
	// smaller tested count (0 if none); FirstFail is the smallest count
	// that failed (0 if none): the breaking point the diagnosis is for.
	Capacity, FirstFail int
	// Full is the highest count at which every client connected, below any
	// count where one did not (0 if none); FirstShort is the smallest count
	// where a client did not connect (0 if none).
	Full, FirstShort int
	// Highest95 is the highest count at ≥95%, monotonic or not; Practical
	// the highest of the run's ≥95% prefix that is below Wall or passed.
	Highest95, Practical int
	// Wall is the smallest count at which a hard limit refused a client
	// (0 if none), WallLimit the limit when its diagnosis names it: no
	// recommendation reaches it unless it passed.
	Wall      int
	WallLimit string
	// Conservative and Advised are the MAX_CLIENTS the recommendations
	// give (0: none): 80% of Full, and the practical one.
	Conservative, Advised int
	// NonMonotonic lists the counts whose success rate is below a larger
	// count's (Count.NonMonotonic).
	NonMonotonic []int
	// Limit is the limiting factor at LimitAt clients, nil when nothing
	// failed.
	Limit   *result.Diagnosis
	LimitAt int
	// Costs is the per-client cost of each count that has one.
	Costs []ClientCost
	// Recommendations are what to set or do next, in prose (Markdown code
	// spans for flags).
	Recommendations []string
}

// ClientCost is the per-client cost at one client count, from its first
// trial that has one.
type ClientCost struct {
	Clients int
	result.Cost
	// Maps is the growth of the server's memory mappings over the trial per
	// connected client, what vm.max_map_count bounds; valid if HasMaps
	// (it needs process samples).
	Maps    float64
	HasMaps bool
}

// Analyse computes the findings of run from its points. It does not change
// run.
func Analyse(run *result.Run) Findings {
	f := Findings{Threshold: run.Config.Threshold}
	if f.Threshold <= 0 {
		f.Threshold = DefaultThreshold
	}
	f.Counts = Pool(run.Points, f.Threshold)
	f.Wall, f.WallLimit = Wall(run.Points)
	f.capacities()
	f.Limit, f.LimitAt = Limit(run)
	f.costs(run.Points)
	f.recommend(run.Backend.Simulated)
	return f
}

func (f *Findings) capacities() {
	prefix95, failed := true, false
	for _, c := range f.Counts {
		if c.Attempted == 0 {
			continue
		}
		if !failed {
			if c.Passed {
				f.Capacity = c.Clients
			} else {
				f.FirstFail, failed = c.Clients, true
			}
		}
		if f.FirstShort == 0 {
			if c.Connected == c.Attempted {
				f.Full = c.Clients
			} else {
				f.FirstShort = c.Clients
			}
		}
		if c.Rate >= 0.95 {
			f.Highest95 = c.Clients
		}
		// A count a hard limit refused clients at ends the prefix
		// unless it passed: advice stops at a named wall.
		if c.Rate < 0.95 || f.Wall > 0 && c.Clients >= f.Wall && !c.Passed {
			prefix95 = false
		}
		if prefix95 {
			f.Practical = c.Clients
		}
		if c.NonMonotonic {
			f.NonMonotonic = append(f.NonMonotonic, c.Clients)
		}
	}
}

func (f *Findings) costs(points []result.Point) {
	seen := map[int]bool{}
	for _, p := range points {
		if seen[p.Clients] {
			continue
		}
		c := p.Cost
		if c == nil {
			c = Cost(p)
		}
		if c == nil {
			continue
		}
		seen[p.Clients] = true
		cc := ClientCost{Clients: p.Clients, Cost: *c}
		cc.Maps, cc.HasMaps = mapsPerClient(p)
		f.Costs = append(f.Costs, cc)
	}
	sort.Slice(f.Costs, func(i, j int) bool { return f.Costs[i].Clients < f.Costs[j].Clients })
}

// mapsPerClient is the growth of the server's memory mappings over the
// point (peak minus its first sample), per connected client.
func mapsPerClient(p result.Point) (float64, bool) {
	if p.Peak == nil || p.Connected == 0 {
		return 0, false
	}
	for _, s := range p.Samples {
		for _, ps := range s.Procs {
			if ps.Role == "server" && ps.Maps > 0 {
				return float64(p.Peak.ServerMaps-ps.Maps) / float64(p.Connected), true
			}
		}
	}
	return 0, false
}

func (f *Findings) recommend(simulated bool) {
	add := func(format string, a ...any) {
		f.Recommendations = append(f.Recommendations, fmt.Sprintf(format, a...))
	}
	if f.Full > 0 {
		f.Conservative, f.Advised = f.Full*8/10, max(f.Full, f.Practical)
		add("Conservative: MAX_CLIENTS = %d (80%% of %d, the highest count at which every client connected).", f.Conservative, f.Full)
		wall := ""
		if f.Wall > 0 && f.Practical < f.Wall {
			wall = fmt.Sprintf(", below %d, where a hard limit refused a client", f.Wall)
			if f.WallLimit != "" {
				wall = fmt.Sprintf(", below %d, where %s refused a client", f.Wall, f.WallLimit)
			}
		}
		add("Practical: MAX_CLIENTS = %d (the highest count such that it and every smaller tested count reached ≥95%%%s).", f.Advised, wall)
	} else {
		add("No count reached 100%%: test smaller counts before choosing MAX_CLIENTS.")
	}
	if f.FirstShort == 0 && len(f.Counts) > 0 {
		add("Every tested count passed: search higher (e.g. `--lo %d` without `--hi`) to find the limit.", f.Counts[len(f.Counts)-1].Clients)
	}
	if f.Limit != nil && f.Limit.Suggestion != "" {
		add("To go further: %s.", f.Limit.Suggestion)
	}
	if len(f.NonMonotonic) > 0 {
		add("Re-test %s with more trials (`--trials 3`): their results contradict the larger counts.", joinComma(f.NonMonotonic))
	}
	if simulated {
		add("These figures are simulated: confirm them on Soft-RoCE (`--backend vm`) or a real device.")
	}
}

// Limit is the limiting factor of run and the client count it is for: the
// diagnosis saved with the breaking point (its last trial's), else the
// first diagnosed point's, else the run's own, else one made now from the
// saved points — so that a run whose points failed names what it knows
// even when it was saved without a diagnosis. It returns nil when no point
// failed.
func Limit(run *result.Run) (*result.Diagnosis, int) {
	thr := run.Config.Threshold
	if thr <= 0 {
		thr = DefaultThreshold
	}
	var f Findings
	f.Counts = Pool(run.Points, thr)
	f.capacities()
	var d *result.Diagnosis
	at := 0
	for _, p := range run.Points {
		if p.Diagnosis != nil && (d == nil || p.Clients == f.FirstFail) {
			d, at = p.Diagnosis, p.Clients
		}
	}
	if d != nil {
		return d, at
	}
	if run.Diagnosis != nil {
		return run.Diagnosis, f.FirstFail
	}
	var failed *result.Point
	for i := range run.Points {
		p := run.Points[i]
		Judge(&p, thr)
		if p.Passed && p.Error == "" {
			continue
		}
		if failed == nil || p.Clients == f.FirstFail {
			failed = &run.Points[i]
		}
	}
	if failed == nil {
		return nil, 0
	}
	before, after := limitsOf(failed)
	maxClients := run.Config.MaxClients
	if maxClients == 0 {
		maxClients = failed.Clients
	}
	if d := Diagnose(*failed, before, after, maxClients); d != nil {
		return d, failed.Clients
	}
	return nil, 0
}

// limitsOf is what a saved point knows of the limits in force; the limits
// after default to those before (the listen counters then show no growth).
func limitsOf(p *result.Point) (before, after result.Limits) {
	if p.Limits != nil {
		before = *p.Limits
	}
	after = before
	if p.LimitsAfter != nil {
		after = *p.LimitsAfter
	}
	return before, after
}

// Summarise fills the run-level fields a saved run carries beside its
// points: Limits, those read with the first point that has them, and
// Diagnosis, the limiting factor at the breaking point (Limit). The
// session calls it before saving a finished or interrupted run; reports do
// not need it, as Analyse reads the points themselves.
func Summarise(run *result.Run) {
	for i := range run.Points {
		if run.Points[i].Limits != nil {
			run.Limits = run.Points[i].Limits
			break
		}
	}
	// A diagnosis made from an earlier save's points may name the wrong
	// breaking point now: make it again.
	run.Diagnosis = nil
	run.Diagnosis, _ = Limit(run)
}

// joinComma lists counts as "400, 450, 475".
func joinComma(ns []int) string {
	s := ""
	for i, n := range ns {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(n)
	}
	return s
}

// SummariseDesigns is Summarise for a run that measured several server
// designs (result.Run.DesignModes): the run's Limits, and per design, in
// Config.Designs' order, its search (searches, in the same order), the
// largest count it held by each criterion (Capacity) and its limiting
// factor (Limit of the design's points alone). Max sustainable is
// counted only when a traffic phase ran.
func SummariseDesigns(run *result.Run, searches []result.Search) {
	for i := range run.Points {
		if run.Points[i].Limits != nil {
			run.Limits = run.Points[i].Limits
			break
		}
	}
	run.Search, run.Diagnosis, run.Designs = nil, nil, nil
	for i, mode := range run.Config.Designs {
		d := result.Design{Mode: mode}
		if i < len(searches) {
			s := searches[i]
			d.Search = &s
		}
		sub := run.ForDesign(mode)
		d.MaxConnected = Capacity(sub.Points, run.Config.Threshold, result.CriterionConnect)
		if run.Config.Traffic != nil {
			d.MaxSustainable = Capacity(sub.Points, run.Config.Threshold, result.CriterionTraffic)
		}
		d.Diagnosis, d.LimitAt = Limit(sub)
		run.Designs = append(run.Designs, d)
	}
}
