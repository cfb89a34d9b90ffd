// Package bench measures what one rdmaprobe connection costs against the
// parts it cannot avoid, on one fabric and in one process, so the figures
// compare like with like (a TCG guest taxes crypto ~15× more than verbs;
// only ratios taken in the same run mean anything across machines):
//
//   - tls_handshake: a bare TLS 1.3 handshake with the certs package's
//     Ed25519 configuration, both ends in this process over loopback,
//     timed from dial until both ends have finished;
//   - raw_verbs: the verbs work of one connection, both ends in this
//     process: two sides of 2 CQ + 2 MR + RC QP + INIT, then RTR and RTS
//     on each towards the other. A full connect in one process also builds
//     both ends (the client's QP and the server's), so one pair is one
//     connection's worth; PerSideMS halves it for the per-client figures
//     quoted elsewhere;
//   - full_connect: client.Dialer.Connect against an in-process
//     server.Server: TCP, TLS, PSN exchange, both QPs, transitions and the
//     first verified round trip.
//
// Each is run serially and with a number of operations in flight.
// Connections are held until the batch ends, as in a capacity ramp, so
// teardown is never part of the timed window. The cost of a connection is
// wall time over completed operations (the inverse of its rate): serially
// that is the mean latency, under concurrency what the machine really
// spends per connection.
package bench

import (
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// SchemaVersion of the bench file; bump on any incompatible change.
// Version 2 added rdma_cm (the rdma_cm comparison of `bench rdmacm`,
// whose files have no measurements of the suite); 3 rdmaprobe's
// per_conn_ms (each connect step's min, median and max per connection,
// which cmtime's table also gives but for the median).
const SchemaVersion = 3

// Tool and Kind tell a bench file from a run.json at a glance.
const (
	Tool = "rdmaprobe"
	Kind = "bench"
)

// FileName is the bench file inside its results directory.
const FileName = "bench.json"

// Measurement names.
const (
	TLSHandshakeName = "tls_handshake"
	RawVerbsName     = "raw_verbs"
	FullConnectName  = "full_connect"
)

// Targets the benchmark checks a build against.
const (
	// MaxCostRatio bounds full_connect / (tls_handshake + raw_verbs).
	MaxCostRatio = 1.5
	// MinSimRateVsTLS is the share of the bare TLS handshake rate that
	// full connects must reach on sim, where verbs cost next to nothing.
	MinSimRateVsTLS = 0.6
)

// Run is one saved bench run (bench.json).
type Run struct {
	SchemaVersion int            `json:"schema_version"`
	Tool          string         `json:"tool"`
	Kind          string         `json:"kind"`
	ToolVersion   string         `json:"tool_version"`
	Command       []string       `json:"command,omitempty"`
	StartedAt     time.Time      `json:"started_at"`
	FinishedAt    time.Time      `json:"finished_at"`
	Backend       result.Backend `json:"backend"`
	// Host is where the command ran; Measured is where the figures were
	// taken (the guest for the vm backend, otherwise the host again).
	Host         Environment   `json:"host"`
	Measured     Environment   `json:"measured"`
	Config       Config        `json:"config"`
	Measurements []Measurement `json:"measurements"`
	Comparisons  []Comparison  `json:"comparisons"`
	Targets      []Target      `json:"targets"`
	// RDMACM is the rdma_cm comparison of `rdmaprobe bench rdmacm`
	// against cmtime; such a run has no other measurements.
	RDMACM *CMRun `json:"rdma_cm,omitempty"`
	// Complete is false when the run stopped early; Error says why.
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
}

// Environment describes one machine (host or guest).
type Environment struct {
	Kernel     string             `json:"kernel,omitempty"`
	Arch       string             `json:"arch"`
	CPUs       int                `json:"cpus"`
	GOMAXPROCS int                `json:"gomaxprocs"`
	GoVersion  string             `json:"go_version"`
	Device     *result.DeviceInfo `json:"device,omitempty"`
}

// Config is what the measurements were run with.
type Config struct {
	// N operations per measurement and pass, serially and under
	// concurrency.
	N int `json:"n"`
	// Passes is how many times each measurement was taken, in turns with
	// the others (a, b, c, a, b, c, ...) and pooled; 0 in files written
	// before passes existed (= 1).
	Passes int `json:"passes,omitempty"`
	// Concurrency is the operations in flight in the concurrent pass.
	Concurrency int `json:"concurrency"`
	// Warmup operations run, untimed and released, before each measurement.
	Warmup       int     `json:"warmup"`
	PayloadBytes int     `json:"payload_bytes"`
	Rounds       int     `json:"rounds"` // verified round trips per full connect
	Certificate  string  `json:"certificate"`
	TimeoutSec   float64 `json:"op_timeout_sec"`
}

// Measurement is one kind of operation at one concurrency.
type Measurement struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	Attempted   int    `json:"attempted"`
	OK          int    `json:"ok"`
	Failed      int    `json:"failed"`
	FirstError  string `json:"first_error,omitempty"`
	// WallSec runs from the first start to the last completion (summed
	// over passes).
	WallSec float64 `json:"wall_sec"`
	// PerSec is completed operations per second of wall time.
	PerSec float64 `json:"per_sec"`
	// CostMS is wall time per completed operation, 1000/PerSec.
	CostMS float64 `json:"cost_ms"`
	// PerSideMS is CostMS for one end of a raw_verbs pair.
	PerSideMS float64 `json:"per_side_ms,omitempty"`
	// LatencyMS is each completed operation's own duration.
	LatencyMS result.Percentiles `json:"latency_ms"`
	// Passes is how many passes were pooled into this measurement, and
	// PassPerSec each one's rate (only when more than one).
	Passes     int       `json:"passes,omitempty"`
	PassPerSec []float64 `json:"pass_per_sec,omitempty"`
	// PhasesMS are the client's phase durations of full connects, keyed
	// as result.Phases, or the per-verb durations of raw_verbs (both ends
	// summed), keyed as Verbs.
	PhasesMS map[string]result.Percentiles `json:"phases_ms,omitempty"`

	// The raw samples, for pooling passes (not saved).
	lat    []float64
	phases map[string][]float64
}

// Comparison sets full_connect against its unavoidable parts at one
// concurrency.
type Comparison struct {
	Concurrency int `json:"concurrency"`
	// CostRatio is full_connect.cost_ms / (tls_handshake.cost_ms +
	// raw_verbs.cost_ms): 1 means rdmaprobe adds nothing to the parts.
	CostRatio float64 `json:"cost_ratio"`
	// RateVsTLS is full_connect.per_sec / tls_handshake.per_sec.
	RateVsTLS float64 `json:"rate_vs_tls"`
	// OverheadMS is what full_connect costs beyond the two parts.
	OverheadMS float64 `json:"overhead_ms"`
}

// Target is one goal of the benchmark and where this run stands.
type Target struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency"`
	Value       float64 `json:"value"`
	Limit       float64 `json:"limit"`
	Compare     string  `json:"compare"` // "<=" or ">="
	Met         bool    `json:"met"`
}

// Find returns the measurement of name at concurrency, or nil.
func (r *Run) Find(name string, concurrency int) *Measurement {
	for i := range r.Measurements {
		m := &r.Measurements[i]
		if m.Name == name && m.Concurrency == concurrency {
			return m
		}
	}
	return nil
}

// Summarise derives the comparisons and targets from the measurements.
// A concurrency missing any of the three measurements, or with one that
// completed nothing, gets no comparison: a ratio over a failed part would
// read as a result.
func (r *Run) Summarise() {
	r.Comparisons, r.Targets = nil, nil
	var levels []int
	seen := map[int]bool{}
	for _, m := range r.Measurements {
		if !seen[m.Concurrency] {
			seen[m.Concurrency] = true
			levels = append(levels, m.Concurrency)
		}
	}
	if cm := r.RDMACM; cm != nil {
		cm.Summarise()
		for _, x := range cm.Ratios {
			r.Targets = append(r.Targets, Target{
				Name:        "rdma_cm connects/s (" + x.Mode + ") >= 1.0 x cmtime's, median of passes",
				Concurrency: cm.N, Value: x.Median, Limit: MinCMRatio, Compare: ">=", Met: x.Met,
			})
		}
	}
	for _, c := range levels {
		a, b, f := r.Find(TLSHandshakeName, c), r.Find(RawVerbsName, c), r.Find(FullConnectName, c)
		if a == nil || b == nil || f == nil || a.OK == 0 || b.OK == 0 || f.OK == 0 {
			continue
		}
		cmp := Comparison{
			Concurrency: c,
			CostRatio:   f.CostMS / (a.CostMS + b.CostMS),
			RateVsTLS:   f.PerSec / a.PerSec,
			OverheadMS:  f.CostMS - a.CostMS - b.CostMS,
		}
		r.Comparisons = append(r.Comparisons, cmp)
		r.Targets = append(r.Targets, Target{
			Name:        "full_connect <= 1.5 x (tls_handshake + raw_verbs)",
			Concurrency: c, Value: cmp.CostRatio, Limit: MaxCostRatio, Compare: "<=",
			Met: cmp.CostRatio <= MaxCostRatio,
		})
		if r.Backend.Simulated {
			r.Targets = append(r.Targets, Target{
				Name:        "sim full_connect rate >= 60% of tls_handshake rate",
				Concurrency: c, Value: cmp.RateVsTLS, Limit: MinSimRateVsTLS, Compare: ">=",
				Met: cmp.RateVsTLS >= MinSimRateVsTLS,
			})
		}
	}
}
