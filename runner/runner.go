// Package runner runs one probe point from the parent's side: it starts
// the server under test and the load generators, releases the clients
// together, collects and validates their outcomes, stops everything and
// reaps every process.
//
// # The seam
//
// A point is three choices, what runs, where the server is and where
// the clients are, and each has its own type here:
//
//   - the workload: Spec, one JSON-serialisable value (client count
//     aside) that says what a point does wherever it runs. The children
//     get their part of it as one JSON line on their stdin
//     (protocol.ServerSpec, protocol.GeneratorSpec), so a new option is
//     one struct field, not an edit of argv in several places;
//   - the target, the server under test: Target starts it for a point,
//     says when it is ready and stops it; a Server is what the point
//     loop sees of it. target_builtin.go runs rdmaprobe's own `serve`,
//     target_command.go a server command of the operator's;
//   - the placement of the load generators: Launcher makes the command
//     of one generator process. launch_local.go runs it on this machine;
//     package launch places them on other hosts, over SSH or under
//     Slurm's srun.
//
// Local runs points with one Target and one Launcher; it is a Runner,
// which is all the session above needs. Package vm is the other Runner:
// it runs each point inside a Soft-RoCE QEMU guest, where a Local does
// the work.
//
// # Who runs what
//
// This package is the parent's side only. The code that runs inside the
// processes it starts (`serve`, `clients`, `hostinfo`) is package child;
// the protocol between the two (specs on stdin, JSON events on stdout,
// see protocol.Event) is package protocol, which both import and which
// works over any pipe, a remote shell's included. The guest's PID 1,
// which answers package vm from inside the guest, is package guestagent.
package runner

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/client/rdmacm"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// Runner runs probe points somewhere.
type Runner interface {
	// RunPoint runs one trial with n clients. Failures of the point
	// itself (server died, generator crashed or hung) are recorded in
	// Point.Error with the outcomes collected so far; the error return
	// is for ctx cancellation and for a point that could not start.
	RunPoint(ctx context.Context, n, trial int) (result.Point, error)
	// Device is the device the server last opened; nil if none.
	Device() *result.DeviceInfo
	// Close releases what the runner holds (a guest is powered off).
	Close() error
}

// Describer is a Runner that knows facts about where its points run
// that the run records: a guest's kernel and CPU, a reference tool's
// figures, the device's port. The session calls Describe after opening
// and after every point.
type Describer interface {
	Describe(run *result.Run)
}

// ModeSetter is a Runner whose server design (resource mode) can change
// between points, for a run that measures several designs in turns: the
// session sets the next point's before it runs.
type ModeSetter interface {
	SetMode(mode string)
}

// Finisher is a Runner with work to do once the run's last point is in
// and before the run is saved for the last time (a guest measures
// perftest's data path again). The session calls Finish only for a run
// that was not interrupted, then Describe.
type Finisher interface {
	Finish(ctx context.Context)
}

// Referencer is a RemoteLauncher that can measure the data path between
// this host and each of its generator hosts with perftest (launch.SSH):
// the Local runner asks it once, before its first point, on a real
// device with a traffic phase, and records what it returns.
type Referencer interface {
	DataPathReference(ctx context.Context, f protocol.Fabric, op string, size int, serverIP string, out io.Writer) []result.Reference
}

// DefaultWallStop is --wall-stop's default: 1,000 refusals in a row are
// four of the default in-flight windows, every attempt of which met the
// wall.
const DefaultWallStop = 1000

// Spec is what every point of a run does, wherever it runs. It holds no
// host paths, callbacks or key material: it travels as JSON to a guest
// and, split into protocol.ServerSpec and protocol.GeneratorSpec, to every child.
type Spec struct {
	// Fabric is the fabric the server and generators open.
	Fabric protocol.Fabric `json:"fabric"`
	// MaxClients is the server's cap; 0 means each point's N.
	MaxClients int    `json:"max_clients,omitempty"`
	Mode       string `json:"mode"`
	// Designs are every server design the run measures in turns, Mode
	// the one of the points to come; nil when Mode is the only one.
	Designs []string `json:"designs,omitempty"`
	// Mux is how many logical clients share a QP in mux mode (0 =
	// server.DefaultMux); only mux mode takes it.
	Mux   int     `json:"mux,omitempty"`
	Procs int     `json:"procs"`
	Rate  float64 `json:"rate,omitempty"`
	// Timeout is each client's deadline.
	Timeout time.Duration `json:"timeout"`
	Rounds  int           `json:"rounds"`
	MsgSize int           `json:"msg_size,omitempty"`
	// Threshold is the success rate (0..1) a point must reach.
	Threshold float64 `json:"threshold"`
	// InFlight bounds each generator's connection attempts in progress.
	InFlight int `json:"inflight"`
	// WallStop has each generator of built-in clients stop launching
	// once the point has failed at a wall: more failures than Threshold
	// allows, the last WallStop of them resource refusals in a row
	// (client.Load). 0 launches every client.
	WallStop int `json:"wall_stop,omitempty"`
	// TLSResume lets a generator's clients resume TLS sessions (the
	// server then issues tickets).
	TLSResume bool `json:"tls_resume,omitempty"`
	// Detach has the server close each client's control connection once
	// accepted (server.Config.Detach).
	Detach bool `json:"detach,omitempty"`
	// TLSKex is the handshake's key exchange (certs.KeyExchanges).
	TLSKex string `json:"tls_kex,omitempty"`
	// GoMaxProcs is how the server's and generators' Go runtimes share
	// the CPUs: GoMaxProcsSplit (the default, "") or GoMaxProcsAll.
	GoMaxProcs string `json:"gomaxprocs,omitempty"`
	// Backlog is the server's listen queue (0 = somaxconn); NoFile and
	// MemLock lower the server's rlimits (0 = leave them).
	Backlog int    `json:"backlog,omitempty"`
	NoFile  uint64 `json:"nofile,omitempty"`
	MemLock uint64 `json:"memlock,omitempty"`
	// SRQDepth is each SRQ's receive buffers in srq mode (0 = the
	// server's own sizing: every message in flight, twice over, with a
	// traffic phase); fewer than the clients keep outstanding plants a
	// receive shortage (RNR NAKs).
	SRQDepth int `json:"srq_depth,omitempty"`
	// SampleInterval is the collectors' period (0 = their default, < 0
	// = off).
	SampleInterval time.Duration `json:"sample_interval,omitempty"`
	// CalibrationWindow is how long each point measures this machine's
	// speed just before its server starts and again just after its last
	// client's outcome (Point.Calibration); 0 = DefaultCalibration, < 0
	// = off.
	CalibrationWindow time.Duration `json:"calibration_window,omitempty"`
	// StartTimeout bounds waiting for the server and the generators to
	// be ready.
	StartTimeout time.Duration `json:"start_timeout,omitempty"`
	// GeneratorSlack is how much longer than a client's deadline (and a
	// quarter of it) a released generator may go without finishing a
	// client before it is hung (0 = 10 s, for a slow guest).
	GeneratorSlack time.Duration `json:"generator_slack,omitempty"`
	// Profile has the server and generators write CPU profiles
	// (LocalOptions.ProfileDir says where).
	Profile bool `json:"profile,omitempty"`
	// Server, when set, is the server under test: a command of the
	// operator's instead of rdmaprobe's serve (target_command.go).
	Server *protocol.ServerCommand `json:"server_cmd,omitempty"`
	// Client, when set, runs a command per client instead of the
	// built-in client (runner/child).
	Client *protocol.ClientCommand `json:"client_cmd,omitempty"`
	// CM, when set, makes the built-in clients rdma_cm's, with no
	// traffic phase.
	CM *protocol.CMClient `json:"cm,omitempty"`
	// Listen is the address the server listens on, IP[:port]; "" is
	// 127.0.0.1 on any free port. Generators on other hosts need an
	// address of the server's host they reach (--server-addr); a
	// simulated server's port takes its IP too.
	Listen string `json:"listen,omitempty"`
	// Traffic is the phase each point runs once all its clients are
	// connected (Duration 0 = none): the server is started with the
	// depth, and with a remote buffer for WRITE and READ. The built-in
	// clients run it; a client command (Client) has none.
	Traffic client.TrafficConfig `json:"traffic"`
}

// DefaultMode is the server's default resource mode (1 QP + 2 CQ + 2 MR
// per client, as a server that creates everything per connection has).
const DefaultMode = server.ModePerClient

// Check refuses a spec no point could run, before anything starts. It
// holds the rules of the run's options, in their flags' words; the
// server's and the generators' own options are checked by their specs
// (protocol.ServerSpec.Check, protocol.GeneratorSpec.Check), the
// traffic phase's by client.TrafficConfig.Check, so that serve and
// clients run by hand meet the same rules. What app still checks is
// how a flag maps onto these (a duration flag's 0 for off).
func (s Spec) Check() error {
	if err := server.ValidMode(s.Mode); err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	gen := protocol.GeneratorSpec{Rounds: s.Rounds, InFlight: s.InFlight, Timeout: s.Timeout, Rate: s.Rate,
		MsgSize: s.MsgSize, Traffic: s.Traffic}
	if err := gen.Check(); err != nil {
		return err
	}
	srv := protocol.ServerSpec{MaxClients: s.MaxClients, Backlog: s.Backlog, MsgSize: s.MsgSize,
		HandshakeTimeout: s.Timeout, ExchangeTimeout: s.Timeout, Depth: s.traffic().Depth, BusyPoll: s.Traffic.BusyPoll}
	if err := srv.Check(); err != nil {
		return err
	}
	if s.WallStop < 0 {
		return fmt.Errorf("--wall-stop %d: want 0 (launch every client) or more", s.WallStop)
	}
	if s.SRQDepth < 0 {
		return fmt.Errorf("--srq-depth %d: want 1 or more receive buffers (0: the server's own sizing)", s.SRQDepth)
	}
	if s.CM != nil {
		if err := rdmacm.Refuse(s.cmUse("")); err != nil {
			return err
		}
	}
	if err := s.checkMux(); err != nil {
		return err
	}
	if s.Procs < 1 {
		return fmt.Errorf("--procs must be at least 1")
	}
	switch s.GoMaxProcs {
	case "", GoMaxProcsSplit, GoMaxProcsAll:
	default:
		return fmt.Errorf("--gomaxprocs %q: want %s or %s", s.GoMaxProcs, GoMaxProcsSplit, GoMaxProcsAll)
	}
	if s.Server != nil {
		if err := s.Server.Check(); err != nil {
			return err
		}
	}
	if s.Client != nil {
		if err := s.Client.Check(s.Server != nil && len(s.Server.Build) > 0); err != nil {
			return err
		}
	}
	if s.Mode == server.ModeUD {
		switch {
		case s.Client != nil || s.Server != nil:
			return fmt.Errorf("--mode ud is the built-in server's and clients' (UD QPs): not with --server-cmd or --client-cmd")
		case s.Traffic.Duration > 0 && s.Traffic.Op != "" && s.Traffic.Op != result.OpSend:
			return fmt.Errorf("--op %s: UD QPs only send (--mode ud)", s.Traffic.Op)
		}
	}
	return nil
}

// NeedTraffic refuses flag (--criterion traffic, --require N:traffic),
// which judges the points' traffic phase, when they run none.
func (s Spec) NeedTraffic(flag string) error {
	if s.CM != nil {
		if err := rdmacm.Refuse(s.cmUse(flag)); err != nil {
			return err
		}
	}
	switch {
	case s.Client != nil:
		return fmt.Errorf("%s needs a traffic phase: the clients are --client-cmd's", flag)
	case s.Traffic.Duration <= 0:
		return fmt.Errorf("%s needs a traffic phase: --traffic is 0", flag)
	}
	return nil
}

// cmUse is what s asks of its rdma_cm clients; judged is the flag that
// judges their traffic phase ("" for none).
func (s Spec) cmUse(judged string) rdmacm.Use {
	return rdmacm.Use{ServerCmd: s.Server != nil, ClientCmd: s.Client != nil, Mode: s.Mode,
		Lockstep: s.CM.Steps == protocol.CMStepsLockstep, Rate: s.Rate, PrivateData: s.CM.PrivateData,
		ServerEchoes: s.CM.ServerEchoes, Traffic: s.Traffic, Judged: judged}
}

// checkMux refuses --mux without mux mode, and what mux mode's logical
// clients cannot do.
func (s Spec) checkMux() error {
	if s.Mode != server.ModeMux {
		if s.Mux != 0 {
			return fmt.Errorf("--mux %d: logical clients share QPs only with --mode %s", s.Mux, server.ModeMux)
		}
		return nil
	}
	switch {
	case s.Mux < 0 || s.Mux > server.MaxMux:
		return fmt.Errorf("--mux %d: want 1 to %d logical clients per QP", s.Mux, server.MaxMux)
	case s.Detach:
		return fmt.Errorf("--detach with --mode %s: a logical client's connection is how its server sees it leave", server.ModeMux)
	case s.Traffic.Duration > 0 && s.Traffic.Op != "" && s.Traffic.Op != result.OpSend:
		return fmt.Errorf("--op %s with --mode %s: logical clients sharing a QP exchange messages only (send); the server lends them no buffer", s.Traffic.Op, server.ModeMux)
	case s.Server != nil || s.Client != nil:
		return fmt.Errorf("--mode %s is the built-in server's and clients' protocol: not with a server or client command", server.ModeMux)
	}
	return nil
}

// ForDesign is s measuring server design d, one of a list: --mux holds
// only for mux mode, and the other designs of the list ignore it.
func (s Spec) ForDesign(d string) Spec {
	s.Mode = d
	if d != server.ModeMux {
		s.Mux = 0
	}
	return s
}

// Transports are the perftest transports whose data-path references the
// run's designs are set against (result.TransportOf), in the designs'
// order: RC ("") and UD when ud is among them.
func (s Spec) Transports() []string {
	designs := s.Designs
	if len(designs) == 0 {
		designs = []string{s.Mode}
	}
	var out []string
	for _, d := range designs {
		if t := result.TransportOf(d); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// ModeMux is the resource mode whose logical clients share QPs.
const ModeMux = server.ModeMux

// ModeSRQ is the resource mode whose clients' receives share an SRQ
// (Spec.SRQDepth).
const ModeSRQ = server.ModeSRQ

// DefaultMux is mux mode's logical clients per QP without --mux.
const DefaultMux = server.DefaultMux

// MuxOrDefault is the logical clients per QP of a mux-mode spec (0
// otherwise).
func (s Spec) MuxOrDefault() int {
	if s.Mode != server.ModeMux {
		return 0
	}
	if s.Mux == 0 {
		return server.DefaultMux
	}
	return s.Mux
}

// traffic is the traffic phase with its defaults filled in.
func (s Spec) traffic() client.TrafficConfig {
	t := s.Traffic
	if t.Op == "" {
		t.Op = result.OpSend
	}
	t.Depth = max(t.Depth, 1)
	if t.Timeout <= 0 {
		t.Timeout = client.DefaultMsgTimeout
	}
	return t
}

// withDefaults fills what a zero Spec leaves open.
func (s Spec) withDefaults() Spec {
	if s.Procs < 1 {
		s.Procs = 1
	}
	if s.Timeout <= 0 {
		s.Timeout = 30 * time.Second
	}
	if s.StartTimeout <= 0 {
		s.StartTimeout = 60 * time.Second
	}
	return s
}

// MaxClientsAt is the server's cap at a point of n clients.
func (s Spec) MaxClientsAt(n int) int {
	if s.MaxClients > 0 {
		return s.MaxClients
	}
	return n
}

// Progress is a live view of a running point.
type Progress struct {
	// Phase is what the point is doing (Phase*); the counts beside a
	// phase other than PhaseConnect are the last ones reported.
	Phase             string `json:"phase,omitempty"`
	Clients, Done, OK int
	// Hosts are the counts per generator host, in the order of the
	// generators, where the generators run on other hosts.
	Hosts []HostProgress `json:"hosts,omitempty"`
	// Failed counts the failed clients so far by outcome class, where
	// the generators report them (the built-in clients do).
	Failed map[string]int `json:"failed,omitempty"`
	// Phases counts the clients' connect phases so far in the buckets
	// of result.PhaseBounds, per phase, where the generators report
	// them.
	Phases map[string][]int `json:"phases,omitempty"`
	// Sample, when set, is a reading of the point's processes and device
	// just taken; the counts beside it are those of the last report.
	Sample *result.Sample `json:"sample,omitempty"`
	// Traffic, when set, is the traffic phase so far: the messages every
	// generator's clients completed in the window, once a second.
	Traffic *TrafficProgress `json:"traffic,omitempty"`
}

// The phases of a point, in the order it runs them (Progress.Phase):
// the machine's speed measured (before the server starts and again
// once the clients are connected), the server and load generators
// starting, the clients connecting from their release, and the
// connected clients' traffic.
const (
	PhaseCalibration = "calibration"
	PhaseStart       = "start"
	PhaseConnect     = "connect"
	PhaseTraffic     = "traffic"
)

// HostProgress is one generator host's share of a point so far.
type HostProgress struct {
	Host              string
	Clients, Done, OK int
}

// TrafficProgress is a traffic phase while its window is open.
type TrafficProgress struct {
	Messages int64 `json:"messages"`
	// Bytes are the messages' payload bytes.
	Bytes int64 `json:"bytes"`
	// Sec is the time since the phase started.
	Sec float64 `json:"sec"`
}

// GoMaxProcs policies (Spec.GoMaxProcs, --gomaxprocs).
const (
	// GoMaxProcsSplit gives the server half of the CPUs (at least one)
	// and each load generator an equal share of the rest (at least one).
	// Server and generators share one machine here, unlike in a real
	// deployment; left at Go's default, each runtime sizes itself to every
	// CPU and their idle Ps spin against each other (docs/decisions.md).
	GoMaxProcsSplit = "split"
	// GoMaxProcsAll leaves every process at Go's default (all CPUs).
	GoMaxProcsAll = "all"
)

// GoMaxProcsPolicies lists the accepted policies.
var GoMaxProcsPolicies = []string{GoMaxProcsSplit, GoMaxProcsAll}

// splitCPUs returns GOMAXPROCS for the server and for each of procs
// generators on a machine with cpus CPUs; 0 means Go's default.
func splitCPUs(policy string, cpus, procs int) (server, generator int) {
	if policy == GoMaxProcsAll {
		return 0, 0
	}
	server = max(1, cpus/2)
	return server, max(1, (cpus-server)/max(procs, 1))
}

// share splits n clients over procs processes as evenly as possible.
func share(n, procs, i int) int {
	s := n / procs
	if i < n%procs {
		s++
	}
	return s
}
