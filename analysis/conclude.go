package analysis

import (
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Conclude is the run's verdict as figures, derived from its saved
// points alone: per design max connected and max sustainable, the
// capacity and first failure by the run's criterion, the performant
// count (Bend), the non-monotonic counts, the limiting factor, the wall and the recommendations; the
// point cut short; the --require outcome. It is the one place these
// are derived: run.json saves it (result.Run.Verdict), and every view
// of a run (terminal, reports, run_end, the capacity metric, the
// --require gate) states it rather than working a figure out itself.
func Conclude(run *result.Run) result.Verdict {
	v := result.Verdict{Threshold: run.Config.Threshold}
	if v.Threshold <= 0 {
		v.Threshold = DefaultThreshold
	}
	designs := run.DesignModes()
	if designs == nil {
		designs = []string{""}
	}
	for _, mode := range designs {
		sub := run
		if mode != "" {
			sub = run.ForDesign(mode)
		}
		v.Designs = append(v.Designs, concludeDesign(sub, mode, v.Threshold))
	}
	if p := run.Interrupted; p != nil {
		v.Interrupted = p.Clients
		if run.DesignModes() != nil {
			v.InterruptedDesign = run.PointDesign(*p)
		}
	}
	if n, crit, ok := ParseRequire(run.Config.Require); ok {
		r := Require(v, n, crit)
		v.Require = &r
	}
	return v
}

// Require is whether v holds n clients by criterion in every design.
func Require(v result.Verdict, n int, criterion string) result.RequireOutcome {
	r := result.RequireOutcome{Clients: n, Criterion: criterion, Met: true}
	for _, d := range v.Designs {
		if d.HeldBy(criterion) < n {
			r.Met = false
		}
	}
	return r
}

func concludeDesign(run *result.Run, mode string, threshold float64) result.DesignVerdict {
	f := Analyse(run)
	d := result.DesignVerdict{Design: mode, MaxSustainable: -1,
		MaxConnected: Capacity(run.Points, threshold, result.CriterionConnect),
		Capacity:     f.Capacity, FirstFail: f.FirstFail, NonMonotonic: f.NonMonotonic,
		Wall: f.Wall, Conservative: f.Conservative, Practical: f.Advised}
	if run.Config.Traffic != nil {
		d.MaxSustainable = Capacity(run.Points, threshold, result.CriterionTraffic)
		if n := sloMissedAt(run.Points, d.MaxSustainable, threshold); n > 0 {
			d.SLOMissedAt = n
			d.SLOCauseKind, d.SLOCause = BendCause(run.Points, d.MaxSustainable, n, serverCPUs(run))
		}
	}
	if len(f.Counts) > 0 {
		d.Highest = f.Counts[len(f.Counts)-1].Clients
	}
	if f.Limit != nil {
		d.Limit, d.LimitAt = f.Limit.Limit, f.LimitAt
	}
	if b, ok := Bend(run.Points, Epsilon(run.Config.SLO)); ok {
		b.CauseKind, b.Cause = BendCause(run.Points, b.Performant, b.BendAt, serverCPUs(run))
		d.Bend = &b
	}
	return d
}

// ParseRequire reads --require as saved (result.Config.Require): "N"
// (criterion connect) or "N:criterion".
func ParseRequire(s string) (n int, criterion string, ok bool) {
	num, crit, cut := strings.Cut(strings.TrimSpace(s), ":")
	if !cut {
		crit = result.CriterionConnect
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || (crit != result.CriterionConnect && crit != result.CriterionTraffic) {
		return 0, "", false
	}
	return n, crit, true
}

// serverCPUs is the cores of the machine the server ran on: the guest's
// for the vm backend, 0 when it ran on another host.
func serverCPUs(run *result.Run) int {
	switch {
	case run.ServerHost != nil:
		return 0
	case run.Environment.Guest != nil:
		return run.Environment.Guest.CPUs
	}
	return run.Environment.CPUs
}

// sloMissedAt is the count just past max sustainable when its clients
// connected at the threshold and its traffic phase missed the SLOs (0:
// none, or nothing sustained): the count a receive shortage or a
// saturated core fails without refusing a client.
func sloMissedAt(points []result.Point, sustainable int, threshold float64) int {
	if sustainable <= 0 {
		return 0
	}
	for _, c := range Pool(points, threshold) {
		if c.Clients <= sustainable {
			continue
		}
		missed := 0
		for _, p := range points {
			if p.Clients == c.Clients && p.Traffic != nil && p.Traffic.Error == "" && !p.Traffic.SLOPassed {
				missed++
			}
		}
		if !c.Errored && Passes(c.Connected, c.Attempted, threshold) && MissesSLOs(missed, c.Trials) {
			return c.Clients
		}
		return 0
	}
	return 0
}
