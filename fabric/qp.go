package fabric

import (
	"fmt"
	"net"
)

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
