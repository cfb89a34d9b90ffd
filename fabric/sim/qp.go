package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// PSNs are 24-bit and compared in serial arithmetic, as in the BTH.
const (
	psnMask = 1<<24 - 1
	psnHalf = 1 << 23
)

func psnAdd(a uint32, n int) uint32 { return (a + uint32(n)) & psnMask }

// psnSub is how far a is ahead of b.
func psnSub(a, b uint32) uint32 { return (a - b) & psnMask }

// Retransmission timing. IB's local ACK timeout is 4.096 µs × 2^timeout;
// rxe arms it in jiffies, so nothing fires sooner than a tick, and
// timeout 0 ("wait forever") is bounded here so a lost peer always ends in
// IBV_WC_RETRY_EXC_ERR within retryWindow.
//
// A NIC acknowledges a request in hardware, whatever its host's CPUs are
// doing; here the responder is a goroutine, and on a saturated host (the
// TCG guest at full load) it may read a request long after the local ACK
// timeout. So a timeout only counts as a retry when the request is known
// lost: the link carrying it died, it could not be sent, the responder
// said it dropped it (opDropped: no such QP, QP not ready, failed header
// checks, destroyed while holding it) or answered for another PSN. On a
// live link with no such word the requester waits, up to starvedWindow
// without hearing anything from the responder QP.
const (
	minRTO        = time.Millisecond
	retryWindow   = 4 * time.Second
	starvedWindow = 30 * time.Second
)

func rtoFor(timeout, retryCnt int) time.Duration {
	limit := retryWindow / time.Duration(retryCnt+1)
	if timeout == 0 {
		return limit
	}
	return min(max(4096*time.Nanosecond<<timeout, minRTO), limit)
}

// sendWR is an outstanding request: a SEND, RDMA WRITE or READ.
type sendWR struct {
	wrID uint64
	op   byte   // opSend, opWrite, opRead
	data []byte // SEND/WRITE: the MR bytes, read again for each (re)transmission; READ: where the data goes
	psn  uint32
	// raddr and rkey name the peer's memory (WRITE, READ).
	raddr uint64
	rkey  uint32
}

// opcode is the completion opcode of the request's kind.
func (e *sendWR) opcode() fabric.Opcode {
	switch e.op {
	case opWrite:
		return fabric.WCRDMAWrite
	case opRead:
		return fabric.WCRDMARead
	}
	return fabric.WCSend
}

type recvWR struct {
	wrID uint64
	buf  []byte
}

// heldMsg is an accepted SEND that found no receive posted, or a WRITE
// or READ that arrived behind one (requests are executed in PSN order).
type heldMsg struct {
	op   byte
	psn  uint32
	data []byte // the frame's body
	from *link  // where its ACK goes once delivered
}

// qp is an RC QP. No goroutine per QP: sends run in the poster's
// goroutine, arrivals in the wire reader's, retransmissions in a timer
// callback, all under mu. Lock order: qp.mu → device.mu → link.mu, and
// qp.mu → cq.mu; Provider.mu is never held with qp.mu.
type qp struct {
	dev     *device
	pd      *pd
	qpn     uint32
	scq     *cq
	rcq     *cq
	srq     *srq // nil: the QP has its own receive queue
	ud      bool // a UD QP (ud.go)
	qkey    uint32
	maxSend int
	maxRecv int

	mu        sync.Mutex
	state     fabric.QPState
	destroyed bool
	access    fabric.Access // remote access allowed at INIT

	// Responder side, set at RTR.
	destQPN uint32
	dlid    uint16
	dip     netip.Addr // the address of the peer's GID
	epsn    uint32     // next PSN expected from the peer
	lastIn  uint32     // last PSN placed in a receive buffer
	rq      ring[recvWR]
	held    ring[heldMsg]
	srqWait bool // listed among srq.waiters; guarded by srq.mu

	// Requester side, set at RTS.
	npsn     uint32 // next PSN to send
	rto      time.Duration
	retryCnt int
	retries  int
	sq       ring[sendWR] // sent, not yet acknowledged
	link     *link
	timer    *time.Timer
	deadline time.Time // zero when no retransmission is due
	// lost is set when an outstanding request is known lost since the
	// last retry (see retryWindow); heard is when the responder QP last
	// answered, or when the send queue last became busy.
	lost  bool
	heard time.Time
}

var _ fabric.QP = (*qp)(nil)

func (x *pd) CreateQP(a fabric.QPInitAttr) (fabric.QP, error) {
	const verb = "ibv_create_qp"
	d := x.dev
	if d.isClosed() {
		return nil, verr(verb, syscall.ENODEV, "device closed")
	}
	scq, _ := a.SendCQ.(*cq)
	rcq, _ := a.RecvCQ.(*cq)
	if scq == nil || rcq == nil {
		return nil, verr(verb, syscall.EINVAL, "send and receive CQs of this fabric are required")
	}
	if scq.dev != d || rcq.dev != d {
		return nil, verr(verb, syscall.EINVAL, "CQ belongs to another device context")
	}
	var sq *srq
	switch a.Type {
	case fabric.QPTypeRC:
	case fabric.QPTypeUD:
		if a.SRQ != nil {
			return nil, verr(verb, syscall.EOPNOTSUPP, "the simulation has no UD QP on an SRQ")
		}
	default:
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("QP type %d", a.Type))
	}
	if a.SRQ != nil {
		sq, _ = a.SRQ.(*srq)
		if sq == nil {
			return nil, verr(verb, syscall.EINVAL, "SRQ not created by this fabric")
		}
		if sq.pd.dev != d {
			return nil, verr(verb, syscall.EINVAL, "SRQ belongs to another device context")
		}
		// With an SRQ there is no receive queue: rxe_qp_chk_cap checks
		// the receive caps only without one, and creates no RQ.
		a.MaxRecvWR, a.MaxRecvSGE = 0, 0
	}
	caps := d.prov.caps
	// rxe_qp_chk_cap: WR and SGE counts above the device caps are -EINVAL.
	if a.MaxSendWR < 0 || a.MaxSendWR > caps.MaxQPWR || a.MaxRecvWR < 0 || a.MaxRecvWR > caps.MaxQPWR {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_send_wr %d / max_recv_wr %d outside 0..max_qp_wr %d", a.MaxSendWR, a.MaxRecvWR, caps.MaxQPWR))
	}
	if a.MaxSendSGE < 0 || a.MaxSendSGE > caps.MaxSGE || a.MaxRecvSGE < 0 || a.MaxRecvSGE > caps.MaxSGE {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_send_sge %d / max_recv_sge %d outside 0..max_sge %d", a.MaxSendSGE, a.MaxRecvSGE, caps.MaxSGE))
	}
	p := d.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	if x.dead {
		return nil, verr(verb, syscall.EINVAL, "PD deallocated")
	}
	if scq.dead || rcq.dead {
		return nil, verr(verb, syscall.EINVAL, "CQ destroyed")
	}
	if sq != nil && sq.dead {
		return nil, verr(verb, syscall.EINVAL, "SRQ destroyed")
	}
	if p.nQP >= caps.MaxQP {
		// rxe_create_qp → rxe_add_to_pool: -EINVAL when the pool is full (6.1).
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_qp %d reached", caps.MaxQP))
	}
	q := &qp{
		dev: d, pd: x, qpn: p.allocQPNLocked(), scq: scq, rcq: rcq, srq: sq, ud: a.Type == fabric.QPTypeUD,
		// rxe rounds queue depths up the same way as CQs and reports the
		// larger depth back in init_attr.cap; posting is limited by that.
		maxSend: roundQueue(a.MaxSendWR),
		maxRecv: roundQueue(a.MaxRecvWR),
	}
	if sq != nil {
		q.maxRecv = 0
		sq.refs++
	}
	p.nQP++
	p.qpCount.Add(1)
	p.qps[q.qpn] = q
	x.qps[q] = struct{}{}
	scq.refs++
	rcq.refs++
	return q, nil
}

func (q *qp) QPN() uint32 { return q.qpn }

func (q *qp) State() fabric.QPState {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state
}

// modifyLocked checks that the QP can move from "from"; the verbs state
// machine allows only RESET→INIT→RTR→RTS on this path.
func (q *qp) modifyLocked(verb string, from fabric.QPState) error {
	if q.destroyed {
		return verr(verb, syscall.EINVAL, "QP destroyed")
	}
	if q.state != from {
		return verr(verb, syscall.EINVAL, fmt.Sprintf("QP is in %s, transition needs %s", q.state, from))
	}
	return nil
}

func (q *qp) ToInit(a fabric.InitAttr) error {
	const verb = "ibv_modify_qp(INIT)"
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.modifyLocked(verb, fabric.QPSReset); err != nil {
		return err
	}
	if a.Port != portNum {
		return verr(verb, syscall.EINVAL, fmt.Sprintf("port %d (device has port 1 only)", a.Port))
	}
	if a.PKeyIndex != 0 {
		return verr(verb, syscall.EINVAL, fmt.Sprintf("pkey index %d (table has 1 entry)", a.PKeyIndex))
	}
	q.access, q.qkey = a.Access, a.QKey
	q.state = fabric.QPSInit
	return nil
}

func (q *qp) ToRTR(a fabric.RTRAttr) error {
	const verb = "ibv_modify_qp(RTR)"
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.modifyLocked(verb, fabric.QPSInit); err != nil {
		return err
	}
	if q.ud {
		// A UD QP's RTR is its state alone: it has no peer.
		q.state = fabric.QPSRTR
		return nil
	}
	bad := func(format string, args ...any) error {
		return verr(verb, syscall.EINVAL, fmt.Sprintf(format, args...))
	}
	switch {
	case !a.PathMTU.Valid():
		return bad("path MTU %d is not an IB MTU", int(a.PathMTU))
	case a.DestQPN == 0 || a.DestQPN > psnMask:
		return bad("dest QPN %#x not a non-zero 24-bit number", a.DestQPN)
	case a.RQPSN > psnMask:
		return bad("rq_psn %#x wider than 24 bits", a.RQPSN)
	case a.MaxDestRdAtomic < 0 || a.MaxDestRdAtomic > maxRdAtom:
		return bad("max_dest_rd_atomic %d outside 0..%d", a.MaxDestRdAtomic, maxRdAtom)
	case a.MinRNRTimer < 0 || a.MinRNRTimer > 31:
		return bad("min_rnr_timer %d outside 0..31", a.MinRNRTimer)
	case a.GIDIndex >= gidTblLen:
		return bad("sgid index %d (table has %d entries)", a.GIDIndex, gidTblLen)
	case a.HopLimit < 0 || a.HopLimit > 255:
		return bad("hop limit %d", a.HopLimit)
	case a.Port != 0 && a.Port != portNum:
		return bad("port %d (device has port 1 only)", a.Port)
	case a.DLID == 0:
		// Real RoCE routes by DGID alone; the sim's wire is the DGID's
		// address and, as the port on it, the DLID.
		return bad("DLID 0: the sim routes by DGID and DLID (the peer's Port().LID)")
	}
	q.destQPN, q.dlid = a.DestQPN, a.DLID
	// A GID that is not IPv4-mapped (index 0's fe80::) names no wire
	// address; such a peer is taken to be on this host, as every sim
	// peer was before devices had addresses.
	q.dip = loopback
	if ip := netip.AddrFrom16(a.DGID).Unmap(); ip.Is4() {
		q.dip = ip
	}
	q.epsn, q.lastIn = a.RQPSN, psnAdd(a.RQPSN, -1)
	q.state = fabric.QPSRTR
	return nil
}

func (q *qp) ToRTS(a fabric.RTSAttr) error {
	const verb = "ibv_modify_qp(RTS)"
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.modifyLocked(verb, fabric.QPSRTR); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return verr(verb, syscall.EINVAL, fmt.Sprintf(format, args...))
	}
	switch {
	case a.SQPSN > psnMask:
		return bad("sq_psn %#x wider than 24 bits", a.SQPSN)
	case q.ud:
		// A UD QP takes its send PSN only.
	case a.Timeout < 0 || a.Timeout > 31:
		return bad("timeout %d outside 0..31", a.Timeout)
	case a.RetryCnt < 0 || a.RetryCnt > 7:
		return bad("retry_cnt %d outside 0..7", a.RetryCnt)
	case a.RNRRetry < 0 || a.RNRRetry > 7:
		return bad("rnr_retry %d outside 0..7", a.RNRRetry)
	case a.MaxRdAtomic < 0 || a.MaxRdAtomic > maxRdAtom:
		return bad("max_rd_atomic %d outside 0..%d", a.MaxRdAtomic, maxRdAtom)
	}
	q.npsn = a.SQPSN
	q.rto = rtoFor(a.Timeout, a.RetryCnt)
	q.retryCnt = a.RetryCnt
	q.state = fabric.QPSRTS
	return nil
}

// sge resolves a work request's buffer. rxe checks the lkey and bounds
// when it processes the WQE and fails it with a local protection error;
// the sim refuses at post time with EINVAL, which points at the same bug
// sooner.
func (q *qp) sge(verb string, m fabric.MR, off, length int) ([]byte, error) {
	return sgeOf(verb, q.pd, m, off, length)
}

// sgeOf resolves a buffer of an MR that must belong to x.
func sgeOf(verb string, x *pd, m fabric.MR, off, length int) ([]byte, error) {
	if m == nil && length == 0 {
		return nil, nil
	}
	r, _ := m.(*mr)
	switch {
	case r == nil:
		return nil, verr(verb, syscall.EINVAL, "MR not registered with this fabric")
	case r.pd != x:
		return nil, verr(verb, syscall.EINVAL, "MR belongs to another PD")
	case off < 0 || length < 0 || off > len(r.buf) || length > len(r.buf)-off:
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("[%d, %d+%d) outside the %d-byte MR", off, off, length, len(r.buf)))
	}
	return r.buf[off : off+length : off+length], nil
}

func (q *qp) PostSend(wrID uint64, m fabric.MR, off, length int) error {
	return q.post("ibv_post_send", sendWR{wrID: wrID, op: opSend}, m, off, length)
}

// post posts request e on the buffer m[off:off+length].
func (q *qp) post(verb string, e sendWR, m fabric.MR, off, length int) error {
	if q.ud {
		return verr(verb, syscall.EINVAL, "a UD QP sends datagrams only, each to a destination (PostSendUD)")
	}
	if length > maxFrame {
		return verr(verb, syscall.EINVAL, fmt.Sprintf("%d bytes exceed the port's max_msg_sz %d", length, maxFrame))
	}
	data, err := q.sge(verb, m, off, length)
	if err != nil {
		return err
	}
	e.data = data
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.destroyed:
		return verr(verb, syscall.EINVAL, "QP destroyed")
	case q.state == fabric.QPSErr:
		// Work posted to a QP in ERR completes at once, flushed.
		q.scq.push(fabric.WC{WRID: e.wrID, Status: fabric.WCWRFlushErr, Opcode: e.opcode(), QPN: q.qpn})
		return nil
	case q.state != fabric.QPSRTS:
		return verr(verb, syscall.EINVAL, fmt.Sprintf("QP is in %s; sends need RTS", q.state))
	case q.sq.n >= q.maxSend:
		return verr(verb, syscall.ENOMEM, fmt.Sprintf("send queue full (%d outstanding)", q.sq.n))
	}
	e.psn = q.npsn
	q.npsn = psnAdd(e.psn, 1)
	q.sq.push(e)
	if q.sq.n == 1 {
		q.heard = time.Now()
	}
	q.xmitLocked(&e)
	if q.deadline.IsZero() {
		q.armTimerLocked()
	}
	return nil
}

func (q *qp) PostRecv(wrID uint64, m fabric.MR, off, length int) error {
	const verb = "ibv_post_recv"
	if q.srq != nil {
		// librxe: a QP created with an SRQ has no RQ (rq.queue is NULL),
		// and rxe_post_recv answers EINVAL before looking at the WR.
		return verr(verb, syscall.EINVAL, "QP takes its receives from an SRQ: it has no receive queue")
	}
	buf, err := q.sge(verb, m, off, length)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.destroyed:
		return verr(verb, syscall.EINVAL, "QP destroyed")
	case q.state == fabric.QPSReset:
		return verr(verb, syscall.EINVAL, "QP is in RESET; receives need INIT or later")
	case q.state == fabric.QPSErr:
		q.rcq.push(fabric.WC{WRID: wrID, Status: fabric.WCWRFlushErr, Opcode: fabric.WCRecv, QPN: q.qpn})
		return nil
	case q.rq.n >= q.maxRecv:
		return verr(verb, syscall.ENOMEM, fmt.Sprintf("receive queue full (%d posted)", q.rq.n))
	}
	q.rq.push(recvWR{wrID: wrID, buf: buf})
	q.drainHeldLocked()
	return nil
}

// nextRecvLocked takes the receive the next message goes to: the oldest
// of the QP's own receive queue, or of its SRQ (registering the QP as a
// waiter there when the SRQ is empty).
func (q *qp) nextRecvLocked() (recvWR, bool) {
	if q.srq != nil {
		return q.srq.take(q)
	}
	if q.rq.n > 0 {
		return q.rq.pop(), true
	}
	return recvWR{}, false
}

// drainHeldLocked delivers held messages, oldest first, while receives
// are available.
func (q *qp) drainHeldLocked() {
	for q.held.n > 0 && !q.destroyed && q.state != fabric.QPSErr {
		if op := q.held.at(0).op; op != opSend {
			h := q.held.pop()
			q.executeLocked(h.from, op, h.psn, h.data)
			continue
		}
		r, ok := q.nextRecvLocked()
		if !ok {
			return
		}
		h := q.held.pop()
		q.deliverLocked(r, h.psn, h.data, h.from)
	}
}

// drainHeld is drainHeldLocked for a QP woken by its SRQ.
func (q *qp) drainHeld() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drainHeldLocked()
}

func (q *qp) Destroy() error {
	q.mu.Lock()
	if q.destroyed {
		q.mu.Unlock()
		return verr("ibv_destroy_qp", syscall.EINVAL, "already destroyed")
	}
	// Destroying generates no completions: outstanding work just vanishes.
	q.destroyed = true
	q.stopTimerLocked()
	q.sq.reset()
	q.rq.reset()
	for i := 0; i < q.held.n; i++ {
		m := q.held.at(i)
		q.dev.dropped(m.from, header{op: m.op, srcLID: q.dlid, srcQPN: q.destQPN, dstQPN: q.qpn, psn: m.psn})
	}
	q.held.reset()
	q.link = nil
	q.mu.Unlock()

	p := q.dev.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.qps, q.qpn)
	p.nQP--
	p.qpCount.Add(-1)
	delete(q.pd.qps, q)
	q.scq.refs--
	q.rcq.refs--
	if q.srq != nil {
		q.srq.refs--
	}
	return nil
}

// xmitLocked puts request e on the wire for the peer. A frame that
// cannot be sent (no connection yet, connection lost) is simply lost: the
// retransmission timer recovers or gives up, as on a lossy link.
func (q *qp) xmitLocked(e *sendWR) {
	l := q.link
	if l == nil || l.dead.Load() {
		l = q.dev.linkTo(netip.AddrPortFrom(q.dip, q.dlid))
		q.link = l
	}
	if l == nil {
		q.lost = true
		return
	}
	h := header{op: e.op, srcLID: q.dev.port.LID, srcQPN: q.qpn, dstQPN: q.destQPN, psn: e.psn}
	switch e.op {
	case opWrite:
		var ext [12]byte
		putRemote(ext[:], e.raddr, e.rkey)
		q.dev.send(l, h, ext[:], e.data)
	case opRead:
		var ext [16]byte
		putRemote(ext[:], e.raddr, e.rkey)
		binary.BigEndian.PutUint32(ext[12:], uint32(len(e.data)))
		q.dev.send(l, h, ext[:], nil)
	default:
		q.dev.send(l, h, nil, e.data)
	}
}

func (q *qp) armTimerLocked() {
	q.deadline = time.Now().Add(q.rto)
	if q.timer == nil {
		q.timer = time.AfterFunc(q.rto, q.onTimer)
	} else {
		q.timer.Reset(q.rto)
	}
}

func (q *qp) stopTimerLocked() {
	q.deadline = time.Time{}
	if q.timer != nil {
		q.timer.Stop()
	}
}

// onTimer is the local ACK timeout: go back and resend everything
// unacknowledged, or give up after retry_cnt retries.
func (q *qp) onTimer() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deadline.IsZero() || q.destroyed || q.state != fabric.QPSRTS || q.sq.n == 0 {
		return
	}
	now := time.Now()
	if now.Before(q.deadline) {
		// Re-armed while this callback waited for the lock.
		q.timer.Reset(q.deadline.Sub(now))
		return
	}
	if !q.lost && q.link != nil && !q.link.dead.Load() && now.Sub(q.heard) < starvedWindow {
		// On a live link and not dropped: still queued for a responder
		// that has not read it yet.
		q.armTimerLocked()
		return
	}
	q.retryLocked()
}

func (q *qp) retryLocked() {
	q.lost = false
	q.retries++
	if q.retries > q.retryCnt {
		q.errorLocked(fabric.WCRetryExcErr)
		return
	}
	for i := 0; i < q.sq.n; i++ {
		q.xmitLocked(q.sq.at(i))
	}
	q.armTimerLocked()
}

// completeLocked retires the n oldest requests successfully.
func (q *qp) completeLocked(n int) {
	for ; n > 0; n-- {
		e := q.sq.pop()
		q.scq.push(fabric.WC{WRID: e.wrID, Status: fabric.WCSuccess, Opcode: e.opcode(), ByteLen: len(e.data), QPN: q.qpn})
	}
}

// errorLocked moves the QP to ERR: the oldest send completes with status
// (unless it is WCSuccess), everything else outstanding is flushed.
func (q *qp) errorLocked(status fabric.WCStatus) {
	q.state = fabric.QPSErr
	q.stopTimerLocked()
	for q.sq.n > 0 {
		e := q.sq.pop()
		st := fabric.WCWRFlushErr
		if status != fabric.WCSuccess {
			st, status = status, fabric.WCSuccess
		}
		q.scq.push(fabric.WC{WRID: e.wrID, Status: st, Opcode: e.opcode(), QPN: q.qpn})
	}
	for q.rq.n > 0 {
		r := q.rq.pop()
		q.rcq.push(fabric.WC{WRID: r.wrID, Status: fabric.WCWRFlushErr, Opcode: fabric.WCRecv, QPN: q.qpn})
	}
	q.held.reset()
}

// deliverLocked places an accepted message in receive r (the oldest of
// the QP's receive queue or of its SRQ) and acknowledges it.
func (q *qp) deliverLocked(r recvWR, psn uint32, data []byte, from *link) {
	if len(data) > len(r.buf) {
		// Responder length error: the receive fails with a local length
		// error, the requester is told "invalid request", both QPs go to ERR.
		q.rcq.push(fabric.WC{WRID: r.wrID, Status: fabric.WCLocLenErr, Opcode: fabric.WCRecv, QPN: q.qpn})
		q.replyLocked(from, opNakInvReq, psn)
		q.errorLocked(fabric.WCSuccess)
		return
	}
	copy(r.buf, data)
	q.lastIn = psn
	q.rcq.push(fabric.WC{WRID: r.wrID, Status: fabric.WCSuccess, Opcode: fabric.WCRecv, ByteLen: len(data), QPN: q.qpn})
	q.replyLocked(from, opAck, psn)
}

func (q *qp) replyLocked(l *link, op byte, psn uint32) {
	q.dev.send(l, header{op: op, srcLID: q.dev.port.LID, srcQPN: q.qpn, dstQPN: q.destQPN, psn: psn}, nil, nil)
}

// onRequest is the responder: a SEND, WRITE or READ from the wire for
// this QP.
func (q *qp) onRequest(from *link, h header, payload []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed || (q.state != fabric.QPSRTR && q.state != fabric.QPSRTS) {
		q.dev.dropped(from, h) // a QP not ready to receive drops packets; the requester retries
		return
	}
	if h.srcQPN != q.destQPN || h.srcLID != q.dlid || from.peer.Addr() != q.dip {
		q.dev.dropped(from, h) // fails RC header validation: dropped, as in IB
		return
	}
	switch d := psnSub(h.psn, q.epsn); {
	case d == 0:
		q.epsn = psnAdd(q.epsn, 1)
		if h.op != opSend {
			if q.held.n == 0 {
				q.executeLocked(from, h.op, h.psn, payload)
				return
			}
			// Behind a held SEND: executed in order once it is delivered.
			q.held.push(heldMsg{op: h.op, psn: h.psn, data: bytes.Clone(payload), from: from})
			return
		}
		if q.held.n == 0 {
			if r, ok := q.nextRecvLocked(); ok {
				q.deliverLocked(r, h.psn, payload, from)
				return
			}
		}
		// No receive posted (on the QP or its SRQ): keep it and tell the
		// requester (RNR NAK) so it waits instead of counting transport
		// retries. An SRQ wakes the QP when a receive is posted there.
		q.held.push(heldMsg{op: opSend, psn: h.psn, data: bytes.Clone(payload), from: from})
		q.dev.counts.sendRNR.Add(1)
		q.replyLocked(from, opRNR, h.psn)
	case d >= psnHalf:
		// Duplicate (a retransmission of something accepted): answer
		// again without placing it twice.
		for i := 0; i < q.held.n; i++ {
			if q.held.at(i).psn == h.psn {
				if h.op == opSend {
					q.dev.counts.sendRNR.Add(1)
					q.replyLocked(from, opRNR, h.psn)
				}
				return
			}
		}
		if h.op == opRead {
			// Its response was lost: a READ is answered again (it
			// changes nothing, so executing it twice is harmless).
			q.executeLocked(from, opRead, h.psn, payload)
			return
		}
		q.replyLocked(from, opAck, q.lastIn)
	default:
		// Ahead of what we expect: PSN sequence error NAK.
		q.replyLocked(from, opNakSeq, q.epsn)
	}
}

// onResponse is the requester: an ACK, NAK or READ response for this
// QP's requests.
func (q *qp) onResponse(from *link, h header, payload []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed || q.state != fabric.QPSRTS || q.sq.n == 0 {
		return
	}
	if h.srcQPN != q.destQPN || h.srcLID != q.dlid || from.peer.Addr() != q.dip {
		return
	}
	// k is the response PSN's place among the outstanding sends; a PSN
	// outside them is a ghost response and ignored. Unlike IB, a NAK here
	// does not imply that earlier PSNs were placed: they may be held for a
	// receive, and their ACKs come when they are. Every placed message was
	// ACKed before any later response on this ordered stream.
	k := int(psnSub(h.psn, q.sq.at(0).psn))
	inWindow := k < q.sq.n
	switch h.op {
	case opAck:
		if !inWindow {
			// A ghost ACK: the responder answered, not for these PSNs.
			q.lost = true
			return
		}
		q.heard = time.Now()
		// An ACK cannot complete a READ, which needs its data: one
		// covered by it lost its response, and the timer resends it.
		for i := 0; i <= k; i++ {
			if q.sq.at(i).op == opRead {
				k, q.lost = i-1, true
				break
			}
		}
		q.completeLocked(k + 1)
		q.retries = 0
		if q.sq.n > 0 {
			q.armTimerLocked()
		} else {
			q.stopTimerLocked()
		}
	case opRNR:
		if !inWindow {
			return
		}
		// rnr_retry is treated as 7 (infinite): the responder holds the
		// message; keep the timer only to notice a peer that vanishes.
		q.dev.counts.rcvdRNR.Add(1)
		q.heard = time.Now()
		q.retries = 0
		q.armTimerLocked()
	case opDropped:
		if inWindow {
			q.lost = true // the timer, when it fires, counts a retry
		}
	case opNakSeq:
		q.retryLocked()
	case opReadResp:
		if !inWindow || q.sq.at(k).op != opRead {
			q.lost = true
			return
		}
		e := q.sq.at(k)
		if len(payload) != len(e.data) {
			q.completeLocked(k)
			q.errorLocked(fabric.WCLocLenErr)
			return
		}
		copy(e.data, payload)
		q.heard = time.Now()
		q.completeLocked(k + 1)
		q.retries = 0
		if q.sq.n > 0 {
			q.armTimerLocked()
		} else {
			q.stopTimerLocked()
		}
	case opNakInvReq, opNakAccess:
		if !inWindow {
			return
		}
		q.completeLocked(k)
		st := fabric.WCRemInvReqErr
		if h.op == opNakAccess {
			st = fabric.WCRemAccessErr
		}
		q.errorLocked(st)
	}
}
