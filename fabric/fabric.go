// Package fabric is the seam between rdmaprobe's server/client and the thing
// that provides queue pairs. It mirrors libibverbs closely (device, PD, CQ,
// MR, SRQ, RC QP, manual RESET→INIT→RTR→RTS, post send/recv, poll CQ) so the cgo
// implementation in fabric/verbs and the pure-Go one in fabric/sim are
// interchangeable without touching the server or client code.
//
// Errors that correspond to a verbs call failing carry the verb name and the
// errno (see VerbError), so outcomes can record "ibv_create_qp: ENOMEM".
package fabric

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"time"
)

// Provider opens devices. One per backend ("sim", "verbs").
type Provider interface {
	// Name is the backend name recorded in results ("sim", "verbs").
	Name() string
	// Simulated is true for fabrics whose numbers are not RDMA measurements.
	Simulated() bool
	// Devices lists device names the provider can open.
	Devices() ([]string, error)
	// Open opens a device context (ibv_open_device) and checks the port.
	Open(ctx context.Context, cfg DeviceConfig) (Device, error)
}

// DeviceConfig selects a device, port and GID index.
type DeviceConfig struct {
	Name     string // "" = first device
	Port     int    // 0 = 1
	GIDIndex int    // -1 = auto (first RoCE v2 IPv4-mapped GID, else 0)
	// Addr is the IPv4 address the simulated device's port has (its
	// wire listens there, and its GID is ::ffff:Addr), so simulated
	// QPs can connect across hosts; "" = 127.0.0.1. A real device's
	// addresses are its netdev's, and it ignores Addr.
	Addr string
}

// Caps are the device attributes that bound capacity (ibv_query_device).
type Caps struct {
	MaxQP      int    `json:"max_qp"`
	MaxQPWR    int    `json:"max_qp_wr"`
	MaxSGE     int    `json:"max_sge"`
	MaxCQ      int    `json:"max_cq"`
	MaxCQE     int    `json:"max_cqe"`
	MaxMR      int    `json:"max_mr"`
	MaxMRSize  uint64 `json:"max_mr_size"`
	MaxPD      int    `json:"max_pd"`
	MaxSRQ     int    `json:"max_srq"`
	MaxSRQWR   int    `json:"max_srq_wr"`
	MaxAH      int    `json:"max_ah,omitempty"`
	FWVersion  string `json:"fw_ver,omitempty"`
	VendorID   uint32 `json:"vendor_id,omitempty"`
	VendorPart uint32 `json:"vendor_part_id,omitempty"`
}

// FitsQP says why a QP with wr work requests on each queue, and a CQ
// that completes all of them, is more than c grants; nil when it fits or
// c does not say. what names the request in the error.
func (c Caps) FitsQP(wr int, what string) error {
	switch {
	case c.MaxQPWR > 0 && wr > c.MaxQPWR:
		return fmt.Errorf("%s asks %d work requests of a QP: the device grants %d (max_qp_wr)", what, wr, c.MaxQPWR)
	case c.MaxCQE > 0 && wr > c.MaxCQE:
		return fmt.Errorf("%s asks a CQ of %d entries: the device grants %d (max_cqe)", what, wr, c.MaxCQE)
	}
	return nil
}

// PortInfo is what ibv_query_port and ibv_query_gid report for the chosen port.
type PortInfo struct {
	Port      int    `json:"port"`
	State     string `json:"state"` // "ACTIVE", "DOWN", ...
	LID       uint16 `json:"lid"`
	ActiveMTU MTU    `json:"active_mtu"`
	GIDIndex  int    `json:"gid_index"`
	GID       GID    `json:"gid"`
	LinkLayer string `json:"link_layer"` // "Ethernet", "InfiniBand", "simulated"
}

// GID is a 128-bit global identifier (an IPv6 address on RoCE).
type GID [16]byte

// String renders the GID as IPv6, keeping the ::ffff: prefix of
// IPv4-mapped (RoCE v2) GIDs that net.IP would drop.
func (g GID) String() string {
	ip := net.IP(g[:])
	if v4 := ip.To4(); v4 != nil {
		return "::ffff:" + v4.String()
	}
	return ip.String()
}

// MarshalText renders the GID as an IPv6 address.
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText parses an IPv6/IPv4-mapped address.
func (g *GID) UnmarshalText(b []byte) error {
	ip := net.ParseIP(string(b))
	if ip == nil {
		return fmt.Errorf("invalid GID %q", b)
	}
	copy(g[:], ip.To16())
	return nil
}

// MTU is an IB path MTU enum value, as in enum ibv_mtu (1=256 ... 5=4096).
type MTU int

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, 0 if invalid.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << int(m)
}

// Valid reports whether m is one of the five IB MTUs.
func (m MTU) Valid() bool { return m.Bytes() != 0 }

// Device is an open device context (struct ibv_context).
type Device interface {
	Name() string
	Caps() Caps
	Port() PortInfo
	AllocPD() (PD, error)
	// CreateCQ creates a completion queue with at least cqe entries.
	CreateCQ(cqe int) (CQ, error)
	// Close releases the context (ibv_close_device). Resources must be
	// destroyed first, as with verbs.
	Close() error
}

// Access flags for RegMR (enum ibv_access_flags).
type Access int

const (
	AccessLocalWrite  Access = 1
	AccessRemoteWrite Access = 2
	AccessRemoteRead  Access = 4
)

// PD is a protection domain.
type PD interface {
	// RegMR allocates size bytes of memory the device may access and
	// registers them (ibv_reg_mr). The fabric owns the memory (C memory for
	// verbs, so no Go pointer is retained by C); Buf exposes it until Dereg.
	RegMR(size int, access Access) (MR, error)
	// CreateQP creates an RC or UD QP in RESET state (ibv_create_qp).
	CreateQP(attr QPInitAttr) (QP, error)
	// CreateAH creates an address handle towards a port (ibv_create_ah):
	// what a UD send names as its destination, with a QPN and Q_Key.
	CreateAH(attr AHAttr) (AH, error)
	// CreateSRQ creates a shared receive queue holding at least maxWR
	// receives of up to maxSGE entries each (ibv_create_srq). QPs created
	// with QPInitAttr.SRQ take their receive buffers from it.
	CreateSRQ(maxWR, maxSGE int) (SRQ, error)
	// Dealloc releases the PD (ibv_dealloc_pd); EBUSY while MRs, QPs or
	// SRQs still use it.
	Dealloc() error
}

// SRQ is a shared receive queue (struct ibv_srq). A SEND arriving at any
// QP attached to it consumes the oldest receive posted here; the
// completion goes to that QP's receive CQ with the QP's number in WC.QPN
// and the receive's wrID in WC.WRID.
type SRQ interface {
	// PostRecv posts one receive into mr.Buf()[off:off+length]
	// (ibv_post_srq_recv).
	PostRecv(wrID uint64, mr MR, off, length int) error
	// Destroy releases the SRQ (ibv_destroy_srq); EBUSY while a QP is
	// attached, so QPs go first.
	Destroy() error
}

// MR is a registered memory region.
type MR interface {
	Buf() []byte
	// Addr is the address a peer names to RDMA WRITE or READ Buf()[0]
	// (with RKey): the buffer's virtual address for verbs, a number of
	// the simulated device's own for sim.
	Addr() uint64
	LKey() uint32
	// RKey is 0 unless the MR was registered with remote access.
	RKey() uint32
	Dereg() error
}

// QPType mirrors the two values of enum ibv_qp_type rdmaprobe uses.
type QPType int

const (
	// QPTypeRC is a reliable connected QP: one peer, set at RTR.
	QPTypeRC QPType = iota
	// QPTypeUD is an unreliable datagram QP: no peer, each send names
	// its destination (PostSendUD), a message is one packet of at most
	// the path MTU, and one that finds no receive posted is dropped.
	QPTypeUD
)

// GRHLen is the room a UD receive keeps before the message: the first
// 40 bytes of every UD receive buffer hold the packet's Global Route
// Header (on RoCE v2 over IPv4, its IPv4 header in bytes 20..39), and
// WC.ByteLen counts them.
const GRHLen = 40

// AHAttr mirrors the ibv_ah_attr of an address handle: the destination
// port's LID and GID, and our source GID index (<0: no GRH).
type AHAttr struct {
	DLID     uint16
	DGID     GID
	GIDIndex int
	HopLimit int
	Port     int
}

// AH is an address handle (struct ibv_ah).
type AH interface {
	// Destroy releases it (ibv_destroy_ah).
	Destroy() error
}

// SourceGID returns the sender's GID from the GRH in the first GRHLen
// bytes of a UD receive buffer: an IPv6 GRH's SGID (bytes 8..23), or
// on RoCE v2 over IPv4 (bytes 0..19 zero) the IPv4 header's source
// address (bytes 32..35) as an IPv4-mapped GID. False if grh is short
// or neither.
func SourceGID(grh []byte) (GID, bool) {
	var g GID
	switch {
	case len(grh) < GRHLen:
		return g, false
	case grh[0]>>4 == 6:
		copy(g[:], grh[8:24])
		return g, true
	case grh[20]>>4 == 4:
		g[10], g[11] = 0xff, 0xff
		copy(g[12:], grh[32:36])
		return g, true
	}
	return g, false
}

// PutGRH writes the GRH a UD receive finds in front of a message from
// src, as rxe lays it out: an IPv4 header in bytes 20..39 for an
// IPv4-mapped GID, an IPv6 header otherwise (a simulated fabric uses it).
func PutGRH(b []byte, src, dst GID) {
	clear(b[:GRHLen])
	if ip := net.IP(src[:]); ip.To4() != nil {
		h := b[20:GRHLen]
		h[0] = 0x45
		h[8] = 64 // TTL
		h[9] = 17 // UDP
		copy(h[12:16], src[12:])
		copy(h[16:20], net.IP(dst[:]).To4())
		return
	}
	b[0] = 0x60
	b[6], b[7] = 17, 64
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
}

// QPInitAttr mirrors struct ibv_qp_init_attr for an RC or UD QP.
type QPInitAttr struct {
	// Type is RC unless it says UD.
	Type   QPType
	SendCQ CQ
	RecvCQ CQ
	// SRQ, when set, makes the QP take its receives from that shared
	// receive queue: the QP has no receive queue of its own (MaxRecvWR and
	// MaxRecvSGE are ignored), and QP.PostRecv on it fails with EINVAL.
	SRQ        SRQ
	MaxSendWR  int
	MaxRecvWR  int
	MaxSendSGE int
	MaxRecvSGE int
}

// QPState mirrors enum ibv_qp_state.
type QPState int

const (
	QPSReset QPState = iota
	QPSInit
	QPSRTR
	QPSRTS
	QPSSQD
	QPSSQE
	QPSErr
)

func (s QPState) String() string {
	switch s {
	case QPSReset:
		return "RESET"
	case QPSInit:
		return "INIT"
	case QPSRTR:
		return "RTR"
	case QPSRTS:
		return "RTS"
	case QPSSQD:
		return "SQD"
	case QPSSQE:
		return "SQE"
	case QPSErr:
		return "ERR"
	}
	return fmt.Sprintf("QPState(%d)", int(s))
}

// InitAttr are the attributes of the RESET→INIT transition
// (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT, and
// IBV_QP_ACCESS_FLAGS for RC or IBV_QP_QKEY for UD).
type InitAttr struct {
	PKeyIndex int
	Port      int
	Access    Access // RC only
	// QKey is a UD QP's Q_Key: a datagram is taken only if it carries
	// it (UD only).
	QKey uint32
}

// RTRAttr are the attributes of INIT→RTR for an RC QP. A UD QP takes
// none of them (its RTR is IBV_QP_STATE alone): pass RTRAttr{}.
type RTRAttr struct {
	PathMTU         MTU
	DestQPN         uint32
	RQPSN           uint32 // the remote side's send PSN
	MaxDestRdAtomic int
	MinRNRTimer     int
	// Address vector.
	DLID     uint16
	DGID     GID
	GIDIndex int // source GID index; <0 means no GRH (IB LID routing)
	HopLimit int
	Port     int
}

// RTSAttr are the attributes of RTR→RTS for an RC QP; a UD QP takes
// SQPSN only.
type RTSAttr struct {
	SQPSN       uint32 // our own send PSN
	Timeout     int    // 4.096 µs × 2^Timeout
	RetryCnt    int
	RNRRetry    int // 7 = infinite
	MaxRdAtomic int
}

// QP is an RC or UD queue pair.
type QP interface {
	QPN() uint32
	State() QPState
	ToInit(a InitAttr) error
	ToRTR(a RTRAttr) error
	ToRTS(a RTSAttr) error
	// PostSend posts one signaled IBV_WR_SEND of mr.Buf()[off:off+length].
	PostSend(wrID uint64, mr MR, off, length int) error
	// PostRecv posts one receive into mr.Buf()[off:off+length]. A QP
	// created with an SRQ has no receive queue: EINVAL.
	PostRecv(wrID uint64, mr MR, off, length int) error
	// PostWrite posts one signaled IBV_WR_RDMA_WRITE of
	// mr.Buf()[off:off+length] to the peer's memory at raddr (rkey). It
	// completes (WCRDMAWrite) once the peer acknowledged it: the data is
	// in the peer's memory. The peer's QP must allow AccessRemoteWrite.
	PostWrite(wrID uint64, mr MR, off, length int, raddr uint64, rkey uint32) error
	// PostRead posts one signaled IBV_WR_RDMA_READ of length bytes of
	// the peer's memory at raddr (rkey) into mr.Buf()[off:off+length]
	// (registered with AccessLocalWrite). It completes (WCRDMARead) with
	// the data in place. The peer's QP must allow AccessRemoteRead.
	PostRead(wrID uint64, mr MR, off, length int, raddr uint64, rkey uint32) error
	// PostSendUD posts one signaled IBV_WR_SEND of mr.Buf()[off:off+length]
	// on a UD QP to QP qpn behind ah, with Q_Key qkey. It completes once
	// sent, whether or not it arrives; a message above the path MTU
	// completes as sent too and never leaves (IB C10-93.1.1, as rxe
	// does), so callers check the size first. An RC QP answers EINVAL.
	PostSendUD(wrID uint64, mr MR, off, length int, ah AH, qpn, qkey uint32) error
	Destroy() error
}

// Opcode of a work completion.
type Opcode int

const (
	WCSend Opcode = iota
	WCRecv
	WCRDMAWrite
	WCRDMARead
)

// String names the opcode as the fabric's errors do.
func (o Opcode) String() string {
	switch o {
	case WCSend:
		return "send"
	case WCRecv:
		return "recv"
	case WCRDMAWrite:
		return "write"
	case WCRDMARead:
		return "read"
	}
	return fmt.Sprintf("opcode %d", int(o))
}

// WCStatus mirrors enum ibv_wc_status (only the values we produce or test).
type WCStatus int

const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
)

// Name returns the enum ibv_wc_status name without its IBV_WC_ prefix
// ("RETRY_EXC_ERR"): the key completion errors are counted under.
func (s WCStatus) Name() string {
	switch s {
	case WCSuccess:
		return "SUCCESS"
	case WCLocLenErr:
		return "LOC_LEN_ERR"
	case WCLocQPOpErr:
		return "LOC_QP_OP_ERR"
	case WCLocProtErr:
		return "LOC_PROT_ERR"
	case WCWRFlushErr:
		return "WR_FLUSH_ERR"
	case WCRemInvReqErr:
		return "REM_INV_REQ_ERR"
	case WCRemAccessErr:
		return "REM_ACCESS_ERR"
	case WCRemOpErr:
		return "REM_OP_ERR"
	case WCRetryExcErr:
		return "RETRY_EXC_ERR"
	case WCRNRRetryExcErr:
		return "RNR_RETRY_EXC_ERR"
	case WCFatalErr:
		return "FATAL_ERR"
	case WCRespTimeoutErr:
		return "RESP_TIMEOUT_ERR"
	case WCGeneralErr:
		return "GENERAL_ERR"
	}
	return fmt.Sprintf("STATUS_%d", int(s))
}

// String returns the name used by ibv_wc_status_str.
func (s WCStatus) String() string {
	switch s {
	case WCSuccess:
		return "success"
	case WCLocLenErr:
		return "local length error"
	case WCLocQPOpErr:
		return "local QP operation error"
	case WCLocProtErr:
		return "local protection error"
	case WCWRFlushErr:
		return "Work Request Flushed Error"
	case WCRemInvReqErr:
		return "remote invalid request error"
	case WCRemAccessErr:
		return "remote access error"
	case WCRemOpErr:
		return "remote operation error"
	case WCRetryExcErr:
		return "transport retry counter exceeded"
	case WCRNRRetryExcErr:
		return "RNR retry counter exceeded"
	case WCFatalErr:
		return "fatal error"
	case WCRespTimeoutErr:
		return "response timeout error"
	case WCGeneralErr:
		return "general error"
	}
	return fmt.Sprintf("wc status %d", int(s))
}

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID    uint64
	Status  WCStatus
	Opcode  Opcode
	ByteLen int
	QPN     uint32 // local QP the completion belongs to
	// SrcQP is the sender's QPN of a UD receive, GRH whether the
	// buffer's first GRHLen bytes hold its GRH (IBV_WC_GRH).
	SrcQP uint32
	GRH   bool
}

// CQ is a completion queue. Completions are reaped with Poll; a caller with
// nothing to poll arms the CQ and waits, as with ibv_req_notify_cq and a
// completion channel (see Await).
type CQ interface {
	// Poll fills wc with up to len(wc) completions and returns how many.
	Poll(wc []WC) (int, error)
	// Arm requests an event for the next completion (ibv_req_notify_cq).
	Arm() error
	// Wait blocks until an armed event fires or ctx ends.
	Wait(ctx context.Context) error
	Destroy() error
}

// Await returns the next completion of cq, blocking without spinning:
// poll, arm, poll again (closing the race), then wait for the event.
func Await(ctx context.Context, cq CQ) (WC, error) { return AwaitBusy(ctx, cq, 0) }

// AwaitBusy is Await that first keeps polling an empty cq for up to
// busy (Spin) before it sleeps on the completion channel.
func AwaitBusy(ctx context.Context, cq CQ, busy time.Duration) (WC, error) {
	var wc [1]WC
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return WC{}, err
		}
		if n == 0 && busy > 0 {
			n, err = Spin(ctx, cq, wc[:], busy)
			if err != nil {
				return WC{}, err
			}
		}
		if n == 1 {
			return wc[0], nil
		}
		if err := cq.Arm(); err != nil {
			return WC{}, err
		}
		n, err = cq.Poll(wc[:])
		if err != nil {
			return WC{}, err
		}
		if n == 1 {
			return wc[0], nil
		}
		if err := cq.Wait(ctx); err != nil {
			return WC{}, err
		}
	}
}

// Spinner is a CQ that can poll itself repeatedly for up to d in one
// call, returning as soon as it has completions (verbs: in C).
type Spinner interface {
	SpinPoll(wc []WC, d time.Duration) (int, error)
}

// SpinCounter is a CQ that counts the time spent polling it in vain:
// the CPU a busy-polling loop spent waiting, which its process's CPU
// time cannot tell from work. A Spinner counts its own stretches' vain
// polls (verbs: by the C clock, up to the poll that found completions);
// Spin and SpinOne add the rest of their polls that found nothing
// (AddSpun; see spinCounted), and a provider's own loops (Echoer,
// Pinger) their waits for completions.
type SpinCounter interface {
	Spun() time.Duration
	AddSpun(time.Duration)
}

// SpinSlice bounds one Spinner call of SpinOne: under 20 µs, sysmon's
// shortest period, so Go's runtime never takes the processor from a
// goroutine spinning in C (which on a busy machine wakes another thread,
// and the spinner then waits for it on the way back).
const SpinSlice = 15 * time.Microsecond

// SpinOne is Spin for the only loop that polls in its process: on a
// Spinner it polls in SpinSlice stretches inside the provider, yielding
// between them.
func SpinOne(ctx context.Context, cq CQ, wc []WC, busy time.Duration) (int, error) {
	sp, ok := cq.(Spinner)
	if !ok {
		return Spin(ctx, cq, wc, busy)
	}
	return spinCounted(ctx, cq, busy, func() (int, error) { return sp.SpinPoll(wc, SpinSlice) })
}

// spinCounted is spin on a CQ that may count its vain polls
// (SpinCounter): a stretch (a Spinner's call) counts its own vain part,
// and the rest of each call that found nothing is added. The yields
// between calls are not: there the processor may run other goroutines,
// and N loops sharing a few CPUs would otherwise count N times the wall
// time (a server's 40 busy-polled loops on the sim counted 15 cores
// while its process used 0.4). So the count approximates the CPU spent
// polling in vain, not the wait.
func spinCounted(ctx context.Context, cq CQ, busy time.Duration, poll func() (int, error)) (int, error) {
	sc, ok := cq.(SpinCounter)
	if !ok {
		return spin(ctx, busy, poll, nil)
	}
	var before, extra time.Duration
	n, err := spin(ctx, busy, func() (int, error) {
		before = sc.Spun()
		return poll()
	}, func(d time.Duration) {
		extra += max(d-(sc.Spun()-before), 0)
	})
	sc.AddSpun(extra)
	return n, err
}

// Spin polls an empty cq for completions into wc for up to busy, and
// returns as soon as there are some (0: none came, or ctx ended). It
// yields the processor between polls (runtime.Gosched), so the
// process's other goroutines still run. This is busy polling, as
// perftest's latency tools do, for a loop that found its CQ empty just
// after its last completions: a completion that comes within busy is
// taken without the completion channel's event and the wake-ups behind
// it (in the TCG guest an event costs ib_send_lat 4x its busy-polled
// latency), at the price of a CPU kept busy for busy after each one.
//
// On a SpinCounter the vain part of the wait is counted (spinCounted).
func Spin(ctx context.Context, cq CQ, wc []WC, busy time.Duration) (int, error) {
	return spinCounted(ctx, cq, busy, func() (int, error) { return cq.Poll(wc) })
}

// spin calls poll until it finds completions, fails, ctx ends or busy
// has passed, yielding between calls. With vain (not nil) it tells vain
// how long each call that found nothing took.
func spin(ctx context.Context, busy time.Duration, poll func() (int, error), vain func(time.Duration)) (int, error) {
	t0 := time.Now()
	until := t0.Add(busy)
	for {
		n, err := poll()
		if n > 0 || err != nil {
			return n, err
		}
		now := time.Now()
		if vain != nil {
			vain(now.Sub(t0))
		}
		if ctx.Err() != nil || !now.Before(until) {
			return 0, nil
		}
		runtime.Gosched()
		if vain != nil {
			t0 = time.Now()
		}
	}
}

// VerbError is a failed verbs call: the verb's name and its errno.
type VerbError struct {
	Verb  string // e.g. "ibv_create_qp", "ibv_modify_qp(RTR)"
	Errno syscall.Errno
	// Detail adds context that the errno alone does not give.
	Detail string
}

func (e *VerbError) Error() string {
	s := fmt.Sprintf("%s: %s (%s)", e.Verb, ErrnoName(e.Errno), e.Errno.Error())
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *VerbError) Unwrap() error { return e.Errno }

// Errno extracts the errno of a VerbError in err's chain, or 0.
func Errno(err error) syscall.Errno {
	var ve *VerbError
	if errors.As(err, &ve) {
		return ve.Errno
	}
	return 0
}

// ErrnoName returns the symbolic name of common errnos ("ENOMEM").
func ErrnoName(e syscall.Errno) string {
	switch e {
	case syscall.ENOMEM:
		return "ENOMEM"
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.EAGAIN:
		return "EAGAIN"
	case syscall.ENOSPC:
		return "ENOSPC"
	case syscall.EMFILE:
		return "EMFILE"
	case syscall.ENFILE:
		return "ENFILE"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EACCES:
		return "EACCES"
	case syscall.ENODEV:
		return "ENODEV"
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.EBUSY:
		return "EBUSY"
	case syscall.ETIMEDOUT:
		return "ETIMEDOUT"
	case syscall.ENOSYS:
		return "ENOSYS"
	case syscall.EOPNOTSUPP:
		return "EOPNOTSUPP"
	case syscall.EFAULT:
		return "EFAULT"
	case syscall.EIO:
		return "EIO"
	case syscall.EOVERFLOW:
		return "EOVERFLOW"
	// A client's TCP connect: the generator host's ephemeral ports ran
	// out, or the server's end refused or could not be reached.
	case syscall.EADDRNOTAVAIL:
		return "EADDRNOTAVAIL"
	case syscall.ECONNREFUSED:
		return "ECONNREFUSED"
	case syscall.ECONNRESET:
		return "ECONNRESET"
	case syscall.EHOSTUNREACH:
		return "EHOSTUNREACH"
	}
	return fmt.Sprintf("errno %d", int(e))
}

// WCError is a completion with a non-success status.
type WCError struct {
	Op     string // "send", "recv"
	Status WCStatus
}

func (e *WCError) Error() string {
	return fmt.Sprintf("%s completion: %s (status %d)", e.Op, e.Status, int(e.Status))
}

// EchoLoop is one client's echo as the server's per-client echo loop runs
// it, over 2·Depth buffers of Size bytes: buffer b < Depth is
// RecvMR[RecvOff+b·Size:][:Size], buffer b ≥ Depth is
// SendMR[SendOff+(b−Depth)·Size:][:Size]. A message is echoed from the
// buffer it landed in, so the buffers rotate: Depth are posted as
// receives (a receive's wrID is its buffer b), up to Depth are being sent
// (a send's wrID is b+1), the rest are free. Bufs holds each one's state
// and Inflight counts those being sent; an Echoer updates them as the
// loop in Go would.
type EchoLoop struct {
	RecvCQ, SendCQ   CQ
	RecvMR, SendMR   MR
	RecvOff, SendOff int
	Size, Depth      int
	Bufs             []BufState
	Inflight         int
	// Idle is set by Echoer.EchoSpin when it returned because idle
	// passed without a message, and cleared when it returned for any
	// other reason (its slice ended, a completion for the caller): only
	// an idle loop's caller arms the CQ and sleeps.
	Idle bool
}

// BufState is the state of one of an EchoLoop's buffers.
type BufState uint8

// The states of an EchoLoop's buffer.
const (
	BufFree    BufState = iota
	BufPosted           // posted as a receive
	BufSending          // an echo is being sent from it
)

// NewEchoLoop returns the loop of a client whose receives were posted in
// buffers 0..depth-1 (wrIDs 0..depth-1), nothing sent yet.
func NewEchoLoop(recvCQ, sendCQ CQ, recvMR MR, recvOff int, sendMR MR, sendOff, size, depth int) *EchoLoop {
	l := &EchoLoop{RecvCQ: recvCQ, SendCQ: sendCQ, RecvMR: recvMR, SendMR: sendMR,
		RecvOff: recvOff, SendOff: sendOff, Size: size, Depth: depth, Bufs: make([]BufState, 2*depth)}
	for b := 0; b < depth; b++ {
		l.Bufs[b] = BufPosted
	}
	return l
}

// Buf returns buffer b's MR and offset.
func (l *EchoLoop) Buf(b int) (MR, int) {
	if b < l.Depth {
		return l.RecvMR, l.RecvOff + b*l.Size
	}
	return l.SendMR, l.SendOff + (b-l.Depth)*l.Size
}

// Index is the buffer a receive's wrID names (clamped to the loop's).
func (l *EchoLoop) Index(recvWRID uint64) int {
	return int(min(recvWRID, uint64(2*l.Depth-1)))
}

// Free returns a free buffer, or -1 if all Depth that are not posted are
// being sent.
func (l *EchoLoop) Free() int {
	for b, st := range l.Bufs {
		if st == BufFree {
			return b
		}
	}
	return -1
}

// Sent records the send completion of wrID (b+1): its buffer is free.
func (l *EchoLoop) Sent(wrID uint64) {
	if b := int(wrID) - 1; b >= 0 && b < len(l.Bufs) && l.Bufs[b] == BufSending {
		l.Bufs[b] = BufFree
		l.Inflight--
	}
}

// Echoer is a QP whose provider can run the server's busy-polled echo
// itself, without a return to Go per message: take a receive in buffer
// b, post a free buffer as a receive in its place (awaiting a send while
// all Depth are in flight), send the echo from b, and verify b's payload
// (payload.Check) while it goes out: the check is off the round trip (in
// the TCG guest it and the copy to a send buffer it replaces were 4.5 µs
// of a 60 µs round trip). A message that fails its check has been echoed
// as it came (the client's own check then fails it too) and is handed
// back, its buffer BufSending.
//
// EchoSpin echoes on the Echoer's QP until idle passes without a
// message (l.Idle set), or slice passes (l.Idle clear: messages are
// still coming, and the caller calls again without sleeping), and
// returns ok = false; or returns ok = true
// and a receive completion for the caller: echoed and failing its check
// (its buffer BufSending), or not echoed (any other state: not a success,
// a goodbye, a length other than Size, or the slice ended while it waited
// for a free buffer), which the caller handles itself. A receive
// completion is never dropped. In the verbs provider this loop is C: one
// cgo call per stretch of messages instead of one per verb, which in the
// TCG guest was a quarter of a 1-client round trip. The time it polled
// for messages in vain is added to the receive CQ's count when that is a
// SpinCounter.
type Echoer interface {
	EchoSpin(l *EchoLoop, idle, slice time.Duration) (wc WC, ok bool, err error)
}
