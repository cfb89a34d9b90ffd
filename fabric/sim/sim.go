// Package sim is a pure-Go simulated fabric: the fabric interfaces of
// rdmaprobe backed by user-space bookkeeping instead of an RDMA device, so
// the server and client run unchanged on machines with nothing installed and
// at client counts a real device in a small VM cannot reach.
//
// What is emulated, and how faithfully:
//
//   - Device caps (ibv_query_device) default to what rxe reports on Linux
//     6.1 and are enforced with the errnos rxe returns on that kernel (see
//     DefaultCaps and the errno notes on each verb). A Provider is one
//     simulated device: every context opened from it shares its pools, like
//     contexts on one rxe device. The device lives in one OS process, so the
//     caps are per process, not host-wide as with a kernel device.
//   - RC QPs follow the verbs state machine RESET→INIT→RTR→RTS; ERR is
//     reached only through a transport or responder error, as there is no
//     modify to ERR in the fabric interface.
//   - The data path runs between processes over TCP: each opened context
//     listens on its address (DeviceConfig.Addr, default 127.0.0.1) as its
//     "wire", its GID is that address IPv4-mapped (::ffff:a.b.c.d, as
//     RoCE v2), its LID is the wire's port, and RTR's DGID and DLID name
//     the peer context, so QPs connect across hosts as they would on
//     RoCE. All QPs towards one peer share a single multiplexed
//     connection, so 100,000 QPs cost two connections per process pair,
//     not 100,000 sockets.
//   - RC transport: one PSN per message, ACK per message, PSN sequence NAK,
//     retransmission on timeout with retry_cnt, invalid-request NAK for a
//     message longer than the posted receive, and RNR handled as
//     rnr_retry=7 (the responder holds the message until a receive is
//     posted, whatever rnr_retry says).
//   - SRQs: a SEND arriving at a QP created with an SRQ takes the oldest
//     receive posted to the SRQ; with none posted it is held and RNR-NAKed
//     exactly as for an empty receive queue, and delivered when a receive
//     is posted to the SRQ. Such a QP has no receive queue (PostRecv is
//     EINVAL, as librxe answers), and the SRQ is busy (EBUSY) while QPs
//     use it.
//   - RDMA WRITE and READ (rdma.go) against regions registered with
//     remote access: the responder checks its QP's access flags, the
//     rkey, the PD and the bounds and answers a violation with a remote
//     access error (IBV_WC_REM_ACCESS_ERR, both QPs to ERR); requests
//     execute in PSN order, behind a SEND waiting for a receive.
//   - A service delay on purpose (Options.ServiceDelay, delay.go): a
//     device that transmits one frame per delay once it has enough QPs,
//     for tests that plant the client count where latency crosses a bound.
//
// Nothing here is an RDMA measurement: Provider.Simulated reports true.
package sim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// Options configure a simulated device.
type Options struct {
	// Caps bound the device; a zero field takes its DefaultCaps value.
	Caps fabric.Caps
	// DeviceName is what Devices lists and Open accepts ("sim0" if empty).
	DeviceName string
	// ServiceDelay, when positive, makes the device transmit one frame
	// per ServiceDelay while at least ServiceDelayFrom QPs exist on it
	// (see delay.go): a responder that is slow on purpose, so a test can
	// plant the N at which latency crosses a bound.
	ServiceDelay     time.Duration
	ServiceDelayFrom int
	// UDDropEvery, when positive, makes the device drop every
	// UDDropEvery-th datagram its UD QPs receive: loss on purpose, so a
	// test can see it detected and counted.
	UDDropEvery int
	// QPCache, when positive, gives the device an LRU cache of that many
	// QP contexts, as a NIC holds on chip: a frame sent from a QP outside
	// it waits QPCacheMiss in the transmit queue (counters.go), so a
	// test can plant the client count past which the rate falls.
	QPCache int
}

// DefaultCaps returns the attributes ibv_query_device reports for rxe on
// Linux 6.1, from drivers/infiniband/sw/rxe/rxe_param.h of that release
// (DEFAULT_MAX_VALUE = 1<<20, since commit 0994a1bcd5f7 "RDMA/rxe: Bump up
// default maximum values used via uverbs", v5.15):
//
//	max_qp      = DEFAULT_MAX_VALUE - RXE_MIN_QP_INDEX(16)      = 1048560
//	max_qp_wr   = RXE_MAX_QP_WR = DEFAULT_MAX_VALUE             = 1048576
//	max_sge     = RXE_MAX_SGE                                   = 32
//	max_cq      = RXE_MAX_CQ = DEFAULT_MAX_VALUE                = 1048576
//	max_cqe     = (1 << RXE_MAX_LOG_CQE(15)) - 1                = 32767
//	max_mr      = (DEFAULT_MAX_VALUE >> 1) - RXE_MIN_MR_INDEX(1) = 524287
//	max_mr_size = RXE_MAX_MR_SIZE = -1ull
//	max_pd      = RXE_MAX_PD = DEFAULT_MAX_VALUE                = 1048576
//	max_srq     = DEFAULT_MAX_VALUE - RXE_MIN_SRQ_INDEX(0x20001) = 917503
//	max_srq_wr  = RXE_MAX_SRQ_WR = DEFAULT_MAX_VALUE            = 1048576
//	max_ah      = RXE_MAX_AH = (1 << 15) - 1                    = 32767
//
// max_qp, max_cq, max_mr, max_pd and max_srq match ibv_devinfo -v measured
// in the Linux 6.1 guest of the vm backend. max_qp_wr and max_srq_wr were 0x4000 (16384)
// only before v5.15.
func DefaultCaps() fabric.Caps {
	return fabric.Caps{
		MaxQP:     1048560,
		MaxQPWR:   1 << 20,
		MaxSGE:    32,
		MaxCQ:     1 << 20,
		MaxCQE:    1<<15 - 1,
		MaxMR:     524287,
		MaxMRSize: ^uint64(0),
		MaxPD:     1 << 20,
		MaxSRQ:    917503,
		MaxSRQWR:  1 << 20,
		MaxAH:     1<<15 - 1,
		FWVersion: "sim",
	}
}

// Limits of the port that are not device caps.
const (
	portNum    = 1
	gidTblLen  = 1024 // RXE_PORT_GID_TBL_LEN
	defaultGID = 1    // rxe on lo: index 1 is ::ffff:127.0.0.1 (RoCE v2)
	maxRdAtom  = 128  // RXE_MAX_QP_RD_ATOM
	firstQPN   = 17   // rxe: index 16 goes to the GSI QP, users start at 0x11
	qpnLimit   = 1 << 24
)

// Provider is one simulated device. It is safe for concurrent use.
type Provider struct {
	name string
	caps fabric.Caps
	opts Options

	// qpCount mirrors nQP for readers that hold a QP's lock.
	qpCount atomic.Int64

	// mu guards the pools: counts, the QPN table and the key counter.
	mu   sync.RWMutex
	nPD  int
	nCQ  int
	nMR  int
	nQP  int
	nSRQ int
	nAH  int
	// udSeen counts the datagrams received (Options.UDDropEvery).
	udSeen atomic.Int64
	qps    map[uint32]*qp
	// remote holds the MRs with remote access by rkey, for responders
	// (which hold a QP's lock: remoteMu is taken after qp.mu and after
	// mu, never before).
	remoteMu sync.RWMutex
	remote   map[uint32]*mr
	nextQPN  uint32
	nextMR   uint32
}

var _ fabric.Provider = (*Provider)(nil)

// New returns a simulated device with opts applied over the defaults.
func New(opts Options) *Provider {
	c, d := opts.Caps, DefaultCaps()
	def := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	def(&c.MaxQP, d.MaxQP)
	def(&c.MaxQPWR, d.MaxQPWR)
	def(&c.MaxSGE, d.MaxSGE)
	def(&c.MaxCQ, d.MaxCQ)
	def(&c.MaxCQE, d.MaxCQE)
	def(&c.MaxMR, d.MaxMR)
	def(&c.MaxPD, d.MaxPD)
	def(&c.MaxSRQ, d.MaxSRQ)
	def(&c.MaxSRQWR, d.MaxSRQWR)
	def(&c.MaxAH, d.MaxAH)
	if c.MaxMRSize == 0 {
		c.MaxMRSize = d.MaxMRSize
	}
	if c.FWVersion == "" {
		c.FWVersion = d.FWVersion
	}
	name := opts.DeviceName
	if name == "" {
		name = "sim0"
	}
	return &Provider{name: name, caps: c, opts: opts, qps: make(map[uint32]*qp), remote: make(map[uint32]*mr), nextQPN: firstQPN, nextMR: 1}
}

// Name is the backend name recorded in results.
func (p *Provider) Name() string { return "sim" }

// Simulated is always true: nothing here is an RDMA measurement.
func (p *Provider) Simulated() bool { return true }

// Devices lists the one simulated device.
func (p *Provider) Devices() ([]string, error) { return []string{p.name}, nil }

// Open opens a context on the device and starts its wire on cfg.Addr
// (default 127.0.0.1).
func (p *Provider) Open(ctx context.Context, cfg fabric.DeviceConfig) (fabric.Device, error) {
	if cfg.Name != "" && cfg.Name != p.name {
		return nil, verr("ibv_open_device", syscall.ENODEV, fmt.Sprintf("no device %q (have %q)", cfg.Name, p.name))
	}
	port := cfg.Port
	if port == 0 {
		port = portNum
	}
	if port != portNum {
		return nil, verr("ibv_query_port", syscall.EINVAL, fmt.Sprintf("port %d (device has port 1 only)", cfg.Port))
	}
	gidx := cfg.GIDIndex
	if gidx < 0 {
		gidx = defaultGID
	}
	if gidx >= gidTblLen {
		return nil, verr("ibv_query_gid", syscall.EINVAL, fmt.Sprintf("GID index %d (table has %d entries)", gidx, gidTblLen))
	}
	addr := loopback
	if cfg.Addr != "" {
		a, err := netip.ParseAddr(cfg.Addr)
		if err != nil || !a.Unmap().Is4() {
			return nil, verr("ibv_open_device", syscall.EINVAL, fmt.Sprintf("address %q: the simulated port takes an IPv4 address", cfg.Addr))
		}
		addr = a.Unmap()
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		return nil, fmt.Errorf("sim: start wire on %s: %w", addr, err)
	}
	d := newDevice(p, ln, gidx, addr)
	if p.opts.ServiceDelay > 0 || p.opts.QPCache > 0 {
		d.delay = &delayLine{every: p.opts.ServiceDelay, from: p.opts.ServiceDelayFrom, q: make(chan delayed, delayQueue)}
	}
	if p.opts.QPCache > 0 {
		d.cache = newQPCache(p.opts.QPCache)
	}
	d.start()
	return d, nil
}

// allocQPNLocked returns a free 24-bit QPN, cycling like rxe's
// xa_alloc_cyclic so a destroyed QP's number is not reused at once.
func (p *Provider) allocQPNLocked() uint32 {
	for {
		n := p.nextQPN
		p.nextQPN++
		if p.nextQPN >= qpnLimit {
			p.nextQPN = firstQPN
		}
		if _, used := p.qps[n]; !used {
			return n
		}
	}
}

func verr(verb string, errno syscall.Errno, detail string) error {
	return &fabric.VerbError{Verb: verb, Errno: errno, Detail: detail}
}

// roundQueue is the capacity rxe_queue_init gives a queue asked for n
// entries: one slot is kept empty and the slot count is a power of two, so
// ibv_create_cq(2) holds 3 completions and a QP asked for 2 WRs takes 3.
func roundQueue(n int) int {
	slots := 1
	for slots < n+1 {
		slots <<= 1
	}
	return slots - 1
}

// ring is a FIFO that grows on demand, so a deep queue costs memory only
// when it is used.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		nb := make([]T, max(2*len(r.buf), 2))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)%len(r.buf)] }

func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v
}

func (r *ring[T]) reset() { *r = ring[T]{} }
