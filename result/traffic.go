package result

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/hist"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

// Traffic operations.
const (
	OpSend  = "send"  // SEND/RECV of a self-checking payload, echoed back by the server
	OpWrite = "write" // RDMA WRITE into the client's region of a server buffer
	OpRead  = "read"  // RDMA READ of the client's region, filled by the server
)

// Ops lists the traffic operations.
var Ops = []string{OpSend, OpWrite, OpRead}

// Traffic error classes besides the completion statuses (named as
// fabric.WCStatus.Name, e.g. "RETRY_EXC_ERR").
const (
	// TrafficTimeout: a message got no completion within the message
	// deadline (the peer stopped answering).
	TrafficTimeout = "timeout"
	// TrafficLost: in ud mode, a message whose echo did not come back
	// within the message deadline, or was overtaken by a later
	// message's echo: a datagram lost either way.
	TrafficLost = "lost"
	// TrafficVerify: an echo or a read did not verify (payload, sequence
	// or length).
	TrafficVerify = "verify"
	// TrafficPost: posting a work request failed.
	TrafficPost = "post"
	// TrafficInterrupted: the phase was stopped (Ctrl-C) with the
	// message outstanding.
	TrafficInterrupted = "interrupted"
)

// Traffic is a point's traffic phase: after every client of the point
// connected, each exchanged verified messages with the server for a
// fixed time. A load generator reports its own clients' Traffic; the
// runner merges them (Merge) and summarises the merge (Summarize).
// Nothing in it grows with the phase's duration: latencies and
// per-client counts are histograms.
type Traffic struct {
	Op       string `json:"op"`
	MsgBytes int    `json:"msg_bytes"`
	// Depth is the messages each client keeps outstanding (closed loop),
	// or at most has outstanding (open loop).
	Depth int `json:"depth"`
	// RatePerClient is the open loop's schedule per client (messages/s);
	// 0 is the closed loop.
	RatePerClient float64 `json:"rate_per_client,omitempty"`
	// DurationSec is the window messages were sent and counted in (the
	// longest generator's; shorter than asked when interrupted).
	DurationSec float64 `json:"duration_sec"`
	// MinDurationSec is the window's minimum (--traffic): the window
	// extends past it until every client is measured, up to a cap
	// (--traffic-max). Absent in runs before schema version 3.
	MinDurationSec float64 `json:"min_duration_sec,omitempty"`
	// Unmeasured clients completed fewer than client.MinMessages (one)
	// messages inside the window (a completion after it does not count):
	// the window's rates do not describe them, and the point cannot pass
	// its SLOs. Absent (not counted) in runs before schema version 3.
	Unmeasured int `json:"unmeasured,omitempty"`
	// UnmeasuredIDs are the lowest of the unmeasured clients' IDs, at
	// most MaxUnmeasuredIDs.
	UnmeasuredIDs []int `json:"unmeasured_ids,omitempty"`
	// SampleT is when the phase started on the clock of the point's
	// collector samples (Sample.T), so the samples taken during it can be
	// told apart.
	SampleT float64 `json:"sample_t,omitempty"`
	// Clients took part; ClientsFailed of them ended with an error.
	Clients       int `json:"clients"`
	ClientsFailed int `json:"clients_failed,omitempty"`
	// Messages verified (a SEND counts once its echo verified) and their
	// payload bytes.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Answered of them were sent by the provider's own loop (one client,
	// depth 1, --busy-poll on verbs: fabric.Pinger, in C), from the poll
	// that found the echo before them; their round trips run between
	// that loop's clock readings, as perftest's do.
	Answered int64 `json:"answered,omitempty"`
	// Errors counts failed clients by what ended them: a completion
	// status (fabric.WCStatus.Name) or one of the Traffic* classes.
	Errors map[string]int64 `json:"errors,omitempty"`
	// ErrorText keeps one error message per class, for the report.
	ErrorText map[string]string `json:"error_text,omitempty"`
	// Open loop: messages due in the phase, sent late by the generator
	// (a slot was free but the generator got to it an interval or more
	// after its time: k6's dropped iterations), sent late because depth
	// messages were outstanding, and never sent.
	Schedule *Schedule `json:"schedule,omitempty"`
	// GeneratorCPU is the busiest generator's CPU time during the phase
	// per second, in cores, and GeneratorCores what it could use
	// (GOMAXPROCS).
	GeneratorCPU   float64 `json:"generator_cpu_cores"`
	GeneratorCores int     `json:"generator_cores"`
	// GeneratorSys is the part of that generator's GeneratorCPU in the
	// kernel (system time): on a software device such as rxe, the
	// device's own work done inside the posting calls.
	GeneratorSys float64 `json:"generator_sys_cores,omitempty"`
	// GeneratorSpin is the part of that generator's GeneratorCPU its
	// busy-polling loops spent polling empty CQs (0 = none, or not
	// counted): a busy-polled generator uses its CPU whether it has work
	// or not, and only the rest says whether it was the limit.
	GeneratorSpin float64 `json:"generator_spin_cores,omitempty"`
	// ServerCPU is the server process's CPU during the phase, in cores
	// (0 = unknown): the built-in server's own reading at the phase's
	// start and end, or another server's process on the runner's host.
	ServerCPU float64 `json:"server_cpu_cores,omitempty"`
	// ServerSpin is the part of ServerCPU the built-in server's
	// busy-polling loops spent polling empty CQs (0 = none, or not
	// known): like GeneratorSpin, CPU used whether there was work or not.
	ServerSpin float64 `json:"server_spin_cores,omitempty"`
	// ServerSys is the part of ServerCPU in the kernel (system time), as
	// GeneratorSys is of the generator's.
	ServerSys float64 `json:"server_sys_cores,omitempty"`
	// HostCPU is the CPU the machine the server ran on used during the
	// phase, in cores, every process and the kernel together (for the
	// vm backend the guest's); HostSoftirq the part of it in softirq,
	// the kernel's deferred work that no process is charged for: on
	// Soft-RoCE, rxe's tasklets (in Linux 6.1 every UD send completes
	// through one). 0 = not read.
	HostCPU     float64 `json:"host_busy_cores,omitempty"`
	HostSoftirq float64 `json:"host_softirq_cores,omitempty"`

	// Latency holds the histogram's percentiles in microseconds; for a
	// SEND the round trip of the echo, for WRITE and READ the time to
	// the completion; in open loop timed from when the message was due.
	Latency LatencyUS `json:"latency_us"`
	// MsgRate and MBps are all clients together; PerClient is each
	// client's messages/s: min, median, max (fairness).
	MsgRate   float64 `json:"msg_per_sec"`
	MBps      float64 `json:"mb_per_sec"`
	PerClient Spread  `json:"per_client_msg_per_sec"`
	// HarnessLimit, when set, says why the figures are the load
	// generators' limit rather than the server's.
	HarnessLimit string `json:"harness_limit,omitempty"`

	// LatencyHist (nanoseconds) and ClientHist (messages per client) are
	// what the figures above are computed from, kept so that runs can be
	// merged and re-summarised later.
	LatencyHist *hist.Hist `json:"latency_hist,omitempty"`
	ClientHist  *hist.Hist `json:"client_hist,omitempty"`

	// SLO holds the verdict of each of the run's objectives on this
	// point; SLOPassed is true when all held (and with none), and the
	// phase completed.
	SLO       []slo.Verdict `json:"slo,omitempty"`
	SLOPassed bool          `json:"slo_passed"`
	// Judged is set when the run's criterion is traffic: the point
	// passes only if SLOPassed.
	Judged bool `json:"judged,omitempty"`
	// Error is set when the phase itself failed (a generator died, the
	// run was interrupted); the figures hold what was collected.
	Error string `json:"error,omitempty"`
}

// Schedule is how an open-loop phase kept its schedule.
type Schedule struct {
	Due     int64 `json:"due"`
	Late    int64 `json:"late,omitempty"`    // the generator's lateness
	Blocked int64 `json:"blocked,omitempty"` // waited for an outstanding message
	Unsent  int64 `json:"unsent,omitempty"`
}

// LatencyUS are latency percentiles in microseconds.
type LatencyUS struct {
	N    int64   `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Spread is the minimum, median and maximum of a per-client figure.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Merge adds another generator's traffic to t: counts add up,
// histograms merge, the duration is the longer, the CPU the busier.
func (t *Traffic) Merge(o Traffic) {
	if t.Op == "" {
		t.Op, t.MsgBytes, t.Depth, t.RatePerClient = o.Op, o.MsgBytes, o.Depth, o.RatePerClient
	}
	t.DurationSec = max(t.DurationSec, o.DurationSec)
	t.MinDurationSec = max(t.MinDurationSec, o.MinDurationSec)
	t.Unmeasured += o.Unmeasured
	for _, id := range o.UnmeasuredIDs {
		t.addUnmeasuredID(id)
	}
	t.Clients += o.Clients
	t.ClientsFailed += o.ClientsFailed
	t.Messages += o.Messages
	t.Answered += o.Answered
	t.Bytes += o.Bytes
	for k, v := range o.Errors {
		if t.Errors == nil {
			t.Errors = map[string]int64{}
		}
		t.Errors[k] += v
	}
	for k, v := range o.ErrorText {
		if t.ErrorText == nil {
			t.ErrorText = map[string]string{}
		}
		if _, ok := t.ErrorText[k]; !ok {
			t.ErrorText[k] = v
		}
	}
	if o.Schedule != nil {
		if t.Schedule == nil {
			t.Schedule = &Schedule{}
		}
		t.Schedule.Due += o.Schedule.Due
		t.Schedule.Late += o.Schedule.Late
		t.Schedule.Blocked += o.Schedule.Blocked
		t.Schedule.Unsent += o.Schedule.Unsent
	}
	if o.GeneratorCores > 0 && (t.GeneratorCores == 0 || o.generatorWork()/float64(o.GeneratorCores) > t.generatorWork()/float64(t.GeneratorCores)) {
		t.GeneratorCPU, t.GeneratorCores, t.GeneratorSpin, t.GeneratorSys = o.GeneratorCPU, o.GeneratorCores, o.GeneratorSpin, o.GeneratorSys
	}
	t.LatencyHist = mergeHist(t.LatencyHist, o.LatencyHist, hist.Latency)
	t.ClientHist = mergeHist(t.ClientHist, o.ClientHist, hist.Counts)
	if t.Error == "" {
		t.Error = o.Error
	}
}

// MaxUnmeasuredIDs bounds Traffic.UnmeasuredIDs: enough to find the
// clients in the records, and the file does not grow with the clients.
const MaxUnmeasuredIDs = 10

// AddUnmeasured counts client id as unmeasured.
func (t *Traffic) AddUnmeasured(id int) {
	t.Unmeasured++
	t.addUnmeasuredID(id)
}

// addUnmeasuredID keeps the lowest MaxUnmeasuredIDs IDs, in order.
func (t *Traffic) addUnmeasuredID(id int) {
	i := sort.SearchInts(t.UnmeasuredIDs, id)
	if i < len(t.UnmeasuredIDs) && t.UnmeasuredIDs[i] == id || i >= MaxUnmeasuredIDs {
		return
	}
	t.UnmeasuredIDs = append(t.UnmeasuredIDs, 0)
	copy(t.UnmeasuredIDs[i+1:], t.UnmeasuredIDs[i:])
	t.UnmeasuredIDs[i] = id
	if len(t.UnmeasuredIDs) > MaxUnmeasuredIDs {
		t.UnmeasuredIDs = t.UnmeasuredIDs[:MaxUnmeasuredIDs]
	}
}

// UnmeasuredText is the verdict on a phase with unmeasured clients, ""
// without: "not measured: 3 of 8 clients completed no message".
func (t *Traffic) UnmeasuredText() string {
	if t == nil || t.Unmeasured == 0 {
		return ""
	}
	return fmt.Sprintf("not measured: %d of %d clients completed no message", t.Unmeasured, t.Clients)
}

// UnmeasuredNames names the unmeasured clients by ID, "" without:
// "clients 3, 5, 9" or "clients 3, 5, … (first 10 of 4,000)".
func (t *Traffic) UnmeasuredNames() string {
	if t == nil || t.Unmeasured == 0 || len(t.UnmeasuredIDs) == 0 {
		return ""
	}
	ids := make([]string, len(t.UnmeasuredIDs))
	for i, id := range t.UnmeasuredIDs {
		ids[i] = fmt.Sprint(id)
	}
	s := "client"
	if t.Unmeasured > 1 {
		s += "s"
	}
	s += " " + strings.Join(ids, ", ")
	if t.Unmeasured > len(ids) {
		s += fmt.Sprintf(", … (the first %d of %d)", len(ids), t.Unmeasured)
	}
	return s
}

func mergeHist(into, from *hist.Hist, empty func() *hist.Hist) *hist.Hist {
	if from == nil {
		return into
	}
	if into == nil {
		into = empty()
	}
	into.Merge(from)
	return into
}

// Saturated is the share of its cores a generator may use before its
// figures are called the harness's limit.
const Saturated = 0.9

// LateShare is the share of due messages the generator may send late
// before the open loop's figures are called the harness's limit.
const LateShare = 0.01

// Summarize computes the figures from the counts and histograms: rates,
// percentiles, the per-client spread, and whether the generators were
// the limit.
func (t *Traffic) Summarize() {
	if t.DurationSec > 0 {
		t.MsgRate = float64(t.Messages) / t.DurationSec
		t.MBps = float64(t.Bytes) / t.DurationSec / 1e6
	}
	t.Latency = LatencyUS{}
	if h := t.LatencyHist; h != nil && h.Count() > 0 {
		us := func(v int64) float64 { return float64(v) / 1e3 }
		t.Latency = LatencyUS{N: h.Count(), Mean: h.Mean() / 1e3, P50: us(h.Quantile(0.5)),
			P90: us(h.Quantile(0.9)), P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Max())}
	}
	t.PerClient = Spread{}
	if h := t.ClientHist; h != nil && h.Count() > 0 && t.DurationSec > 0 {
		r := func(v int64) float64 { return float64(v) / t.DurationSec }
		t.PerClient = Spread{Min: r(h.Min()), Median: r(h.Quantile(0.5)), Max: r(h.Max())}
	}
	t.HarnessLimit = ""
	var why []string
	if t.GeneratorCores > 0 && t.generatorWork() >= Saturated*float64(t.GeneratorCores) {
		w := fmt.Sprintf("a load generator used %.2f of its %d cores", t.GeneratorCPU, t.GeneratorCores)
		if t.GeneratorSpin > 0 {
			w += fmt.Sprintf(", %.2f of them polling empty CQs", t.GeneratorSpin)
		}
		why = append(why, w)
	}
	if s := t.Schedule; s != nil && s.Due > 0 && float64(s.Late) > LateShare*float64(s.Due) {
		why = append(why, fmt.Sprintf("the generators sent %d of %d due messages an interval or more late", s.Late, s.Due))
	}
	if len(why) > 0 {
		t.HarnessLimit = why[0]
		for _, w := range why[1:] {
			t.HarnessLimit += "; " + w
		}
	}
}

// generatorWork is the busiest generator's CPU less what its
// busy-polling loops spent on empty CQs.
func (t *Traffic) generatorWork() float64 { return max(t.GeneratorCPU-t.GeneratorSpin, 0) }

// Failed reports whether the phase decides against its point: the run's
// criterion is traffic and the phase missed an SLO or did not complete.
func (t *Traffic) Failed() bool { return t != nil && t.Judged && !t.SLOPassed }

// Criteria a point is judged by (search --criterion).
const (
	// CriterionConnect: the clients connected at the threshold.
	CriterionConnect = "connect"
	// CriterionTraffic: and their traffic phase met the run's SLOs.
	CriterionTraffic = "traffic"
)

// Criteria lists the criteria.
var Criteria = []string{CriterionConnect, CriterionTraffic}

// TrafficSetup is the traffic phase a run's points ran.
type TrafficSetup struct {
	DurationSec   float64 `json:"duration_sec"`
	Op            string  `json:"op"`
	Depth         int     `json:"depth"`
	RatePerClient float64 `json:"rate_per_client,omitempty"`
	MsgTimeoutSec float64 `json:"msg_timeout_sec"`
	// MaxDurationSec caps the window's extension past DurationSec (its
	// minimum) until every client is measured (Traffic.Unmeasured); 0 in
	// runs before schema version 3, whose window was DurationSec.
	MaxDurationSec float64 `json:"max_duration_sec,omitempty"`
	// BusyPollUS is --busy-poll in microseconds (0: CQs slept on).
	BusyPollUS float64 `json:"busy_poll_us,omitempty"`
}

// ErrorCount is the number of failed clients, whatever the class.
func (t *Traffic) ErrorCount() int64 {
	var n int64
	for _, v := range t.Errors {
		n += v
	}
	return n
}

// ErrorClasses lists the error classes in a stable order: the most
// frequent first.
func (t *Traffic) ErrorClasses() []string {
	ks := make([]string, 0, len(t.Errors))
	for k := range t.Errors {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if t.Errors[ks[i]] != t.Errors[ks[j]] {
			return t.Errors[ks[i]] > t.Errors[ks[j]]
		}
		return ks[i] < ks[j]
	})
	return ks
}

// Figures are the inputs of the run's SLOs. Clients that could not take
// part in the phase (connected fewer than attempted) count as errors, so
// that "errors=0" also means "all held".
func (t *Traffic) Figures(missing int) slo.Figures {
	us := func(v float64) time.Duration { return time.Duration(v * 1e3) }
	return slo.Figures{P50: us(t.Latency.P50), P90: us(t.Latency.P90), P99: us(t.Latency.P99),
		P999: us(t.Latency.P999), Max: us(t.Latency.Max), Mean: us(t.Latency.Mean),
		Errors: t.ErrorCount() + int64(max(missing, 0)), Rate: t.MsgRate, ClientRate: t.PerClient.Min, MBps: t.MBps}
}
