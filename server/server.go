// Package server is the secure verbs server under test: a TLS 1.3 listener
// that, per admitted client, creates an RC QP, exchanges {QPN, PSN, GID,
// LID, MTU}, moves the QP RESET→INIT→RTR→RTS by hand and echoes checksummed
// payloads over SEND/RECV until the client leaves. Client N+1 is refused
// with an explicit "at capacity" reply.
//
// # Resource modes
//
// The mode decides what each client costs the server. Besides the counts
// of verbs objects, on rxe every CQ ring and every QP's send and receive
// ring is a memory mapping of the server process, and vm.max_map_count
// (65,530 by default) bounds those: per-client mode meets it near 16k
// clients. Per client (N = --max-clients, M = --msg-size, G = clients per
// group = min(⌊max_cqe/2⌋, N), D = receive buffers per SRQ = min(G,
// Config.SRQDepth or DefaultSRQDepth = 1024, max_srq_wr)):
//
//	mode        per client                   fixed, shared by the clients                rxe mappings per client
//	per-client  1 QP + 2 CQ + 2 MR (M bytes)  —                                           4: 2 CQ rings, SQ, RQ
//	shared-cq   1 QP + 2 MR (M bytes)         2 CQ per group of G                         2: SQ, RQ
//	pool        1 QP                          2 CQ per group; 1 MR of 2·N·M               2: SQ, RQ
//	srq         1 QP without RQ               2 CQ + 1 SRQ per group; 1 MR of ⌈N/G⌉·D·M   1: SQ
//
// All modes also hold 1 PD; a group's rings add 2 mappings (3 with its
// SRQ) for up to G clients. Groups are created as clients arrive and kept
// until the server stops; the pool is registered at start, so
// registrations do not grow with clients: in pool mode a send and a
// receive slot per client (2·N·M pinned whether or not the clients come:
// 2000 clients of 4 KiB, 16 MiB), in srq mode D buffers per group (one
// group up to 16,383 clients on rxe: 1024 × 4 KiB = 4 MiB).
//
// # How a connected client is served
//
// per-client and shared-cq (the predecessor's layout, kept as it was): a
// goroutine per client runs the echo loop (await a receive, verify, copy
// to the send buffer, repost, send, await the send) until the client
// leaves; its stack, grown by the TLS handshake, is most of what such a
// client costs in server memory besides its buffers.
//
// pool and srq: no goroutine per client. The handler returns once the
// client is connected, and the group's CQ routers run the echo; the
// client's departure (the hangup watcher) releases it, and Serve's
// shutdown stops the watcher and releases the clients still connected.
// A client's mutex serialises its completions with its release. A payload
// that fails verification, or a failed echo, ends the client (a "message"
// failure), as in the other modes.
//
// # Detached clients
//
// By default a client's TLS connection lives as long as the client, and
// its end (EOF, reset, or any byte) is the departure: one socket, so one
// open file, per connected client. With Config.Detach (serve --detach)
// the server answers the hello with exchange.Detached and closes the
// connection once that is written; the client closes its end too, and
// when it leaves it sends a goodbye over its QP (a checksummed header
// whose sequence is payload.Bye), waits for the RC acknowledgement, then
// destroys the QP. The server releases the client on the goodbye, in
// every mode, and counts no failure. What it gives up: a client that
// dies without a goodbye keeps its QP and slot until the server stops
// (or an echo to it fails), since an RC responder learns nothing of a
// peer that went silent. Measured: `rdmaprobe ramp --backend sim
// --clients 100000 --procs 2 --mode srq --detach` on the host, whose hard
// RLIMIT_NOFILE is 20,000, connected all 100,000 with the server's
// descriptors peaking at 393.
//
// A goodbye the server's device acknowledged is in a CQ, and counts as
// a goodbye even when the server stops before handling it: Serve stops
// the shared-CQ routers first, which handle what their CQs hold, and a
// handler ended by the stop looks for a goodbye already received.
//
// pool: the receive router verifies the message in the client's receive
// slot and, if the client's send slot is free, copies it there, reposts
// the receive and sends; otherwise the message stays in the receive slot
// until the send router sees the previous echo complete (an echo's send
// completion may be routed after the next message's receive), and the
// client's next message waits (RNR) meanwhile.
//
// srq: the group's receive router takes each receive completion,
// finds the client by WC.QPN and the SRQ buffer by WC.WRID, verifies the
// payload there and sends the echo out of that same buffer (no copy);
// the send router returns the buffer to the SRQ when the echo's send
// completes. Release destroys the QP, then returns the buffers of the
// client's echoes in flight to the SRQ; every buffer posting carries a
// generation in its wrID, so a completion that surfaces after release
// took its buffer back is recognised as stale.
//
// The SRQ buffers are sized to what can be in flight, not to N: a client
// has one message outstanding during its round trips and none once
// connected, and a load generator has --inflight attempts in progress. A
// message that finds its SRQ empty is answered RNR by the responder, and
// the client's QP retries until a buffer is posted (rnr_retry 7 =
// forever): it waits, it does not fail. A client holds at most
// QPMaxSendWR + 2 buffers (echoes in flight and verified messages waiting
// for a send slot, since an echo's send completion may be routed after
// the next message's receive); one that sends more without taking its
// echoes is dropped. An authenticated client that posts no receive for
// its echoes holds QPMaxSendWR buffers until it leaves. A buffer the
// device took for a message that never completed, because the client
// left mid-message and its QP was destroyed, may yield no completion at
// all (the verbs promise none after destroy): it is not reposted before
// the server stops.
//
// Measured with `rdmaprobe ramp --clients 2000 --mode X` on rxe0 (Linux
// 6.1 in the QEMU guest), the server process's share counted by the
// kernel and its mappings sampled from /proc: per-client 2000 QP + 4000
// CQ + 4000 MR, 4.02 mappings per client; shared-cq 2000 QP + 2 CQ +
// 4000 MR, 2.02; pool 2000 QP + 2 CQ + 1 MR, 2.02; srq 2000 QP + 2 CQ + 1
// MR + 1 SRQ, 1.02. With vm.max_map_count 3000 and 2000 clients, srq held
// all 2000 at 2,133 mappings while shared-cq stopped at 1,433
// (ibv_create_qp: ENOMEM).
//
// Server memory (RSS growth per connected client), `rdmaprobe ramp
// --backend sim --clients 15000 --procs 2 --mode X`: per-client 31–33 KB;
// pool 35.6 KB with a goroutine per client, 21.4 KB event-driven (its
// 2·N·M pool is Go heap on sim and raises the GC's heap goal);
// srq 35 KB with a goroutine, a send slot per client and N SRQ buffers,
// 5.5–6.0 KB event-driven with D = 1024. On rxe0 in the guest (2000
// clients, the QPs' rings mapped into the process included) srq went
// from 25.8 to 14.9 KB.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/hangup"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Resource modes (see the package documentation for their costs).
const (
	// ModePerClient gives each client 1 QP + 2 CQ + 2 MR, as the predecessor.
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
)

// Modes lists the supported resource modes, from the most per-client
// resources to the fewest.
var Modes = []string{ModePerClient, ModeSharedCQ, ModePool, ModeSRQ}

// ValidMode reports whether m is one of Modes.
func ValidMode(m string) error {
	for _, x := range Modes {
		if m == x {
			return nil
		}
	}
	return fmt.Errorf("unknown resource mode %q (want one of %s)", m, strings.Join(Modes, ", "))
}

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
	// srq mode (0 = DefaultSRQDepth); never more than the group's clients
	// or max_srq_wr.
	SRQDepth int
	// Detach closes each client's control connection once the client is
	// accepted (exchange.Detached), so the server holds no socket per
	// connected client; the client leaves by sending a goodbye over its
	// QP (payload.Bye). A client that dies without one keeps its QP and
	// slot until the server stops or an echo to it fails: nothing else
	// tells an RC responder that its peer is gone.
	Detach bool
	// InUse, if set, reports the fabric objects in use ("qp", "cq", "mr",
	// "pd"); the server keeps the highest counts in its stats. The sim
	// fabric provides it: its device lives in this process, out of
	// reach of the kernel's RDMA resource tracking.
	InUse func() map[string]int
}

// Server serves one configuration until its context ends.
type Server struct {
	cfg  Config
	dev  fabric.Device
	pd   fabric.PD
	port fabric.PortInfo
	ln   net.Listener

	active atomic.Int64
	shared *sharedCQs
	pool   *memPool // pool and srq modes

	mu    sync.Mutex
	stats result.ServerStats
	psns  map[uint32]struct{}
	// hellos holds the endpoints of hellos taken (accepted or being set
	// up), so a replayed hello is refused.
	hellos map[helloKey]struct{}

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
	s := &Server{cfg: cfg, dev: dev, pd: pd, port: dev.Port(), psns: map[uint32]struct{}{},
		hellos: map[helloKey]struct{}{}}
	s.stats.Failures = map[string]int{}
	s.stats.Detached = cfg.Detach
	s.stats.Errors = map[string]int{}
	caps := dev.Caps()
	per := groupSize(caps, cfg.MaxClients)
	switch cfg.Mode {
	case ModeSharedCQ:
		s.shared = newSharedCQs(dev, pd, cfg.MaxClients, per, false, nil, 0)
	case ModePool:
		if s.pool, err = newMemPool(pd, caps, cfg.MaxClients, cfg.MsgSize); err != nil {
			s.teardown()
			return nil, err
		}
		s.shared = newSharedCQs(dev, pd, cfg.MaxClients, per, true, nil, 0)
	case ModeSRQ:
		depth := srqDepth(caps, per, cfg.SRQDepth)
		groups := (cfg.MaxClients + per - 1) / per
		if s.pool, err = newBufPool(pd, caps, groups*depth, cfg.MsgSize); err != nil {
			s.teardown()
			return nil, err
		}
		s.shared = newSharedCQs(dev, pd, cfg.MaxClients, per, true, s.pool, depth)
	}
	lc := net.ListenConfig{}
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

// Serve accepts clients until ctx ends, then releases every client's
// resources and the device. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	var acceptErr error
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				if errors.Is(err, syscallEMFILE) || errors.Is(err, syscallENFILE) {
					// Out of descriptors: note it and keep serving those
					// already connected rather than dying, backing off
					// (as net/http does) instead of spinning.
					s.fail("accept", err)
					backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
					select {
					case <-time.After(backoff):
					case <-ctx.Done():
					}
					continue
				}
				acceptErr = err
			}
			break
		}
		backoff = 0
		s.mu.Lock()
		s.stats.Accepted++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(ctx, c)
		}()
	}
	cancel()
	if s.shared != nil {
		s.shared.stop()
	}
	s.wg.Wait()
	// No handler is left to adopt a client: stop the departure watch and
	// release the srq-mode clients still connected.
	s.hangups.Close()
	if s.shared != nil {
		for _, c := range s.shared.clients() {
			c.release()
		}
	}
	s.readers.Wait()
	s.teardown()
	return acceptErr
}

// Stats returns a copy of the server's counters.
func (s *Server) Stats() result.ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Failures = copyMap(s.stats.Failures)
	st.Errors = copyMap(s.stats.Errors)
	if s.stats.Resources != nil {
		st.Resources = copyMap(s.stats.Resources)
	}
	return st
}

func copyMap(m map[string]int) map[string]int {
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// teardown releases what New created, after every client: the groups'
// SRQs and CQs, the pool, the PD, the device.
func (s *Server) teardown() {
	if s.shared != nil {
		s.shared.close()
	}
	if s.pool != nil {
		s.pool.close()
	}
	if s.pd != nil {
		s.pd.Dealloc()
	}
	s.dev.Close()
}

func (s *Server) fail(class string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Failures[class]++
	if len(s.stats.Errors) < 50 || s.stats.Errors[err.Error()] > 0 {
		s.stats.Errors[err.Error()]++
	}
}

// admit reserves a client slot; false means the server is at capacity.
func (s *Server) admit() bool {
	for {
		n := s.active.Load()
		if n >= int64(s.cfg.MaxClients) {
			return false
		}
		if s.active.CompareAndSwap(n, n+1) {
			s.mu.Lock()
			if int(n+1) > s.stats.PeakActive {
				s.stats.PeakActive = int(n + 1)
			}
			s.mu.Unlock()
			return true
		}
	}
}

// newPSN draws a 24-bit PSN from crypto/rand, unique among the PSNs this
// server has issued.
func (s *Server) newPSN() (uint32, error) {
	var b [4]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		psn := binary.BigEndian.Uint32(b[:]) & 0xffffff
		s.mu.Lock()
		_, dup := s.psns[psn]
		if !dup {
			s.psns[psn] = struct{}{}
		}
		s.mu.Unlock()
		if !dup {
			return psn, nil
		}
	}
}

// helloKey is the endpoint a hello names.
type helloKey struct {
	QPN, PSN uint32
	GID      fabric.GID
	LID      uint16
}

// claimHello records key; false means a hello with the same endpoint was
// already accepted (or is being set up), so this one is a replay.
func (s *Server) claimHello(k helloKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.hellos[k]; dup {
		return false
	}
	s.hellos[k] = struct{}{}
	return true
}

// releaseHello forgets a hello that was not accepted (refused at capacity
// or failed setup), so the client may send it again.
func (s *Server) releaseHello(k helloKey) {
	s.mu.Lock()
	delete(s.hellos, k)
	s.mu.Unlock()
}

func (s *Server) handle(ctx context.Context, raw net.Conn) {
	adopted := false
	defer func() {
		if !adopted {
			raw.Close()
		}
	}()
	tc := tls.Server(raw, s.cfg.TLS)
	hctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		s.fail(result.OutcomeTLS, err)
		return
	}
	tc.SetReadDeadline(time.Now().Add(s.cfg.ExchangeTimeout))
	hello, err := exchange.Read(tc)
	if err != nil {
		s.fail(result.OutcomeExchange, fmt.Errorf("read hello: %w", err))
		return
	}
	if hello.Type != exchange.Hello {
		s.fail(result.OutcomeExchange, fmt.Errorf("expected hello, got message type %d", hello.Type))
		return
	}
	tc.SetWriteDeadline(time.Now().Add(s.cfg.ExchangeTimeout))
	key := helloKey{QPN: hello.QPN, PSN: hello.PSN, GID: hello.GID, LID: hello.LID}
	if !s.claimHello(key) {
		s.fail(result.OutcomeExchange, errors.New(exchange.ReasonReplayed))
		exchange.Write(tc, exchange.Msg{Type: exchange.Refuse, Reason: exchange.ReasonReplayed})
		return
	}
	accepted := false
	defer func() {
		if !accepted {
			s.releaseHello(key)
		}
	}()
	if !s.admit() {
		s.mu.Lock()
		s.stats.Refused++
		s.mu.Unlock()
		exchange.Write(tc, exchange.Msg{Type: exchange.Refuse, Reason: exchange.ReasonAtCapacity})
		return
	}

	// From here on c.release gives back the admission with the rest.
	c := &conn{s: s, slot: -1}
	defer func() {
		if !adopted {
			c.release()
		}
	}()
	accept, class, err := c.setup(hello)
	if err != nil {
		s.fail(class, err)
		// The class prefix lets the client classify the server's failure.
		exchange.Write(tc, exchange.Msg{Type: exchange.Refuse, Reason: class + ": " + err.Error()})
		return
	}
	if err := exchange.Write(tc, accept); err != nil {
		s.fail(result.OutcomeExchange, fmt.Errorf("write accept: %w", err))
		return
	}
	accepted = true
	tc.SetDeadline(time.Time{})
	if s.cfg.Detach {
		// The client was told (Detached); the connection ends here and
		// the client's goodbye over its QP says when it leaves. The socket
		// is closed without a TLS close_notify: Detached is the protocol's
		// last message, complete and authenticated, so the alert would say
		// nothing new, and it was half of what the close cost (a record
		// sealed and written per client; ramp --detach profiles on rxe0).
		raw.Close()
	}
	s.mu.Lock()
	s.stats.Connected++
	if s.cfg.InUse != nil {
		if s.stats.Resources == nil {
			s.stats.Resources = map[string]int{}
		}
		for k, v := range s.cfg.InUse() {
			s.stats.Resources[k] = max(s.stats.Resources[k], v)
		}
	}
	s.mu.Unlock()

	// The connection lives as long as the client: its end is the signal to
	// release the client's QP. Nothing travels over TLS after the
	// exchange, so the server watches the raw socket and lets the TLS state
	// (record buffers, handshake leftovers: most of a connection's memory)
	// be collected: any byte (the client's close_notify, or stray data) or
	// EOF/reset means the client is gone.
	tc = nil
	if s.shared != nil && s.shared.events {
		// The routers echo; the watcher, a goodbye or shutdown releases.
		if s.cfg.Detach {
			adopted = s.adopt(c, nil)
		} else {
			adopted = s.adopt(c, raw)
		}
		return
	}
	cctx, ccancel := context.WithCancel(ctx)
	release := func() {}
	if !s.cfg.Detach {
		release = s.watchDeparture(raw, ccancel)
	}
	err = c.echo(cctx)
	// Before ccancel: a done cctx means the client left (or the server is
	// stopping) and that is what ended the echo, not a failure.
	departed := cctx.Err() != nil
	if departed && s.cfg.Detach && !errors.Is(err, errBye) && c.saidGoodbye() {
		err = errBye
	}
	ccancel()
	release()
	if errors.Is(err, errBye) || !departed {
		s.ended(err)
	}
}

// goodbye counts a client released on its goodbye.
func (s *Server) goodbye() {
	s.mu.Lock()
	s.stats.Goodbyes++
	s.mu.Unlock()
}

// ended counts why a client's echo ended: a goodbye, or a message
// failure (nil: it did not end).
func (s *Server) ended(err error) {
	if errors.Is(err, errBye) {
		s.goodbye()
	} else if err != nil {
		s.fail(result.OutcomeMessage, err)
	}
}

// errBye ends a client that said goodbye over its QP (payload.Bye): a
// departure, not a failure.
var errBye = errors.New("the client said goodbye")

// checkMessage verifies a received payload: nil for a message to echo,
// errBye for a goodbye.
func checkMessage(b []byte) error {
	seq, err := payload.Check(b)
	if err == nil && seq == payload.Bye {
		err = errBye
	}
	return err
}

// watchDeparture calls gone when the client behind raw leaves (EOF,
// reset, or any byte: it has nothing more to say after the exchange).
// release ends the watch and closes raw.
func (s *Server) watchDeparture(raw net.Conn, gone func()) (release func()) {
	if hc, ok := raw.(hangup.Conn); ok {
		if stop, err := s.hangups.Watch(hc, gone); err == nil {
			return func() { stop(); raw.Close() }
		}
	}
	// Not a socket (or the watcher refused it): a goroutine reads instead.
	left := make(chan struct{})
	go func() {
		defer close(left)
		var b [1]byte
		raw.Read(b[:])
		gone()
	}()
	return func() { raw.Close(); <-left }
}

// conn is one admitted client's verbs resources. The client's send
// buffer is sendMR[sendOff:sendOff+MsgSize], its receive buffer likewise,
// in MRs of its own (per-client, shared-cq) or in the server's pool
// (pool). In srq mode it has neither: messages land in SRQ buffers and
// are echoed from there (echo.go).
type conn struct {
	s                *Server
	sendCQ, recvCQ   fabric.CQ
	sendMR, recvMR   fabric.MR
	sendOff, recvOff int
	own              []fabric.MR // registered for this client alone
	slot             int         // pool slot, -1 if none
	qp               fabric.QP
	sub              *subscription

	// pool and srq modes (echo.go): mu serialises the routers' echo with
	// release.
	mu       sync.Mutex
	released bool
	inflight [QPMaxSendWR]uint64 // wrIDs of echoes being sent; 0 = free (pool: [0] only)
	pending  [maxPending]pendingEcho
	npending int    // pool: 1 while a verified message waits in the receive slot
	sends    uint64 // pool: wrID of the last echo

	raw     net.Conn // the client's socket, once adopted
	unwatch func()
}

func (c *conn) setup(h exchange.Msg) (exchange.Msg, string, error) {
	s := c.s
	mapped, err := s.maps.check()
	if err != nil {
		return exchange.Msg{}, result.OutcomeQPCreate, err
	}
	defer mapped()
	if s.shared != nil {
		c.sub, err = s.shared.subscribe()
		if err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
		c.sendCQ, c.recvCQ = c.sub.group.send, c.sub.group.recv
	} else {
		if c.sendCQ, err = s.dev.CreateCQ(QPMaxSendWR); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
		if c.recvCQ, err = s.dev.CreateCQ(QPMaxRecvWR); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
	}
	switch s.cfg.Mode {
	case ModeSRQ:
		// Messages land in SRQ buffers and echoes go out of them.
	case ModePool:
		if c.slot, err = s.pool.get(); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
		c.sendMR, c.sendOff = s.pool.mr, s.pool.sendOff(c.slot)
		c.recvMR, c.recvOff = s.pool.mr, s.pool.recvOff(c.slot)
	default:
		if c.sendMR, err = s.pd.RegMR(s.cfg.MsgSize, fabric.AccessLocalWrite); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
		c.own = append(c.own, c.sendMR)
		if c.recvMR, err = s.pd.RegMR(s.cfg.MsgSize, fabric.AccessLocalWrite); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
		c.own = append(c.own, c.recvMR)
	}
	attr := fabric.QPInitAttr{
		SendCQ: c.sendCQ, RecvCQ: c.recvCQ,
		MaxSendWR: QPMaxSendWR, MaxRecvWR: QPMaxRecvWR, MaxSendSGE: 1, MaxRecvSGE: 1,
	}
	if c.sub != nil && c.sub.group.srq != nil {
		attr.SRQ, attr.MaxRecvWR, attr.MaxRecvSGE = c.sub.group.srq, 0, 0
	}
	c.qp, err = s.pd.CreateQP(attr)
	mapped() // its mappings exist now, or never will
	if err != nil {
		return exchange.Msg{}, result.OutcomeQPCreate, err
	}
	if c.sub != nil {
		c.sub.bind(c.qp.QPN(), c)
	}
	if err := c.qp.ToInit(fabric.InitAttr{Port: s.port.Port, Access: fabric.AccessLocalWrite}); err != nil {
		return exchange.Msg{}, result.OutcomeInit, err
	}
	// The receive is posted before RTR so the client's first SEND always
	// finds a buffer (in srq mode the SRQ is stocked already).
	if attr.SRQ == nil {
		if err := c.qp.PostRecv(0, c.recvMR, c.recvOff, s.cfg.MsgSize); err != nil {
			return exchange.Msg{}, result.OutcomeInit, err
		}
	}
	psn, err := s.newPSN()
	if err != nil {
		return exchange.Msg{}, result.OutcomeExchange, fmt.Errorf("generate PSN: %w", err)
	}
	mtu := h.MTU
	if s.port.ActiveMTU < mtu {
		mtu = s.port.ActiveMTU
	}
	if err := c.qp.ToRTR(RTR(s.port, h, mtu)); err != nil {
		return exchange.Msg{}, result.OutcomeRTR, err
	}
	if err := c.qp.ToRTS(RTS(psn)); err != nil {
		return exchange.Msg{}, result.OutcomeRTS, err
	}
	typ := exchange.Accept
	if s.cfg.Detach {
		typ = exchange.Detached
	}
	return exchange.Msg{Type: typ, QPN: c.qp.QPN(), PSN: psn,
		LID: s.port.LID, MTU: s.port.ActiveMTU, GID: s.port.GID}, "", nil
}

// RTR returns the INIT→RTR attributes towards the peer described by m.
func RTR(local fabric.PortInfo, m exchange.Msg, mtu fabric.MTU) fabric.RTRAttr {
	return fabric.RTRAttr{
		PathMTU: mtu, DestQPN: m.QPN, RQPSN: m.PSN,
		MaxDestRdAtomic: 1, MinRNRTimer: QPMinRNR,
		DLID: m.LID, DGID: m.GID, GIDIndex: local.GIDIndex, HopLimit: QPHopLimit,
		Port: local.Port,
	}
}

// RTS returns the RTR→RTS attributes with our own send PSN.
func RTS(psn uint32) fabric.RTSAttr {
	return fabric.RTSAttr{SQPSN: psn, Timeout: QPTimeout, RetryCnt: QPRetryCnt,
		RNRRetry: QPRNRRetry, MaxRdAtomic: 1}
}

func (c *conn) await(ctx context.Context, cq fabric.CQ, ch chan fabric.WC) (fabric.WC, error) {
	if ch == nil {
		return fabric.Await(ctx, cq)
	}
	select {
	case wc := <-ch:
		return wc, nil
	case <-ctx.Done():
		return fabric.WC{}, ctx.Err()
	}
}

// echo returns each verified payload to the client until ctx ends.
func (c *conn) echo(ctx context.Context) error {
	var sendCh, recvCh chan fabric.WC
	if c.sub != nil {
		sendCh, recvCh = c.sub.send, c.sub.recv
	}
	size := c.s.cfg.MsgSize
	for {
		wc, err := c.await(ctx, c.recvCQ, recvCh)
		if err != nil {
			return err
		}
		in := c.inbound(wc)
		if err := c.handle(wc, in); err != nil {
			return err
		}
		if err := c.qp.PostRecv(0, c.recvMR, c.recvOff, size); err != nil {
			return err
		}
		if err := c.qp.PostSend(1, c.sendMR, c.sendOff, len(in)); err != nil {
			return err
		}
		wc, err = c.await(ctx, c.sendCQ, sendCh)
		if err != nil {
			return err
		}
		if wc.Status != fabric.WCSuccess {
			return &fabric.WCError{Op: "send", Status: wc.Status}
		}
	}
}

// saidGoodbye reports whether a goodbye already waits for c when the
// server stops: its device acknowledged it, so the client has left on it
// and must be counted so (a run stops the server as soon as its load
// generators exit). In shared-cq mode the routers hand over what their
// CQs held first (Serve stops them before waiting for the handlers).
func (c *conn) saidGoodbye() bool {
	var wc fabric.WC
	if c.sub != nil {
		<-c.sub.owner.stopped
		select {
		case wc = <-c.sub.recv:
		default:
			return false
		}
	} else {
		var wcs [1]fabric.WC
		if n, err := c.recvCQ.Poll(wcs[:]); err != nil || n == 0 {
			return false
		}
		wc = wcs[0]
	}
	return errors.Is(c.handle(wc, c.inbound(wc)), errBye)
}

// inbound is the message a receive completion of c left in its receive
// buffer.
func (c *conn) inbound(wc fabric.WC) []byte {
	return c.recvMR.Buf()[c.recvOff : c.recvOff+min(max(wc.ByteLen, 0), c.s.cfg.MsgSize)]
}

// handle checks a received payload and copies it to the send buffer.
func (c *conn) handle(wc fabric.WC, in []byte) error {
	if wc.Status != fabric.WCSuccess {
		return &fabric.WCError{Op: "recv", Status: wc.Status}
	}
	if err := checkMessage(in); err != nil {
		return err
	}
	copy(c.sendMR.Buf()[c.sendOff:c.sendOff+len(in)], in)
	return nil
}

// destroy releases the client's resources in the order verbs requires:
// QP before the CQs and MRs it uses (release returns its SRQ buffers
// after). Only release calls it; it reports whether there was a QP.
func (c *conn) destroy() (released bool) {
	if c.qp != nil {
		c.qp.Destroy()
		released = true
	}
	if c.sub != nil {
		c.sub.unsubscribe()
	}
	for _, mr := range c.own {
		mr.Dereg()
	}
	if c.slot >= 0 {
		c.s.pool.put(c.slot)
	}
	if c.sub == nil {
		for _, cq := range []fabric.CQ{c.sendCQ, c.recvCQ} {
			if cq != nil {
				cq.Destroy()
			}
		}
	}
	return released
}
