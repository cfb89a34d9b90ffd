package protocol

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/payload"
)

// ServerSpec is the whole configuration of a `serve` process: what the
// built-in target sends as the first line of its stdin, and what
// `serve`'s flags build when an operator runs it by hand.
type ServerSpec struct {
	Listen     string `json:"listen"`
	MaxClients int    `json:"max_clients"`
	Mode       string `json:"mode"`
	Fabric     Fabric `json:"fabric"`
	// Cert and Key are the server's pair (PEM); ClientCA the client
	// certificates it authorises (mutual TLS).
	Cert     []byte `json:"cert"`
	Key      []byte `json:"key"`
	ClientCA []byte `json:"client_ca"`
	MsgSize  int    `json:"msg_size,omitempty"`
	Backlog  int    `json:"backlog,omitempty"`
	// HandshakeTimeout bounds each client's TLS handshake,
	// ExchangeTimeout the time from it to the client's hello.
	HandshakeTimeout time.Duration `json:"handshake_timeout"`
	ExchangeTimeout  time.Duration `json:"exchange_timeout"`
	TLSKex           string        `json:"tls_kex,omitempty"`
	Detach           bool          `json:"detach,omitempty"`
	// Depth is the messages a client may have outstanding; Remote lends
	// each client a slice of a buffer for RDMA WRITE and READ
	// (server.Config).
	Depth  int  `json:"depth,omitempty"`
	Remote bool `json:"remote,omitempty"`
	// BusyPoll: server.Config.BusyPoll (--busy-poll).
	BusyPoll time.Duration `json:"busy_poll,omitempty"`
	// Mux is how many logical clients may share a QP in mux mode
	// (server.Config.Mux; 0 = its default).
	Mux int `json:"mux,omitempty"`
	// SRQDepth is each SRQ's receive buffers in srq mode
	// (server.Config.SRQDepth; 0 = its default, -1 = SRQDepthAll).
	SRQDepth int `json:"srq_depth,omitempty"`
	// TLSTickets issues session tickets so that returning clients can
	// resume.
	TLSTickets bool `json:"tls_tickets,omitempty"`
	// NoFile and MemLock set the process's rlimits (0 = leave them).
	NoFile  uint64 `json:"nofile,omitempty"`
	MemLock uint64 `json:"memlock,omitempty"`
	// CPUProfile, if set, receives a CPU profile of the process.
	CPUProfile string `json:"cpu_profile,omitempty"`
	// ReadyFile, if set, receives the listening address once ready.
	ReadyFile string `json:"ready_file,omitempty"`
	// DebugAddr, if set, serves /debug/memory and /debug/pprof/ there
	// (child.Serve).
	DebugAddr string `json:"debug_addr,omitempty"`
	// MetricsAddr, if set, serves the server's admission counters and
	// the objects it holds at /metrics there (live.ServeServer).
	MetricsAddr string `json:"metrics_addr,omitempty"`
}

// Check refuses a server no client could use, in the words of serve's
// flags: the one place of their rules, which runner.Spec.Check asks for
// search's and ramp's server too.
func (s ServerSpec) Check() error {
	if err := payload.CheckSize(s.MsgSize); err != nil {
		return fmt.Errorf("--msg-size %v", err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-clients", s.MaxClients}, {"backlog", s.Backlog}} {
		if f.v < 0 {
			return fmt.Errorf("--%s %d: want 0 or more", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"handshake-timeout", s.HandshakeTimeout}, {"exchange-timeout", s.ExchangeTimeout}} {
		if f.d <= 0 {
			return fmt.Errorf("--%s %v: want more than 0", f.name, f.d)
		}
	}
	if err := client.CheckDepth(s.Depth); err != nil {
		return err
	}
	return client.CheckBusyPoll(s.BusyPoll)
}

// ServerRequestUsage is the line that asks a running `serve` for its CPU
// so far: it answers with a "usage" event (result.ServerUsage). The
// runner asks at the start and the end of a traffic phase, which gives
// the server's CPU in the phase, and the part its busy-polling spent
// waiting, on any host the server runs on.
const ServerRequestUsage = "usage"

// ServerRequestStats is the line that asks a running `serve` for its
// own view so far (result.ServerStats, what it says as it stops): it
// answers with a "server-stats" event. A staircase asks at every step,
// whose server goes on.
const ServerRequestStats = "stats"

// GeneratorSpec is the whole configuration of a load generator (`clients`):
// what a Launcher's process reads as the first line of its stdin, and
// what `clients`' flags build when it is run by hand.
type GeneratorSpec struct {
	// N clients with IDs IDBase.., in generator number Proc.
	N      int `json:"n"`
	IDBase int `json:"id_base"`
	Proc   int `json:"proc"`
	// Addr is the server's address when run by hand; the runner sends
	// it on stdin at the release instead.
	Addr   string  `json:"addr,omitempty"`
	Rate   float64 `json:"rate,omitempty"`
	Fabric Fabric  `json:"fabric"`
	// CA is the server certificate to pin; Cert and Key the client pair
	// presented to the server (PEM).
	CA        []byte        `json:"ca"`
	Cert      []byte        `json:"cert"`
	Key       []byte        `json:"key"`
	TLSResume bool          `json:"tls_resume,omitempty"`
	TLSKex    string        `json:"tls_kex,omitempty"`
	InFlight  int           `json:"inflight"`
	Timeout   time.Duration `json:"timeout"`
	Rounds    int           `json:"rounds"`
	MsgSize   int           `json:"msg_size,omitempty"`
	// Mux, if not 0, makes the clients logical clients of a mux-mode
	// server, Mux to a QP (client.Config.Mux).
	Mux int `json:"mux,omitempty"`
	// UD makes the clients UD QPs, for a server of --mode ud
	// (client.Config.UD).
	UD bool `json:"ud,omitempty"`
	// WallStop and FailAllowance stop the launches once the point has
	// failed at a wall (client.Load); the built-in clients only.
	WallStop      int `json:"wall_stop,omitempty"`
	FailAllowance int `json:"fail_allowance,omitempty"`
	// CPUProfile, if set, receives a CPU profile of the process.
	CPUProfile string `json:"cpu_profile,omitempty"`
	// Hold keeps connected clients open this long before exiting (by
	// hand only; the runner releases them by closing stdin).
	Hold time.Duration `json:"hold,omitempty"`
	// HoldStdin keeps connected clients open until stdin ends (by hand:
	// how a client command of the built-in kind is held, --hold-stdin).
	HoldStdin bool `json:"hold_stdin,omitempty"`
	// Command, when set, runs a command per client instead of the
	// built-in client (runner/child); Total is the point's client
	// count and Dir its working directory, for its placeholders.
	Command *ClientCommand `json:"command,omitempty"`
	// CM, when set, makes the clients rdma_cm's (runner/child, client/rdmacm).
	CM    *CMClient `json:"cm,omitempty"`
	Total int       `json:"total,omitempty"`
	Dir   string    `json:"dir,omitempty"`
	// Build is the server command's build directory for the point.
	Build string `json:"build,omitempty"`
	// Traffic is the phase the connected clients run (Duration 0 =
	// none): with events, when the runner writes "traffic" on stdin
	// (every client of the point connected); by hand, at once.
	Traffic client.TrafficConfig `json:"traffic"`
}

// Check refuses a generator whose clients could not connect, in the
// words of the flags: the one place of their rules, which
// runner.Spec.Check asks for search's and ramp's generators too.
func (g GeneratorSpec) Check() error {
	switch {
	case payload.CheckSize(g.MsgSize) != nil:
		return fmt.Errorf("--msg-size %v", payload.CheckSize(g.MsgSize))
	case g.Rounds < 1:
		return fmt.Errorf("--rounds %d: want 1 or more verified round trips per client", g.Rounds)
	case g.InFlight < 0:
		return fmt.Errorf("--inflight %d: want 0 or more", g.InFlight)
	case g.Timeout <= 0:
		return fmt.Errorf("--timeout %v: want more than 0", g.Timeout)
	case !(g.Rate >= 0 && !math.IsInf(g.Rate, 1)): // NaN too
		return fmt.Errorf("--connect-rate %g: want 0 (all at once) or more launches per second", g.Rate)
	}
	return g.Traffic.Check()
}

// CMClient is what rdma_cm clients send (--client-kind rdmacm).
type CMClient struct {
	// PrivateData goes with every connect request.
	PrivateData []byte `json:"private_data,omitempty"`
	// ServerEchoes says the server posts receives and sends every
	// message back as it came (--cm-server-echoes): only then do the
	// clients run the traffic phase (SENDs), since a SEND
	// to a server that posts no receive is RNR-NAKed.
	ServerEchoes bool `json:"server_echoes,omitempty"`
	// Steps is how a generator steps its connections (--cm-steps):
	// CMStepsLockstep, CMStepsInterleaved, or "" (auto) for lockstep
	// when its window holds all its connections and no --connect-rate paces
	// them, interleaved otherwise (client/rdmacm.Config.Lockstep).
	Steps string `json:"steps,omitempty"`
}

// The values of CMClient.Steps.
const (
	CMStepsAuto        = "auto"
	CMStepsLockstep    = "lockstep"
	CMStepsInterleaved = "interleaved"
)

// Lockstep reports whether a generator of n connections, window
// inFlight (0 = all) and start rate (0 = none) steps them in lockstep.
// Auto picks lockstep only where every connection starts at once, as
// cmtime starts them: there it made about 1.6× the connects/s of
// interleaving at 1,000 in the Soft-RoCE guest, since route resolution
// and connects then do not queue behind each other in the kernel's CM
// work queues. A narrower window or a rate asks for a steady flow of
// attempts, which batches would turn into bursts.
func (c *CMClient) Lockstep(n, inFlight int, rate float64) bool {
	switch c.Steps {
	case CMStepsLockstep:
		return true
	case CMStepsInterleaved:
		return false
	}
	return rate <= 0 && (inFlight <= 0 || inFlight >= n)
}

// RunsTraffic reports whether the built-in clients of spec run its
// traffic phase: the TLS ones do, rdma_cm's only against a server that
// echoes, a client command never.
func RunsTraffic(traffic client.TrafficConfig, command *ClientCommand, cm *CMClient) bool {
	return traffic.Duration > 0 && command == nil && (cm == nil || cm.ServerEchoes)
}

// StartTraffic is the line that starts a generator's traffic phase.
const StartTraffic = "traffic"

// EndTrafficWindow is the line that ends the traffic phase's window
// once every generator said "measured" (client.SharedWindow).
const EndTrafficWindow = "traffic-end"

// Add is what the runner's AddLine asks of a generator that holds its
// clients: launch N more, with IDs from IDBase, on top of those it
// holds (a staircase's step), and report them as a point's "done".
// FailAllowance is the step's --wall-stop allowance
// (GeneratorSpec.FailAllowance).
type Add struct {
	N, IDBase, FailAllowance int
}

// addPrefix begins an Add's line.
const addPrefix = "add "

// Line is a as the runner writes it to a generator's stdin.
func (a Add) Line() string {
	return fmt.Sprintf("%s%d %d %d", addPrefix, a.N, a.IDBase, a.FailAllowance)
}

// ParseAdd reads an Add's line; ok is false for any other line.
func ParseAdd(line string) (a Add, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), addPrefix)
	if !ok {
		return a, false
	}
	if n, err := fmt.Sscanf(rest, "%d %d %d", &a.N, &a.IDBase, &a.FailAllowance); err != nil || n != 3 || a.N < 0 || a.IDBase < 0 {
		return Add{}, false
	}
	return a, true
}

// ReadSpec reads one JSON line from in into v: how a child gets its
// ServerSpec or GeneratorSpec from the runner.
func ReadSpec(in *bufio.Reader, v any) error {
	line, err := in.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return fmt.Errorf("read the spec from stdin: %w", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("read the spec from stdin: %w", err)
	}
	return nil
}

// DefaultInFlight is the default window of connection attempts in
// progress per load generator. A capacity probe asks how many clients
// the server holds at once, not how a 10,000-connection SYN burst fares:
// unbounded, such a burst overflows the listen queue and starves every
// handshake of CPU until all of them time out (measured: 10,000 clients
// in the Soft-RoCE guest, 1.4% connected). --inflight 0 restores it.
const DefaultInFlight = 256

// The runner sends a released generator an empty line every
// HeartbeatEvery; one that hears nothing for HeartbeatLost takes the
// runner, or its launcher's connection, to be gone. A dropped SSH
// connection whose server side never notices would otherwise leave the
// generator holding its clients for good.
const (
	HeartbeatEvery = 5 * time.Second
	HeartbeatLost  = 60 * time.Second
)

// ClientCommand is a client rdmaprobe did not write (--client-cmd), run
// once per client by the load generators in place of the built-in
// client. What the harness sees of it is its exit, its output and the
// time from spawn to its ok line: no phase of its connection is timed.
//
// Placeholders: {i} the client's number (0..N-1 over all generators),
// {n} the point's client count, {addr} and {port} the server's, {dir}
// the point's working directory, {device} the run's RDMA device, {build}
// the server's build for the point (a client built with it).
type ClientCommand struct {
	Argv []string `json:"argv"`
	// Stdin is written to each client's stdin (--client-stdin, printf
	// escapes already applied).
	Stdin string `json:"stdin,omitempty"`
	// OK is a regexp one of its output lines must match for the client
	// to count as connected (--client-ok); without it, exit status 0.
	OK string `json:"ok,omitempty"`
	// Held counts "N at once" by holding: each client's stdin stays open
	// until every client of the point has printed its ok line (or
	// failed), so the server really held them together; it needs OK.
	// Otherwise (launched) N are started together and each does its
	// work and exits, as a shell loop of client programs runs them.
	Held bool `json:"held,omitempty"`
	// OnlyDevice, when set, is the only RDMA device each client sees
	// (command.Spec.OnlyDevice): the guest's netdev device.
	OnlyDevice string `json:"only_device,omitempty"`
}

// ServerCommand is a server under test that rdmaprobe did not write
// (--server-cmd): an argv template run once per point, optionally built
// per client count first, observed until ready, stopped with SIGTERM and
// then SIGKILL.
//
// Placeholders: {n} the point's client count, {max} the server's cap
// (runner.Spec.MaxClients, else {n}), {port} its port, {dir} the point's
// working directory, {device} the RDMA device the run uses, {addr} the
// address clients dial, {build} the build's output directory, and
// {cert}, {key}, {client_ca}: the run's server pair and the client
// certificate it must accept, for a server that speaks rdmaprobe's own
// exchange (package exchange) to the built-in clients. Those files are
// written into the point's directory (mode 0600) only when the template
// names them: otherwise keys never touch the disk.
type ServerCommand struct {
	Argv []string `json:"argv"`
	// Port is a fixed port (--server-port); 0 picks a free one per
	// point. A fixed port must be free again before the next point
	// starts its server.
	Port int `json:"port,omitempty"`
	// Ready is a regexp on the server's output lines that says it is
	// ready (--server-ready); empty means its port listening (TCP, or an
	// rdma_cm listener on an RDMA device).
	Ready string `json:"ready,omitempty"`
	// Build runs once per distinct client count before its first point
	// (--server-build), with {n}, {max} and {build}.
	Build []string `json:"build,omitempty"`
	// Addr is what clients dial ({addr}); default 127.0.0.1, the guest's
	// netdev address on the vm backend.
	Addr string `json:"addr,omitempty"`
	// StopGrace is how long the server has after SIGTERM; default 10 s.
	StopGrace time.Duration `json:"stop_grace,omitempty"`
	// StartTimeout bounds the wait for it to be ready; default the
	// run's start timeout.
	StartTimeout time.Duration `json:"start_timeout,omitempty"`
	// OnlyDevice, when set, is the only RDMA device the server sees
	// (command.Spec.OnlyDevice): the guest's netdev device.
	OnlyDevice string `json:"only_device,omitempty"`
}

// ServerPlaceholders and BuildPlaceholders are what the templates may
// use.
var (
	ServerPlaceholders = []string{"n", "max", "port", "dir", "device", "addr", "build", "cert", "key", "client_ca"}
	BuildPlaceholders  = []string{"n", "max", "build"}
)

// Check refuses a command that could never run: unknown placeholders, a
// bad regexp, a server without a port or a ready line to wait for.
func (c *ServerCommand) Check() error {
	if len(c.Argv) == 0 {
		return errors.New("--server-cmd is empty")
	}
	known := func(list []string) map[string]string {
		m := map[string]string{}
		for _, k := range list {
			m[k] = "x"
		}
		return m
	}
	if _, err := command.Expand(c.Argv, known(ServerPlaceholders)); err != nil {
		return fmt.Errorf("--server-cmd: %w", err)
	}
	if len(c.Build) > 0 {
		if _, err := command.Expand(c.Build, known(BuildPlaceholders)); err != nil {
			return fmt.Errorf("--server-build: %w", err)
		}
	}
	if c.Ready != "" {
		if _, err := regexp.Compile(c.Ready); err != nil {
			return fmt.Errorf("--server-ready: %w", err)
		}
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("--server-port %d is not a port", c.Port)
	}
	return nil
}

// Grace is how long the server has after SIGTERM.
func (c *ServerCommand) Grace() time.Duration {
	if c.StopGrace > 0 {
		return c.StopGrace
	}
	return 10 * time.Second
}

// DialAddr is what clients dial.
func (c *ServerCommand) DialAddr() string {
	if c.Addr != "" {
		return c.Addr
	}
	return "127.0.0.1"
}

// ClientPlaceholders are what a client template may use.
var ClientPlaceholders = []string{"i", "n", "addr", "port", "dir", "device", "build"}

// Counting names how a ClientCommand counts "N at once".
func (c *ClientCommand) Counting() string {
	if c.Held {
		return "held"
	}
	return "launched"
}

// Check refuses a client command that could never run; built says the
// server command has a build ({build}).
func (c *ClientCommand) Check(built bool) error {
	if len(c.Argv) == 0 {
		return errors.New("--client-cmd is empty")
	}
	vars := map[string]string{}
	for _, k := range ClientPlaceholders {
		if k != "build" || built {
			vars[k] = "x"
		}
	}
	if _, err := command.Expand(c.Argv, vars); err != nil {
		return fmt.Errorf("--client-cmd: %w", err)
	}
	if c.OK != "" {
		if _, err := regexp.Compile(c.OK); err != nil {
			return fmt.Errorf("--client-ok: %w", err)
		}
	}
	if c.Held && c.OK == "" {
		return errors.New("held clients (--client-count held) need --client-ok: the line that says a client is connected")
	}
	return nil
}
