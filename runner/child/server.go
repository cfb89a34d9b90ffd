// Package child is the code that runs inside the processes the runner
// starts: the built-in server (`serve`, Serve), a load generator
// (`clients`, Generate, with client commands of the operator's in
// commands.go) and `hostinfo` on a generator's host (HostInfo). Each
// reads its spec and speaks events as package protocol says; each also
// runs by hand, with flags instead of a spec and lines for a person.
package child

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

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/live"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// Serve runs the server until ctx ends. With events it writes the
// protocol's events on out ("ready" with the address and device,
// "stats" at the end, "error"), and once ready answers the requests
// that come as lines of in (nil: none; see protocol.ServerRequestUsage);
// otherwise it writes a line for a person at each.
func Serve(ctx context.Context, spec protocol.ServerSpec, in *bufio.Reader, out io.Writer, events bool) error {
	emit := protocol.NewEmitter(out)
	failf := func(err error) error {
		if events {
			emit.Emit(protocol.Event{Event: "error", Error: err.Error()})
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
	p, inUse, err := spec.Fabric.ServerProvider()
	if err != nil {
		return failf(err)
	}
	scfg := server.Config{
		Listen: spec.Listen, MaxClients: spec.MaxClients, Mode: spec.Mode,
		TLS: tlsConf, Provider: p, Device: spec.Fabric.DeviceConfig(), MsgSize: spec.MsgSize,
		Backlog: spec.Backlog, HandshakeTimeout: spec.HandshakeTimeout,
		ExchangeTimeout: spec.ExchangeTimeout, Detach: spec.Detach,
		Depth: spec.Depth, Remote: spec.Remote, SRQDepth: spec.SRQDepth, BusyPoll: spec.BusyPoll, Mux: spec.Mux,
		InUse: inUse,
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
	metrics := ""
	if spec.MetricsAddr != "" {
		m, err := live.ServeServer(spec.MetricsAddr, live.ServerSource{InUse: inUse,
			Stats: func() (result.ServerStats, bool) {
				if s := served.Load(); s != nil {
					return s.Stats(), true
				}
				return result.ServerStats{}, false
			}})
		if err != nil {
			return failf(err)
		}
		defer m.Close(ctx, 0)
		metrics = m.Addr()
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
		emit.Emit(protocol.Event{Event: "ready", Addr: addr, PID: os.Getpid(), Device: info})
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
		if metrics != "" {
			fmt.Fprintf(out, "metrics: http://%s/metrics\n", metrics)
		}
	}
	err = srv.Serve(ctx)
	st := srv.Stats()
	if events {
		emit.Emit(protocol.Event{Event: "stats", Server: &st})
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

// answerRequests answers the requests on in until it ends; a line it
// does not know is ignored (an empty one may be a launcher's keepalive).
// The end of in does not stop the server: SIGTERM does.
func answerRequests(in *bufio.Reader, emit *protocol.Emitter, srv *server.Server) {
	for {
		line, err := in.ReadString('\n')
		switch strings.TrimSpace(line) {
		case protocol.ServerRequestUsage:
			cpu, sys := collectors.SelfCPU()
			emit.Emit(protocol.Event{Event: "usage", ServerUsage: &result.ServerUsage{
				CPUSec: cpu.Seconds(), SysSec: sys.Seconds(), SpinSec: srv.Spun().Seconds()}})
		case protocol.ServerRequestStats:
			st := srv.Stats()
			emit.Emit(protocol.Event{Event: "server-stats", Server: &st})
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
