// Package rungen generates saved runs at random for tests that hold
// every view of a run to one verdict (analysis.Conclude): random client
// counts and trials, outcomes, hard walls, a point cut short in each
// phase, traffic phases with and without SLOs, one design or several.
// A view added later is held to the same runs by adding it to the
// views test (app's TestViewsStateOneVerdict).
package rungen

import (
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Phases a point can be cut short in (Gen.Cut).
const (
	CutNone    = ""
	CutConnect = "connect"
	CutTraffic = "traffic"
	CutHold    = "hold"
)

// Gen is one generated run and what it was generated from.
type Gen struct {
	// Knee is the count past which the message rate falls (0: it
	// never does), as a device cache past its size makes it fall.
	Knee int
	Run  *result.Run
	// Cap is the device cap every design's server was given (0: none):
	// clients beyond it are refused as rxe refuses a full QP pool.
	Cap int
	// Cut is the phase the run's interrupted point was cut in.
	Cut string
}

var designNames = []string{"per-client", "srq", "ud"}

// Run generates a run from r. It is saved as the session saves one:
// points judged, searches summarised, the verdict derived.
func Run(r *rand.Rand) Gen {
	g := Gen{}
	thr := []float64{1, 0.99, 0.95, 0.9}[r.IntN(4)]
	run := &result.Run{SchemaVersion: result.SchemaVersion, Tool: "rdmaprobe", Mode: "ramp",
		Backend: result.Backend{Name: "sim", Simulated: true}, Points: []result.Point{},
		Config: result.Config{Threshold: thr, ResourceMode: "per-client", Trials: 1 + r.IntN(3)}}
	designs := []string{"per-client"}
	if r.IntN(3) == 0 {
		designs = slices.Clone(designNames[:2+r.IntN(2)])
		run.Config.Designs, run.Config.ResourceMode = designs, "per-client,srq"
	}
	if r.IntN(2) == 0 {
		run.Config.Traffic = &result.TrafficSetup{DurationSec: 1, Op: result.OpSend, Depth: 1}
		if r.IntN(2) == 0 {
			run.Config.SLO = []string{"errors=0", "rate>=0.9*peak", "errors=0,rate>=0.7*peak"}[r.IntN(3)]
		}
		if r.IntN(2) == 0 {
			g.Knee = 1 + r.IntN(150)
		}
		if r.IntN(3) == 0 {
			run.Config.Criterion = result.CriterionTraffic
		}
	}
	if r.IntN(2) == 0 {
		g.Cap = 5 + r.IntN(150)
	}
	counts := map[int]bool{}
	for range 1 + r.IntN(6) {
		counts[1+r.IntN(200)] = true
	}
	ns := make([]int, 0, len(counts))
	for n := range counts {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	run.Config.RampClients = ns
	// A flaky server loses clients to timeouts at random on top of any
	// wall, which makes counts non-monotonic now and then.
	flaky := r.IntN(3) == 0
	var searches []result.Search
	for _, d := range designs {
		var pts []result.Point
		for _, n := range ns {
			for trial := 1; trial <= run.Config.Trials; trial++ {
				pts = append(pts, g.point(r, run, d, n, trial, flaky))
			}
		}
		run.Points = append(run.Points, pts...)
		searches = append(searches, search(pts, thr))
	}
	if r.IntN(3) == 0 {
		g.Cut = []string{CutConnect, CutTraffic, CutHold}[r.IntN(3)]
		n := 1 + r.IntN(250)
		p := g.point(r, run, designs[r.IntN(len(designs))], n, 1, false)
		p.Interrupted, p.Error = true, "interrupted"
		switch g.Cut {
		case CutConnect:
			p.Records = p.Records[:r.IntN(len(p.Records)+1)]
			p.Traffic = nil
		case CutTraffic:
			p.Traffic = &result.Traffic{Error: result.TrafficInterrupted, Clients: p.Connected}
		case CutHold:
			p.Traffic = nil
		}
		summarise(&p)
		analysis.Judge(&p, thr)
		run.Interrupted = &p
		run.Error = "interrupted"
	} else {
		run.Complete = true
	}
	if len(designs) > 1 {
		analysis.SummariseDesigns(run, searches)
	} else {
		run.Search = &searches[0]
		analysis.Summarise(run)
	}
	if r.IntN(2) == 0 {
		crit := result.CriterionConnect
		if run.Config.Traffic != nil && r.IntN(2) == 0 {
			crit = result.CriterionTraffic
		}
		run.Config.Require = itoa(1+r.IntN(200)) + ":" + crit
	}
	v := analysis.Conclude(run)
	run.Verdict = &v
	g.Run = run
	return g
}

// point is one trial of n clients of design d.
func (g Gen) point(r *rand.Rand, run *result.Run, d string, n, trial int, flaky bool) result.Point {
	p := result.Point{Clients: n, Trial: trial, Design: d, Limits: &result.Limits{}}
	walled, slow := false, false
	for i := range n {
		rec := result.ClientRecord{ID: i, Outcome: result.OutcomeOK}
		switch {
		case g.Cap > 0 && i >= g.Cap:
			rec.Outcome, rec.Errno, rec.Error = result.OutcomeQPCreate, "EINVAL", "ibv_create_qp: EINVAL"
			walled = true
		case flaky && r.IntN(40) == 0:
			rec.Outcome, rec.Error = result.OutcomeTimeout, "deadline exceeded"
			slow = true
		}
		p.Records = append(p.Records, rec)
	}
	summarise(&p)
	switch {
	case walled:
		p.Diagnosis = &result.Diagnosis{Limit: "device-cap:max_qp", Summary: "the server's fabric held " + itoa(g.Cap) + " QPs of max_qp " + itoa(g.Cap)}
	case slow:
		p.Diagnosis = &result.Diagnosis{Limit: "timeout", Summary: "clients hit their deadline"}
	}
	if run.Config.Traffic != nil {
		// Each client adds 1,000 msg/s up to the knee; past it the rate
		// falls with the square of the excess; every trial is ±10%.
		rate := 1000 * float64(p.Connected)
		if g.Knee > 0 && p.Connected > g.Knee {
			rate = 1000 * float64(g.Knee) * float64(g.Knee) / float64(p.Connected) * float64(g.Knee) / float64(p.Connected)
		}
		rate *= 0.9 + 0.2*r.Float64()
		t := &result.Traffic{Op: result.OpSend, Depth: 1, DurationSec: 1, Clients: p.Connected, Messages: int64(rate),
			MsgRate: rate, SLOPassed: true}
		if run.Config.SLO != "" && r.IntN(4) == 0 {
			t.SLOPassed = false
			t.Errors = map[string]int64{result.TrafficTimeout: 1}
		}
		t.Judged = run.Config.Criterion == result.CriterionTraffic
		p.Traffic = t
	}
	analysis.Judge(&p, run.Config.Threshold)
	return p
}

// summarise counts a point's records as the runner does.
func summarise(p *result.Point) {
	p.Attempted, p.Connected, p.Outcomes = len(p.Records), 0, map[string]int{}
	for _, rec := range p.Records {
		p.Outcomes[rec.Outcome]++
		if rec.Outcome == result.OutcomeOK {
			p.Connected++
		}
	}
}

// search is a ramp's saved search over pts: a step per count, the
// capacity, the first failure and the non-monotonic counts by threshold.
func search(pts []result.Point, thr float64) result.Search {
	s := result.Search{Steps: []result.Step{}}
	for _, c := range analysis.Pool(pts, thr) {
		s.Steps = append(s.Steps, result.Step{Clients: c.Clients, Trials: c.Trials, Passed: c.Passed, Rate: c.Rate, Note: "ramp", Reason: "listed"})
		switch {
		case c.Passed && s.FirstFail == 0:
			s.Capacity = c.Clients
		case !c.Passed && s.FirstFail == 0:
			s.FirstFail = c.Clients
		}
	}
	for _, st := range s.Steps {
		if st.Passed || st.Clients > s.Steps[len(s.Steps)-1].Clients {
			continue
		}
		for _, larger := range s.Steps {
			if larger.Clients > st.Clients && larger.Passed {
				s.NonMonotonic = append(s.NonMonotonic, st.Clients)
				break
			}
		}
	}
	s.AboveHi = s.FirstFail == 0
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

// Clients returns n connected clients' records spread over procs load
// generators, with the spread of values a sim or rxe run at thousands of
// clients records: phase times of microseconds to a quarter second,
// three round trips to the nanosecond, QPNs in creation order and PSNs
// of 24 random bits. Tests and benchmarks of a run's size and reading
// time hold them.
func Clients(r *rand.Rand, n, procs int) []result.ClientRecord {
	recs := make([]result.ClientRecord, n)
	qpn := make([]uint32, procs)
	for i := range recs {
		proc := i * procs / n
		qpn[proc]++
		us := func(lo, hi int) int64 { return int64(lo + r.IntN(hi-lo+1)) }
		ph := map[string]int64{
			result.PhaseTCP: us(500, 60_000), result.PhaseTLS: us(3_000, 250_000), result.PhasePSN: us(1, 9),
			result.PhaseQPCreate: us(1, 1_000), result.PhaseInit: us(0, 3), result.PhaseExchange: us(8_000, 150_000),
			result.PhaseRTR: us(0, 1), result.PhaseRTS: us(0, 1), result.PhaseFirstRTT: us(100, 80_000),
		}
		var connect int64
		for _, v := range ph {
			connect += v
		}
		rtts := []float64{float64(ph[result.PhaseFirstRTT]) + float64(r.IntN(1000))/1000}
		for range 2 {
			rtts = append(rtts, float64(r.IntN(80_000_000))/1000)
		}
		recs[i] = result.ClientRecord{ID: i, Proc: proc, Outcome: result.OutcomeOK, PhasesUS: ph,
			ConnectUS: connect + us(0, 100), RTTsUS: rtts,
			LocalQPN: 16 + qpn[proc] + uint32(r.IntN(8)), RemoteQPN: 16 + uint32(i) + uint32(r.IntN(64)),
			LocalPSN: uint32(r.IntN(1 << 24)), RemotePSN: uint32(r.IntN(1 << 24))}
	}
	return recs
}
