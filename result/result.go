// Package result holds the run JSON schema: what a probe run saves under
// results/ and what reports are rendered from. Bump SchemaVersion on any
// change of a field's meaning, add the version's row to the table in
// docs/run-json.md, and keep Load able to read (or precisely refuse) older
// versions.
package result

import (
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// SchemaVersion is the version written by this build.
const SchemaVersion = 15

// Outcome classes of one client attempt.
const (
	OutcomeOK         = "ok"
	OutcomeRefused    = "refused-at-capacity"
	OutcomeTCPConnect = "tcp-connect"
	OutcomeTLS        = "tls"
	OutcomeExchange   = "exchange"
	OutcomeQPCreate   = "qp-create"
	OutcomeInit       = "INIT"
	OutcomeRTR        = "RTR"
	OutcomeRTS        = "RTS"
	OutcomeMessage    = "message"
	OutcomeTimeout    = "timeout"
	// OutcomeSharedFate is a logical client that did nothing wrong but
	// shares its QP (mux mode) with one whose message or echo failed, or
	// whose QP broke: the QP ended, and every logical client on it with
	// it.
	OutcomeSharedFate = "shared-fate"
	// OutcomeLost: a datagram or its echo never came back (ud mode: UD
	// is unreliable, and nothing retransmits).
	OutcomeLost = "lost"
	// OutcomeUnlaunched is a client its load generator never launched:
	// the point had already failed at a wall (Point.Unlaunched). It has
	// no record.
	OutcomeUnlaunched = "unlaunched"
)

// Outcome classes of a client command (--client-cmd): what the harness
// sees of a client it did not write. OutcomeOK and OutcomeTimeout are
// shared with the built-in client.
const (
	OutcomeExit     = "exit"            // an exit status other than 0
	OutcomeSignal   = "signal"          // ended by a signal not the harness's
	OutcomeMismatch = "output-mismatch" // exit 0, but no line matched --client-ok
	OutcomeStart    = "start"           // could not be started
)

// Outcome classes of an rdma_cm client (--client-kind rdmacm): the CM
// event that ended its attempt, named as rdma_cma.h names it.
// OutcomeOK, OutcomeQPCreate and OutcomeTimeout are shared.
const (
	OutcomeRejected     = "REJECTED"
	OutcomeUnreachable  = "UNREACHABLE"
	OutcomeConnectError = "CONNECT_ERROR"
	OutcomeAddrError    = "ADDR_ERROR"
	OutcomeRouteError   = "ROUTE_ERROR"
	// OutcomeDisconnected is a connection the server closed before the
	// generator's connections were all made.
	OutcomeDisconnected = "DISCONNECTED"
)

// Outcomes lists every outcome class in display order.
var Outcomes = []string{OutcomeOK, OutcomeRefused, OutcomeTCPConnect, OutcomeTLS,
	OutcomeExchange, OutcomeQPCreate, OutcomeInit, OutcomeRTR, OutcomeRTS,
	OutcomeMessage, OutcomeSharedFate, OutcomeTimeout, OutcomeLost, OutcomeUnlaunched, OutcomeExit, OutcomeSignal, OutcomeMismatch, OutcomeStart,
	OutcomeRejected, OutcomeUnreachable, OutcomeConnectError, OutcomeAddrError, OutcomeRouteError, OutcomeDisconnected}

// ClientRDMACM is Config.ClientKind of rdma_cm clients: RC connections
// made through librdmacm; a traffic phase (Config.Traffic) only against
// a server that echoes (--cm-server-echoes).
const ClientRDMACM = "rdmacm"

// Connection phases timed per client, in order.
const (
	PhaseTCP      = "tcp"
	PhaseTLS      = "tls"
	PhasePSN      = "psn"
	PhaseQPCreate = "qp_create"
	PhaseInit     = "init"
	PhaseExchange = "exchange"
	PhaseRTR      = "rtr"
	PhaseRTS      = "rts"
	PhaseFirstRTT = "first_rtt"
	// An rdma_cm client's steps, as cmtime times them (qp_create too):
	// address and route resolved, then connect → ESTABLISHED.
	PhaseResolveAddr  = "resolve_addr"
	PhaseResolveRoute = "resolve_route"
	PhaseEstablish    = "establish"
)

// Phases lists the phases in connection order, of either kind of client.
var Phases = []string{PhaseResolveAddr, PhaseResolveRoute, PhaseTCP, PhaseTLS, PhasePSN, PhaseQPCreate, PhaseInit, PhaseExchange, PhaseRTR, PhaseRTS, PhaseEstablish, PhaseFirstRTT}

// BuiltinPhases are the phases a built-in client times, in order.
var BuiltinPhases = []string{PhaseTCP, PhaseTLS, PhasePSN, PhaseQPCreate, PhaseInit, PhaseExchange, PhaseRTR, PhaseRTS, PhaseFirstRTT}

// PhaseBounds are the upper bounds (inclusive, in seconds) of the
// buckets a generator counts its clients' connect phases in while a
// point runs: 100 µs doubling to 52 s, then one bucket for the rest.
var PhaseBounds = func() []float64 {
	b := make([]float64, 20)
	for i := range b {
		b[i] = 0.0001 * float64(uint(1)<<i)
	}
	return b
}()

// PhaseBucket is the bucket of PhaseBounds a phase of us microseconds
// falls in; len(PhaseBounds) for one past the last bound.
func PhaseBucket(us int64) int {
	sec := float64(us) / 1e6
	for i, b := range PhaseBounds {
		if sec <= b {
			return i
		}
	}
	return len(PhaseBounds)
}

// Run is one saved run (run.json).
type Run struct {
	SchemaVersion int         `json:"schema_version"`
	Tool          string      `json:"tool"`
	ToolVersion   string      `json:"tool_version"`
	Command       []string    `json:"command"`
	Mode          string      `json:"mode"` // "search", "ramp"
	StartedAt     time.Time   `json:"started_at"`
	FinishedAt    time.Time   `json:"finished_at,omitempty"`
	Backend       Backend     `json:"backend"`
	Environment   Environment `json:"environment"`
	Config        Config      `json:"config"`
	// Target names the server under test and the clients when they are
	// commands of the operator's, not rdmaprobe's own (absent then).
	Target *Target `json:"target,omitempty"`
	Points []Point `json:"points"`
	// Interrupted is the point the run was measuring when it stopped
	// early, with what it measured so far (Point.Interrupted); nil when
	// the run stopped between points or did not stop early.
	Interrupted *Point   `json:"interrupted_point,omitempty"`
	Search      *Search  `json:"search,omitempty"`
	PSN         PSNCheck `json:"psn_check"`
	// Hosts are the machines the load generators ran on, when not this
	// one (--hosts, Slurm); each point has their figures (Point.Hosts).
	Hosts []Host `json:"hosts,omitempty"`
	// ServerHost is the machine the server ran on, when not this one
	// (--server-host).
	ServerHost *Host `json:"server_host,omitempty"`
	// Limits are read once at the start of the run.
	Limits *Limits `json:"limits,omitempty"`
	// Diagnosis is the limiting factor at the breaking point.
	Diagnosis *Diagnosis `json:"diagnosis,omitempty"`
	// Complete is false while a run is in progress or when it was
	// interrupted; Error says why it stopped early, and starts with
	// NotStarted when the run never measured a point because it could
	// not start.
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
	// Designs are each server design's search and findings, in
	// Config.Designs' order, when the run measured several (--mode with
	// a list); Search and Diagnosis above are then absent, since each
	// design has its own.
	Designs []Design `json:"designs,omitempty"`
	// Verdict is the run's answer, derived from its points by
	// analysis.Conclude, the one function every view states.
	Verdict *Verdict `json:"verdict,omitempty"`
}

// Design is what one server design (resource mode) of a run that
// measured several reached: its search, the largest count it held by
// each criterion among the counts tested (analysis.Capacity), and what
// limited it.
type Design struct {
	Mode   string  `json:"mode"`
	Search *Search `json:"search,omitempty"`
	// MaxConnected is the largest count that connected at the threshold
	// with every smaller tested count; MaxSustainable the largest whose
	// traffic phase also met the SLOs, 0 when no traffic phase ran.
	MaxConnected   int `json:"max_connected"`
	MaxSustainable int `json:"max_sustainable,omitempty"`
	// Diagnosis is the limiting factor at LimitAt clients, nil when no
	// point of the design failed.
	Diagnosis *Diagnosis `json:"diagnosis,omitempty"`
	LimitAt   int        `json:"limit_at,omitempty"`
}

// NotStarted begins the Error of a run that could not start (a guest
// that did not boot): such a run has no points.
const NotStarted = "not started: "

// Backend says where the QPs came from.
type Backend struct {
	Name      string `json:"name"` // "sim", "verbs", "vm"
	Simulated bool   `json:"simulated"`
	// Reason is why --backend auto picked it (or "requested").
	Reason string `json:"reason"`
	// Description is the one-line label used in titles, e.g.
	// "vm: rxe0 on Linux 6.1 (Soft-RoCE, QEMU TCG qemu64, 2 vCPU, 8 GiB)".
	Description string `json:"description"`
}

// Environment describes the machine the points ran on.
type Environment struct {
	Hostname    string      `json:"hostname"`
	OS          string      `json:"os"`
	Kernel      string      `json:"kernel"`
	Arch        string      `json:"arch"`
	CPUs        int         `json:"cpus"`
	MemoryBytes uint64      `json:"memory_bytes"`
	GoVersion   string      `json:"go_version"`
	Device      *DeviceInfo `json:"device,omitempty"`
	// Guest is the environment inside the VM for the vm backend; the
	// fields above then describe the host.
	Guest *Environment `json:"guest,omitempty"`
	// Reference holds an independent tool's figures on the same device.
	Reference *Reference `json:"reference,omitempty"`
	// DataPath holds independent tools' figures for the traffic phase's
	// data path on the same device at the run's message size (perftest's
	// ib_send_lat and ib_send_bw in the Soft-RoCE guest).
	DataPath []Reference `json:"data_path_reference,omitempty"`
}

// DeviceInfo is the device the server used.
type DeviceInfo struct {
	Name string          `json:"name"`
	Caps fabric.Caps     `json:"caps"`
	Port fabric.PortInfo `json:"port"`
}

// Reference is the output of an independent tool run on the device.
type Reference struct {
	Tool    string `json:"tool"`
	Command string `json:"command"`
	// Where names where the tool ran, its two sides: "in one guest, rxe0
	// over its loopback", or across the link between the generators'
	// guest and the server's, or "server host A ↔ generator host B"
	// with --hosts on the verbs backend. Empty in runs before schema
	// version 4, whose references all ran in one guest.
	Where   string             `json:"where,omitempty"`
	Figures map[string]float64 `json:"figures,omitempty"`
	Output  string             `json:"output,omitempty"`
	Error   string             `json:"error,omitempty"`
	// Absent: the tool was not on one side's PATH, so it did not run
	// there; Error says which host lacks it.
	Absent bool `json:"absent,omitempty"`
	// When a data-path reference ran: ReferenceBefore the run's points
	// (also when empty, in runs before it was recorded),
	// ReferenceAfter them, so a drifting host shows in the comparison,
	// or ReferencePoint (just before one point).
	When string `json:"when,omitempty"`
	// Transport is the perftest connection type the tool ran (its -c):
	// TransportUD for the yardstick of ud mode's datagrams, empty for RC,
	// perftest's default and every reference before schema version 8.
	Transport string `json:"transport,omitempty"`
}

// TransportUD is Reference.Transport of a perftest run with -c UD.
const TransportUD = "UD"

// TransportOf is the perftest transport that is the yardstick of
// server design mode: UD for ud mode's datagrams, RC ("") for the
// designs whose clients hold an RC QP.
func TransportOf(mode string) string {
	if mode == designUD {
		return TransportUD
	}
	return ""
}

// Reference.When values.
const (
	ReferenceBefore = "before"
	ReferenceAfter  = "after"
	// ReferencePoint: just before one point (Point.LatencyReference).
	ReferencePoint = "point"
)

// Config is what the points were run with.
type Config struct {
	ResourceMode  string       `json:"resource_mode"` // "per-client", "shared-cq"; the list as given ("per-client,srq") when several
	Rounds        int          `json:"rounds"`        // verified round trips per client
	PayloadBytes  int          `json:"payload_bytes"`
	ClientTimeout float64      `json:"client_timeout_sec"`
	Rate          float64      `json:"rate_per_sec,omitempty"` // launch pacing, 0 = all at once
	Procs         int          `json:"procs"`                  // load-generator processes
	InFlight      int          `json:"inflight,omitempty"`     // connect attempts in progress per generator, 0 = unbounded
	WallStop      int          `json:"wall_stop,omitempty"`    // a generator stopped launching after this many resource refusals in a row once the point had failed (Point.Unlaunched); 0 = launched every client
	TLSResume     bool         `json:"tls_resume,omitempty"`   // clients of a generator resumed TLS sessions
	Detach        bool         `json:"detach,omitempty"`       // the server closed each client's control connection once accepted; clients left with a goodbye over their QP
	TLSKex        string       `json:"tls_kex,omitempty"`      // handshake key exchange: "hybrid" (X25519MLKEM768) or "x25519"; empty in runs before it was recorded
	GoMaxProcs    string       `json:"gomaxprocs,omitempty"`   // "split": server and generators share the CPUs; "all": each sized to every CPU; empty in runs before it was recorded (= all)
	Threshold     float64      `json:"threshold"`
	Trials        int          `json:"trials"`
	Lo            int          `json:"lo,omitempty"`
	Hi            int          `json:"hi,omitempty"`
	RampClients   []int        `json:"ramp_clients,omitempty"`
	MaxClients    int          `json:"max_clients,omitempty"` // server cap; 0 = the probe point's N
	Mux           int          `json:"mux,omitempty"`         // mux mode: logical clients per QP
	SimCaps       *fabric.Caps `json:"sim_caps,omitempty"`
	// Designs are the server designs (resource modes) a run measured in
	// turns, when --mode named more than one (Run.Designs).
	Designs []string `json:"designs,omitempty"`
	// Launcher is how the load generators were started on other hosts
	// ("ssh", "slurm"; empty: on this one), and ServerAddr the address
	// the server listened on for them.
	Launcher   string `json:"launcher,omitempty"`
	ServerAddr string `json:"server_addr,omitempty"`
	// ClientKind is the clients' kind when not rdmaprobe's own TLS
	// clients: ClientRDMACM (absent: built-in, or Target's commands).
	ClientKind string `json:"client_kind,omitempty"`
	// CMSteps is --cm-steps of rdma_cm clients: auto, lockstep or
	// interleaved (each point's CMSteps says which auto chose).
	CMSteps string `json:"cm_steps,omitempty"`
	// Traffic is the phase each point ran once its clients connected
	// (absent: none); SLO the objectives its points were checked
	// against, and Criterion what a point had to meet to pass
	// (CriterionConnect when empty).
	Traffic   *TrafficSetup `json:"traffic,omitempty"`
	SLO       string        `json:"slo,omitempty"`
	Criterion string        `json:"criterion,omitempty"`
	// Require is --require as given ("300", "300:traffic"; absent
	// without one): the run's verdict says whether it was met.
	Require string `json:"require,omitempty"`
}

// Calibration is how fast the machine ran around a point: serial mutual
// TLS 1.3 handshakes per second, both ends in the runner's process over an
// in-memory pipe, with the run's certificates (certs.HandshakeRate). On a
// host whose speed moves (a TCG guest on a shared or nested machine) the
// connect rate moves with it, and the connect rate divided by HS
// compares trials taken at different host speeds.
type Calibration struct {
	WindowSec float64 `json:"window_sec"`
	// BeforeHS is measured just before the server starts, AfterHS just
	// after the last client's outcome (clients connected and idle); 0 if
	// that reading failed.
	BeforeHS float64 `json:"before_hs_per_sec,omitempty"`
	AfterHS  float64 `json:"after_hs_per_sec,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// HS is the mean of the readings taken, 0 without any.
func (c *Calibration) HS() float64 {
	if c == nil {
		return 0
	}
	switch {
	case c.BeforeHS > 0 && c.AfterHS > 0:
		return (c.BeforeHS + c.AfterHS) / 2
	case c.BeforeHS > 0:
		return c.BeforeHS
	}
	return c.AfterHS
}

// Point is one trial at one client count.
type Point struct {
	Clients int `json:"clients"`
	// Design is the server design (resource mode) the point ran; empty
	// in runs before schema version 5, whose points all ran
	// Config.ResourceMode.
	Design string `json:"design,omitempty"`
	Trial  int    `json:"trial"`
	// Cumulative marks a staircase's step (ramp --staircase): its
	// clients were added on top of those the earlier steps of its climb
	// still held, and it counts every client held at once. Attempted,
	// Connected, Outcomes and Clients are then the climb's totals so
	// far, but Records holds only the clients this step added (the
	// earlier steps hold theirs). Absent on a fresh point, whose server
	// and clients all started for it, and in every run before schema
	// version 13.
	Cumulative bool `json:"cumulative,omitempty"`
	// Held is, on a staircase's step, how many clients the earlier steps
	// held connected when it began: Connected − Held connected in this
	// step, over its ConnectSec.
	Held        int       `json:"held,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	DurationSec float64   `json:"duration_sec"`
	// ConnectSec is the time from launching the first client to the last
	// client's outcome: Connected/ConnectSec is the connection rate.
	// The load generators start (and open their device) before the clock
	// starts; a version-1 run without StartupSec counted their start-up
	// in ConnectSec.
	ConnectSec float64 `json:"connect_sec,omitempty"`
	// StartupSec is the time from starting the server to launching the
	// first client: the server's and the load generators' start-up, side
	// by side.
	StartupSec float64 `json:"startup_sec,omitempty"`
	// Calibration is the machine's speed just before and just after the
	// point (runner.CalibrationWindow); absent with calibration off and
	// in the version-1 runs saved before it was recorded.
	Calibration *Calibration `json:"calibration,omitempty"`
	// LatencyReference is perftest's latency tool (Environment.DataPath's,
	// When ReferencePoint) run on the same device at the same message
	// size just before this point's clients: the vm backend takes it for
	// each 1-client point with a traffic phase, whose latency it sets
	// beside its own in turns. Absent elsewhere and in the version-1 runs
	// saved before it was recorded.
	LatencyReference *Reference `json:"latency_reference,omitempty"`
	// Attempted counts the clients the point accounts for: those with a
	// record and the Unlaunched.
	Attempted int `json:"attempted"`
	Connected int `json:"connected"`
	// Unlaunched counts clients the load generators never launched
	// because the point had already failed at a wall (--wall-stop): more
	// failures than --threshold allows, the last of them that many
	// resource refusals in a row (WallRefusal). They have no records;
	// Outcomes counts them as OutcomeUnlaunched and Attempted includes
	// them, so the success rate is still over every client asked for.
	Unlaunched int `json:"unlaunched,omitempty"`
	// QPs is how many QPs the connected clients rode in mux mode, where
	// they are logical clients and up to Config.Mux share one (a QP is
	// a generator's local QPN); absent in other modes: one QP each.
	QPs int `json:"qps,omitempty"`
	// CMSteps is how the rdma_cm clients' generators stepped their
	// connections at this point: lockstep, interleaved, or mixed when
	// --cm-steps auto chose differently for generators of different
	// sizes (protocol.CMClient.Lockstep).
	CMSteps string `json:"cm_steps,omitempty"`
	// TLSResumed counts clients whose TLS handshake resumed a session.
	TLSResumed  int     `json:"tls_resumed,omitempty"`
	SuccessRate float64 `json:"success_rate"` // 0..1
	CILow       float64 `json:"ci_low"`       // 95% Wilson
	CIHigh      float64 `json:"ci_high"`
	Passed      bool    `json:"passed"` // success rate reached the threshold
	// Outcomes counts clients by outcome class.
	Outcomes map[string]int `json:"outcomes"`
	// Errors counts the distinct error texts of failed clients (top ones).
	Errors map[string]int `json:"errors,omitempty"`
	// Phases holds per-phase duration percentiles in milliseconds.
	Phases map[string]Percentiles `json:"phases"`
	// Connect is the total connect time (TCP start to first verified round
	// trip) in milliseconds.
	Connect Percentiles `json:"connect_ms"`
	// RTT is the message round-trip time in microseconds.
	RTT    Percentiles `json:"rtt_us"`
	Server ServerStats `json:"server"`
	// Records are the clients' attempts, saved as columns
	// (RecordColumns) since schema version 15, an array of
	// ClientRecord before.
	Records Records `json:"records,omitempty"`
	// Error is set when the point itself failed (server died, generator
	// crashed); the counts above then hold what was collected.
	Error string `json:"error,omitempty"`
	// Interrupted is set on a point cut short in any phase (Ctrl-C, a
	// dead guest; Error says which): while its clients connected,
	// during its traffic phase or while they were held. Attempted and
	// Connected are how far it got, of Clients, and the samples run to
	// where it stopped. A client cut short has no record. Such a point
	// is no measurement of its client count: the run keeps it apart
	// (Run.Interrupted) and no verdict counts it.
	Interrupted bool `json:"interrupted,omitempty"`

	// Samples are the collectors' readings through the point; Peak
	// summarises them. SamplerErrors are collectors that failed (the
	// point went on without them).
	Samples       []Sample `json:"samples,omitempty"`
	Peak          *Peak    `json:"peak,omitempty"`
	SamplerErrors []string `json:"sampler_errors,omitempty"`
	// DeviceCounters are the device port's own counters before and after
	// the point (absent where none could be read, and before schema
	// version 9).
	DeviceCounters *DeviceCounters `json:"device_counters,omitempty"`
	// KernelMemory is the machine's memory by the kernel's account
	// before, at full load and after the point, and its OOM kills
	// (absent off Linux and before schema version 13).
	KernelMemory *KernelMemory `json:"kernel_memory,omitempty"`
	// Limits are the limits in force when the server was up; LimitsAfter
	// are re-read at the end of a failed point (listen counters move).
	Limits      *Limits `json:"limits,omitempty"`
	LimitsAfter *Limits `json:"limits_after,omitempty"`
	// Cost is the per-client resource cost; Diagnosis names the limit
	// that stopped a failed point.
	Cost      *Cost      `json:"cost,omitempty"`
	Diagnosis *Diagnosis `json:"diagnosis,omitempty"`

	// Traffic is the traffic phase run once every client was connected
	// (absent when the phase was off).
	Traffic *Traffic `json:"traffic,omitempty"`

	// Target is the server command as this point ran it (Run.Target).
	Target *TargetPoint `json:"target,omitempty"`
	// Hosts are the load-generator hosts' shares of the point, when the
	// generators ran on other hosts (Run.Hosts).
	Hosts []HostPoint `json:"hosts,omitempty"`
}

// Percentiles summarises a sample.
type Percentiles struct {
	N    int     `json:"n"`
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// ServerStats is the server's own view of a point.
type ServerStats struct {
	Accepted   int `json:"accepted"`
	Connected  int `json:"connected"` // clients that reached RTS
	Refused    int `json:"refused"`   // at capacity
	PeakActive int `json:"peak_active"`
	// PeakQPs is the most QPs the server held at once for its logical
	// clients in mux mode, which PeakActive counts (absent in other
	// modes, where each client is one QP).
	PeakQPs int `json:"peak_qps,omitempty"`
	// PeakAHs is the most address handles the server held at once in ud
	// mode, by its own count: the kernel's resource tracking counts no
	// AHs (absent in other modes and before schema version 6).
	PeakAHs int `json:"peak_ahs,omitempty"`
	// Resources are the fabric objects the server held at its peak
	// ("qp", "cq", "mr", "pd"), as the fabric counts them.
	Resources map[string]int `json:"resources,omitempty"`
	Failures  map[string]int `json:"failures,omitempty"` // by outcome class
	Errors    map[string]int `json:"errors,omitempty"`
	Released  int            `json:"released"` // clients whose resources were freed
	// Detached: the server closed each client's control connection once
	// accepted (--detach); Goodbyes counts the clients it released on
	// their goodbye over the QP.
	Detached bool `json:"detached,omitempty"`
	Goodbyes int  `json:"goodbyes,omitempty"`
	// MapCounts is how many times the server counted its memory
	// mappings (/proc/self/maps) to stay clear of vm.max_map_count;
	// absent in runs before it was recorded.
	MapCounts int `json:"map_counts,omitempty"`
	// PSNEpochs counts the keys the server's PSN permutation used: past
	// 1, it had issued all 2^24 PSNs of an epoch and drew a new key.
	PSNEpochs int    `json:"psn_epochs,omitempty"`
	ExitError string `json:"exit_error,omitempty"`
	// DeviceCounters are the counts of a device that keeps its own
	// (fabric.CounterReader: the sim's simulated one) since the server
	// opened it; the runner moves them to Point.DeviceCounters.
	DeviceCounters map[string]uint64 `json:"device_counters,omitempty"`
}

// ClientRecord is one client attempt.
type ClientRecord struct {
	ID      int    `json:"id"`
	Proc    int    `json:"proc"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	Errno   string `json:"errno,omitempty"`
	// PhasesUS holds each completed phase's duration in microseconds,
	// indexed as Phases.
	PhasesUS  map[string]int64 `json:"phases_us,omitempty"`
	ConnectUS int64            `json:"connect_us,omitempty"`
	RTTsUS    []float64        `json:"rtts_us,omitempty"`
	// TLSResumed is true when the handshake resumed a session (--tls-resume).
	TLSResumed bool   `json:"tls_resumed,omitempty"`
	LocalQPN   uint32 `json:"local_qpn,omitempty"`
	// Logical is the client's logical ID on LocalQPN, which it shares
	// with other logical clients (mux mode; absent otherwise).
	Logical   uint32 `json:"logical,omitempty"`
	RemoteQPN uint32 `json:"remote_qpn,omitempty"`
	LocalPSN  uint32 `json:"local_psn,omitempty"`
	RemotePSN uint32 `json:"remote_psn,omitempty"`
	// Command is what a client command did (--client-cmd); its
	// ConnectUS is then spawn → the ok line (or exit), process start
	// included, and no phase is timed.
	Command *CommandRecord `json:"command,omitempty"`
}

// CommandRecord is one client command's end.
type CommandRecord struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// HarnessLimit marks a client the harness could not start (fork or
	// exec failed with EAGAIN, EMFILE, ENFILE or ENOMEM): the harness's
	// own limit, which says nothing about the server.
	HarnessLimit bool    `json:"harness_limit,omitempty"`
	DurationMS   float64 `json:"duration_ms"`
	// Tail is the end of its output (failed clients only).
	Tail        string `json:"tail,omitempty"`
	OutputBytes int64  `json:"output_bytes,omitempty"`
}

// Target is a server under test and clients that are commands of the
// operator's (--server-cmd, --client-cmd).
type Target struct {
	// Server is the server command's argv template, BuildCommand the
	// one run once per distinct N (--server-build); Port is a fixed port
	// (--server-port), Ready the output line that says it is ready
	// (--server-ready; else its port listening).
	Server       []string `json:"server,omitempty"`
	BuildCommand []string `json:"build,omitempty"`
	Port         int      `json:"port,omitempty"`
	Ready        string   `json:"ready,omitempty"`
	// Client is the client command's argv template, with its stdin, the
	// output line that says it is connected (--client-ok) and how "N at
	// once" was counted: "held" (every client kept until all had printed
	// their ok line) or "launched" (N started together, each doing its
	// work and exiting: the server need not have held N at once).
	Client      []string `json:"client,omitempty"`
	ClientStdin string   `json:"client_stdin,omitempty"`
	ClientOK    string   `json:"client_ok,omitempty"`
	Counting    string   `json:"counting,omitempty"`
	// Dirs are --target-dir directories shipped to the guest.
	Dirs []string `json:"dirs,omitempty"`
	// Binaries are the SHA-256 of the programs the commands name, by
	// path, read when the run started (built programs: see each point).
	Binaries map[string]string `json:"binaries,omitempty"`
	// Device and Addr are the RDMA device the run counted resources on
	// and the address clients dialled ({device}, {addr}).
	Device string `json:"device,omitempty"`
	Addr   string `json:"addr,omitempty"`
}

// TargetPoint is what a point's target command was.
type TargetPoint struct {
	// Argv is the server command as run; PID its process.
	Argv []string `json:"argv"`
	PID  int      `json:"pid,omitempty"`
	// Build is the build for this N: its directory, whether it was
	// cached, how long it took, and the SHA-256 of what it produced.
	Build *Build `json:"build,omitempty"`
	// Exit is how the server ended: "exit status 0", "killed by SIGKILL
	// after ignoring SIGTERM for 10s"; Tail its last output.
	Exit string `json:"exit,omitempty"`
	Tail string `json:"tail,omitempty"`
	// Errors are the distinct lines of its output that name an errno
	// (by name or by text), at most 5, e.g. "rdma_create_qp: Invalid
	// argument"; Errnos their names.
	Errors []string `json:"errors,omitempty"`
	Errnos []string `json:"errnos,omitempty"`
	// Processes counts the server's tree (itself, workers) at the
	// end of the point; Left lists processes that could not be ended.
	Processes int   `json:"processes,omitempty"`
	Left      []int `json:"left,omitempty"`
}

// Build is one run of --server-build.
type Build struct {
	Argv        []string          `json:"argv"`
	Dir         string            `json:"dir"`
	Key         string            `json:"key"`
	Cached      bool              `json:"cached"`
	DurationSec float64           `json:"duration_sec"`
	Outputs     map[string]string `json:"outputs,omitempty"` // file → SHA-256
	Tail        string            `json:"tail,omitempty"`
}

// Search records how a search ran and what it concluded.
type Search struct {
	Steps []Step `json:"steps"`
	// Capacity is the largest N whose points all passed, 0 if none did.
	Capacity int `json:"capacity"`
	// AboveHi is true when every tested N up to Hi passed ("capacity > hi").
	AboveHi bool `json:"above_hi"`
	// FirstFail is the smallest N that failed, 0 if none.
	FirstFail int `json:"first_fail"`
	// NonMonotonic lists N that failed while a larger N passed.
	NonMonotonic []int `json:"non_monotonic,omitempty"`
	// Verdict is the search's own sentence, in runs saved before
	// version 12 only: since then the run's answer is Run.Verdict alone.
	Verdict string `json:"verdict,omitempty"`
	// ResolutionClients or ResolutionPercent (of Capacity) is how narrow
	// the bracket [Capacity, FirstFail] had to be for the search to stop
	// (--resolution); both 0 means adjacent counts, as in runs before
	// they were recorded.
	ResolutionClients int     `json:"resolution_clients,omitempty"`
	ResolutionPercent float64 `json:"resolution_percent,omitempty"`
}

// Step is one decision of the search, in order.
type Step struct {
	Clients int     `json:"clients"`
	Trials  int     `json:"trials"`
	Passed  bool    `json:"passed"`
	Rate    float64 `json:"rate"`
	Note    string  `json:"note,omitempty"`
	// Reason says why this count was chosen, from what the earlier
	// points showed ("held 15,821 at once at 16,000 (…): test
	// 15,821"); empty in runs before it was recorded.
	Reason string `json:"reason,omitempty"`
}

// PSNCheck records whether the PSNs of a run's connections were unique.
// Each PSN is 24 random bits, so single values repeat by the birthday
// bound once a run has thousands of connections; what identifies a
// connection's sequence space is the (client PSN, server PSN) pair, and
// that must never repeat.
type PSNCheck struct {
	// Connections counts RC connections: in mux mode a QP, however many
	// logical clients ride it, since they share its PSNs.
	Connections    int  `json:"connections"`
	DistinctPairs  int  `json:"distinct_pairs"`
	DuplicatePairs int  `json:"duplicate_pairs"`
	Unique         bool `json:"unique"`
	// RepeatedPSNs counts single PSN values drawn more than once, and
	// ExpectedRepeats what uniform 24-bit draws give on average.
	RepeatedPSNs    int     `json:"repeated_psns"`
	ExpectedRepeats float64 `json:"expected_repeats"`
}

// ConnectedHere is how many clients connected in this point's own
// connect phase: all of Connected for a fresh point, those a
// staircase's step added on top of the Held for a step.
func (p Point) ConnectedHere() int {
	if p.Cumulative {
		return max(0, p.Connected-p.Held)
	}
	return p.Connected
}
