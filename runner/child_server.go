package runner

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
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
	// (serveDebug).
	DebugAddr string `json:"debug_addr,omitempty"`
}

// Serve runs the server until ctx ends. With events it writes the
// protocol's events on out ("ready" with the address and device,
// "stats" at the end, "error"), and once ready answers the requests
// that come as lines of in (nil: none; see ServerRequestUsage);
// otherwise it writes a line for a person at each.
func Serve(ctx context.Context, spec ServerSpec, in *bufio.Reader, out io.Writer, events bool) error {
	emit := NewEmitter(out)
	failf := func(err error) error {
		if events {
			emit.Emit(Event{Event: "error", Error: err.Error()})
		}
		return err
	}
	if err := setLimits(spec.NoFile, spec.MemLock); err != nil {
		return failf(err)
	}
	stopProfile, err := startProfile(spec.CPUProfile)
	if err != nil {
		return failf(err)
	}
	defer stopProfile()
	pair := certs.Pair{CertPEM: spec.Cert, KeyPEM: spec.Key}
	tlsConf, err := pair.Server(spec.ClientCA)
	if err != nil {
		return failf(err)
	}
	tlsConf.SessionTicketsDisabled = !spec.TLSTickets
	if err := certs.SetKeyExchange(tlsConf, spec.TLSKex); err != nil {
		return failf(err)
	}
	p, err := spec.Fabric.Provider()
	if err != nil {
		return failf(err)
	}
	scfg := server.Config{
		Listen: spec.Listen, MaxClients: spec.MaxClients, Mode: spec.Mode,
		TLS: tlsConf, Provider: p, Device: spec.Fabric.DeviceConfig(), MsgSize: spec.MsgSize,
		Backlog: spec.Backlog, HandshakeTimeout: spec.HandshakeTimeout,
		ExchangeTimeout: spec.ExchangeTimeout, Detach: spec.Detach,
		Depth: spec.Depth, Remote: spec.Remote, SRQDepth: spec.SRQDepth, BusyPoll: spec.BusyPoll,
	}
	if u, ok := p.(interface{ InUse() map[string]int }); ok {
		scfg.InUse = u.InUse
	}
	var served atomic.Pointer[server.Server]
	debug := ""
	if spec.DebugAddr != "" {
		var stopDebug func()
		if debug, stopDebug, err = serveDebug(spec.DebugAddr, served.Load); err != nil {
			return failf(fmt.Errorf("--debug-addr: %w", err))
		}
		defer stopDebug()
	}
	srv, err := server.New(ctx, scfg)
	if err != nil {
		return failf(err)
	}
	served.Store(srv)
	dev := srv.Device()
	info := &result.DeviceInfo{Name: dev.Name(), Caps: dev.Caps(), Port: dev.Port()}
	addr := srv.Addr().String()
	if spec.ReadyFile != "" {
		if err := result.WriteFileAtomic(spec.ReadyFile, []byte(addr+"\n"), 0o644); err != nil {
			return err
		}
	}
	if events {
		emit.Emit(Event{Event: "ready", Addr: addr, PID: os.Getpid(), Device: info})
		if in != nil {
			go answerRequests(in, emit, srv)
		}
	} else {
		sim := ""
		if p.Simulated() {
			sim = " (simulated fabric)"
		}
		detached := ""
		if spec.Detach {
			detached = ", detached (clients leave with a goodbye over their QP)"
		}
		fmt.Fprintf(out, "ready: listening on %s, device %s%s, max %d clients, mode %s%s\n",
			addr, dev.Name(), sim, spec.MaxClients, spec.Mode, detached)
		if debug != "" {
			fmt.Fprintf(out, "%s%s/debug/memory (and /debug/pprof/)\n", DebugLinePrefix, debug)
		}
	}
	err = srv.Serve(ctx)
	st := srv.Stats()
	if events {
		emit.Emit(Event{Event: "stats", Server: &st})
	} else {
		goodbyes := ""
		if st.Detached {
			goodbyes = fmt.Sprintf(" (%d on their goodbye)", st.Goodbyes)
		}
		fmt.Fprintf(out, "stopped: %d accepted, %d connected, %d refused at capacity, peak %d, %d released%s%s\n",
			st.Accepted, st.Connected, st.Refused, st.PeakActive, st.Released, goodbyes, failureList(st.Failures))
	}
	return err
}

// ServerRequestUsage is the line that asks a running `serve` for its CPU
// so far: it answers with a "usage" event (result.ServerUsage). The
// runner asks at the start and the end of a traffic phase, which gives
// the server's CPU in the phase, and the part its busy-polling spent
// waiting, on any host the server runs on.
const ServerRequestUsage = "usage"

// answerRequests answers the requests on in until it ends; a line it
// does not know is ignored (an empty one may be a launcher's keepalive).
// The end of in does not stop the server: SIGTERM does.
func answerRequests(in *bufio.Reader, emit *Emitter, srv *server.Server) {
	for {
		line, err := in.ReadString('\n')
		if strings.TrimSpace(line) == ServerRequestUsage {
			cpu, _ := processCPU(os.Getpid())
			emit.Emit(Event{Event: "usage", ServerUsage: &result.ServerUsage{
				CPUSec: cpu.Seconds(), SpinSec: srv.Spun().Seconds()}})
		}
		if err != nil {
			return
		}
	}
}

// failureList is "; failures: tls 2, exchange 1" (classes sorted), or
// nothing when there were none.
func failureList(f map[string]int) string {
	if len(f) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, f[k]))
	}
	return "; failures: " + strings.Join(parts, ", ")
}
