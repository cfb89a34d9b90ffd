package result

// Verdict is what a run concluded, per server design, as figures: the
// numbers every view of the run states (the terminal, report.md and
// report.html, the run_end event, the capacity metric, the --require
// gate). analysis.Conclude derives it from the saved points alone.
type Verdict struct {
	// Threshold is the success rate that decided pass and fail.
	Threshold float64 `json:"threshold"`
	// Designs has one entry per server design, in turn order (one,
	// with no design named, for a run of one).
	Designs []DesignVerdict `json:"designs"`
	// Interrupted is the client count of the point cut short, counted
	// nowhere (0: none), and InterruptedDesign its design.
	Interrupted       int    `json:"interrupted_clients,omitempty"`
	InterruptedDesign string `json:"interrupted_design,omitempty"`
	// Require is the --require outcome (absent without one).
	Require *RequireOutcome `json:"require,omitempty"`
}

// DesignVerdict is one design's answer among the counts tested.
type DesignVerdict struct {
	Design string `json:"design,omitempty"`
	// MaxConnected is the largest count that connected at the threshold
	// with every smaller count tested; MaxSustainable the largest whose
	// traffic phase also met the SLOs, -1 when no traffic phase ran.
	MaxConnected   int `json:"max_connected"`
	MaxSustainable int `json:"max_sustainable"`
	// SLOMissedAt is the count just past MaxSustainable when its clients
	// connected and its traffic phase missed the SLOs (0: none), and
	// SLOCauseKind and SLOCause what rose from MaxSustainable to it, as
	// Bend's CauseKind and Cause say of a bend.
	SLOMissedAt  int    `json:"slo_missed_at,omitempty"`
	SLOCauseKind string `json:"slo_cause_kind,omitempty"`
	SLOCause     string `json:"slo_cause,omitempty"`
	// Capacity is the largest count that passed by the run's criterion
	// with every smaller one (the search's capacity, or breaking point);
	// FirstFail the smallest count that failed (0: none); Highest the
	// largest count tested.
	Capacity  int `json:"capacity"`
	FirstFail int `json:"first_fail"`
	Highest   int `json:"highest_tested"`
	// NonMonotonic are the counts whose rate is below a larger count's.
	NonMonotonic []int `json:"non_monotonic,omitempty"`
	// Limit is the limiting factor's name at LimitAt clients ("" when
	// nothing failed).
	Limit   string `json:"limit,omitempty"`
	LimitAt int    `json:"limit_at,omitempty"`
	// Wall is the smallest count at which a hard limit refused a client
	// (0: none); no recommendation reaches it unless it passed.
	Wall int `json:"wall,omitempty"`
	// Conservative and Practical are the recommended MAX_CLIENTS (0:
	// none, no count held every client).
	Conservative int `json:"conservative"`
	Practical    int `json:"practical"`
	// Bend is the performant-client count (analysis.Bend), absent when
	// fewer than three counts ran a completed traffic phase.
	Bend *Bend `json:"bend,omitempty"`
}

// Bend is where adding clients stopped raising what they get together:
// Performant is the largest tested count such that every tested count up
// to it reached (1−Epsilon) of the peak message rate up to it, each count
// its trials' median; counts from the smallest one where a trial did not
// hold all its clients (a wall) on do not enter.
type Bend struct {
	Performant int     `json:"performant"`
	Epsilon    float64 `json:"epsilon"`
	// Rate is the median message rate at Performant; Peak the best up
	// to it, at PeakAt clients.
	Rate   float64 `json:"rate"`
	Peak   float64 `json:"peak"`
	PeakAt int     `json:"peak_at"`
	// BendAt is the first tested count past Performant, which fell below
	// (1−Epsilon)×Peak, and BendRate its median rate; 0 when every tested
	// count was performant.
	BendAt   int     `json:"bend_at,omitempty"`
	BendRate float64 `json:"bend_rate,omitempty"`
	// CauseKind is what rose between Performant and BendAt
	// (analysis.BendCause: rnr, loss, qp-cache, congestion, server-cpu,
	// generator, or none), and Cause says it with the figures.
	CauseKind string `json:"cause_kind,omitempty"`
	Cause     string `json:"cause,omitempty"`
}

// RequireOutcome is whether --require was met: Clients by Criterion in
// every design.
type RequireOutcome struct {
	Clients   int    `json:"clients"`
	Criterion string `json:"criterion"`
	Met       bool   `json:"met"`
}

// HeldBy is the design's capacity by criterion: MaxSustainable by
// CriterionTraffic (0 without a traffic phase), else MaxConnected.
func (d DesignVerdict) HeldBy(criterion string) int {
	if criterion == CriterionTraffic {
		return max(d.MaxSustainable, 0)
	}
	return d.MaxConnected
}
