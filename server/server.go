package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server/hangup"
)

// Resource modes (see the package documentation for their costs).
const (
	// ModePerClient gives each client 1 QP + 2 CQ + 2 MR, as a server
	// that creates everything per connection does.
	ModePerClient = "per-client"
	// ModeSharedCQ shares send and receive CQs among clients: 1 QP + 2 MR
	// per client.
	ModeSharedCQ = "shared-cq"
	// ModePool shares CQs and gives each client a send and a receive slot
	// of one registered pool: 1 QP per client, no MR, and no goroutine:
	// the CQ routers echo.
	ModePool = "pool"
	// ModeSRQ shares CQs, one SRQ per CQ group for receives, and the pool:
	// 1 QP without a receive queue per client, no CQ, no MR, and no
	// goroutine: the CQ routers echo.
	ModeSRQ = "srq"
	// ModeMux lets up to Config.Mux logical clients share one RC QP (1
	// QP + 2 CQ + 2 MR per QP, as per-client mode has per client): each
	// logical client is admitted on its own, with its own TLS exchange
	// and slot, and names itself in the hello and in every message
	// (exchange.Msg.Logical, payload.MuxSeq). See mux.go.
	ModeMux = "mux"
	// ModeUD serves every client of a CQ group from one UD QP of the
	// group's, over the pool: per client only an address handle, no QP
	// (ud.go).
	ModeUD = "ud"
)

// DefaultMux is how many logical clients share a QP in mux mode unless
// Config.Mux says otherwise.
const DefaultMux = 8

// Modes lists the supported resource modes, from the most per-client
// resources to the fewest.
var Modes = []string{ModePerClient, ModeSharedCQ, ModePool, ModeSRQ, ModeUD, ModeMux}

// ValidMode reports whether m is one of Modes.
func ValidMode(m string) error {
	for _, x := range Modes {
		if m == x {
			return nil
		}
	}
	return fmt.Errorf("unknown resource mode %q (want one of %s)", m, strings.Join(Modes, ", "))
}

// controlKeepAlive probes a client's TCP socket after 5 idle minutes,
// so that a client whose host vanished without closing it is released
// within about 8. Go's default (15 s, on both ends; the clients turn
// theirs off) made every held client's two sockets a probe and an
// answer each 15 s: work that grows with the clients held, which a
// staircase holds for hours.
var controlKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Minute, Interval: time.Minute, Count: 3}

// QP attributes used on both sides. Timeout 14 ≈ 67 ms per retry; RNR
// retry 7 means "retry forever", so a slow receiver is not an error.
const (
	QPTimeout   = 14
	QPRetryCnt  = 7
	QPRNRRetry  = 7
	QPMinRNR    = 12
	QPHopLimit  = 64
	QPMaxSendWR = 2
	QPMaxRecvWR = 2
)

// DefaultSRQDepth is the number of receive buffers of each SRQ in srq
// mode unless Config.SRQDepth says otherwise (fewer when a group has
// fewer clients). See the package documentation.
const DefaultSRQDepth = 1024

// MinSRQDepth is the fewest receive buffers an SRQ gets however few
// clients its group has (unless Config.SRQDepth asks for fewer): see
// srqDepth.
const MinSRQDepth = 64

// SRQDepthAll, as Config.SRQDepth, gives each SRQ a buffer for every
// message its group's clients can have in flight, twice over (see
// srqDepth), however many that is: a traffic phase's sizing, where a
// message that finds the SRQ empty would measure RNR timers rather than
// the server's data path.
const SRQDepthAll = -1

// Config of a server.
type Config struct {
	Listen     string // host:port; port 0 picks a free one
	MaxClients int
	Mode       string
	TLS        *tls.Config
	Provider   fabric.Provider
	Device     fabric.DeviceConfig
	// MsgSize is the largest payload a client may send (bytes).
	MsgSize int
	// HandshakeTimeout bounds TLS; ExchangeTimeout bounds reading Hello.
	HandshakeTimeout time.Duration
	ExchangeTimeout  time.Duration
	// Backlog is the listen queue length requested from the kernel
	// (0 = the kernel's somaxconn).
	Backlog int
	// SRQDepth is the number of receive buffers of each group's SRQ in
	// srq mode (0 = DefaultSRQDepth, SRQDepthAll = as many as can be
	// used); never more than two per message the group's clients can
	// have outstanding (or MinSRQDepth if that is more), or max_srq_wr.
	SRQDepth int
	// Detach closes each client's control connection once the client is
	// accepted (exchange.Detached), so the server holds no socket per
	// connected client; the client leaves by sending a goodbye over its
	// QP (payload.Bye). A client that dies without one keeps its QP and
	// slot until the server stops or an echo to it fails: nothing else
	// tells an RC responder that its peer is gone.
	Detach bool
	// Depth is how many messages a client may have outstanding (1 if 0):
	// each client's QP takes max(Depth, 2) sends and receives, and its
	// echo buffers (per-client, shared-cq, pool) are Depth of each.
	Depth int
	// Remote lends each client a region of Depth × MsgSize bytes of one
	// buffer registered at start for RDMA WRITE and READ
	// (exchange.Remote in the accept), each slot filled with
	// payload.RegionSeq(the client's QPN, slot); the clients' QPs allow
	// remote write and read.
	Remote bool
	// InUse, if set, reports the fabric objects in use ("qp", "cq", "mr",
	// "pd"); the server keeps the highest counts in its stats. The sim
	// fabric provides it: its device lives in this process, out of
	// reach of the kernel's RDMA resource tracking.
	InUse func() map[string]int
	// BusyPoll, if not 0, makes a loop that finds its CQ empty keep
	// polling it for this long before it sleeps on the completion
	// channel (fabric.Spin): perftest's way of measuring latency, at the
	// price of CPU (0 = sleep at once, the default).
	BusyPoll time.Duration
	// Mux is how many logical clients may share one QP in mux mode
	// (DefaultMux if 0); the server refuses a logical client beyond it
	// on a QP.
	Mux int
}

// Server serves one configuration until its context ends.
type Server struct {
	cfg  Config
	dev  fabric.Device
	pd   fabric.PD
	port fabric.PortInfo
	ln   net.Listener

	active atomic.Int64
	// fastLoops counts the echo loops the provider could run
	// (fabric.Echoer, echoloop.go): it does only while there is one.
	fastLoops atomic.Int64
	// idles counts the provider's echo loops coming back idle (Idles).
	idles  atomic.Int64
	shared *sharedCQs
	// cqs creates and destroys every CQ, and tallies their vain polling.
	cqs    *spinTally
	pool   *memPool // pool and srq modes
	region *region  // Config.Remote
	// wr is each client QP's send and receive queue depth.
	wr int

	mu    sync.Mutex
	stats result.ServerStats
	// psns issues the clients' PSNs (psn.go).
	psns *psnSource
	// hellos holds the endpoints of the hellos of clients being set up
	// or connected, so a replayed hello is refused; a client's release
	// removes its own.
	hellos map[helloKey]struct{}
	// muxes holds the QPs of mux mode by the client endpoint they serve
	// (mux.go).
	muxes map[muxKey]*muxQP
	// muxQPs counts the QPs of mux mode open now, ahs the address
	// handles of ud mode.
	muxQPs, ahs int

	wg sync.WaitGroup
	// readers are the goroutines that watch srq-mode clients whose
	// connection the hangup watcher cannot take (not a socket).
	readers sync.WaitGroup
	// hangups notices connected clients leaving, without a goroutine
	// blocked in Read per client.
	hangups *hangup.Watcher
	// maps keeps the process clear of vm.max_map_count (see mapGuard).
	maps *mapGuard
}

// New opens the device, allocates the PD and starts listening.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.MaxClients <= 0 {
		return nil, errors.New("max clients must be positive")
	}
	if cfg.Mode == "" {
		cfg.Mode = ModePerClient
	}
	if err := ValidMode(cfg.Mode); err != nil {
		return nil, err
	}
	if cfg.MsgSize <= 0 {
		cfg.MsgSize = 4096
	}
	if cfg.Depth <= 0 {
		cfg.Depth = 1
	}
	if cfg.Mux <= 0 {
		cfg.Mux = DefaultMux
	}
	if cfg.Mode == ModeMux {
		if cfg.Mux > MaxMux {
			return nil, fmt.Errorf("%d logical clients per QP: at most %d", cfg.Mux, MaxMux)
		}
		if cfg.Detach {
			return nil, errors.New("mux mode keeps each logical client's connection (its end is the logical client's departure): it cannot detach")
		}
		if cfg.Remote {
			return nil, errors.New("mux mode lends no remote buffer: its logical clients would share one QP's region")
		}
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	if cfg.ExchangeTimeout <= 0 {
		cfg.ExchangeTimeout = 30 * time.Second
	}
	if cfg.TLS == nil {
		return nil, errors.New("server needs a TLS configuration")
	}
	dev, err := cfg.Provider.Open(ctx, cfg.Device)
	if err != nil {
		return nil, fmt.Errorf("open device: %w", err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, dev: dev, pd: pd, port: dev.Port(), psns: newPSNSource(psnBits),
		hellos: map[helloKey]struct{}{}, muxes: map[muxKey]*muxQP{}, wr: max(QPMaxSendWR, cfg.Depth), cqs: newSpinTally(dev)}
	s.stats.Failures = map[string]int{}
	s.stats.Detached = cfg.Detach
	s.stats.Errors = map[string]int{}
	caps := dev.Caps()
	if cfg.Mode == ModeMux {
		if err := caps.FitsQP(cfg.Mux*cfg.Depth, fmt.Sprintf("--mux %d × --depth %d", cfg.Mux, cfg.Depth)); err != nil {
			s.teardown()
			return nil, err
		}
	}
	per := groupSize(caps, cfg.MaxClients, s.wr)
	if cfg.Remote {
		if s.region, err = newRegion(pd, caps, cfg.MaxClients, cfg.Depth*cfg.MsgSize); err != nil {
			s.teardown()
			return nil, err
		}
	}
	switch cfg.Mode {
	case ModeSharedCQ:
		s.shared = newSharedCQs(s.cqs, pd, cfg.MaxClients, per, s.wr, false, nil, 0)
	case ModePool:
		if s.pool, err = newMemPool(pd, caps, cfg.MaxClients, cfg.Depth, cfg.MsgSize); err != nil {
			s.teardown()
			return nil, err
		}
		s.shared = newSharedCQs(s.cqs, pd, cfg.MaxClients, per, s.wr, true, nil, 0)
	case ModeUD:
		if err := s.newUD(caps); err != nil {
			s.teardown()
			return nil, err
		}
	case ModeSRQ:
		depth := srqDepth(caps, per*cfg.Depth, cfg.SRQDepth)
		groups := (cfg.MaxClients + per - 1) / per
		if s.pool, err = newBufPool(pd, caps, groups*depth, cfg.MsgSize); err != nil {
			s.teardown()
			return nil, err
		}
		s.shared = newSharedCQs(s.cqs, pd, cfg.MaxClients, per, s.wr, true, s.pool, depth)
	}
	if s.shared != nil {
		s.shared.busy = cfg.BusyPoll
	}
	lc := net.ListenConfig{KeepAliveConfig: controlKeepAlive}
	ln, err := listen(ctx, lc, cfg.Listen, cfg.Backlog)
	if err != nil {
		s.teardown()
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	s.ln = ln
	s.maps = newMapGuard()
	if s.hangups, err = hangup.New(); err != nil {
		s.teardown()
		return nil, err
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Device is the opened device.
func (s *Server) Device() fabric.Device { return s.dev }

// teardown releases what New created, after every client: the groups'
// SRQs and CQs, the pool, the PD, the device.
func (s *Server) teardown() {
	if s.shared != nil {
		s.shared.close()
	}
	if s.pool != nil {
		s.pool.close()
	}
	if s.region != nil {
		s.region.close()
	}
	if s.pd != nil {
		s.pd.Dealloc()
	}
	s.dev.Close()
}
