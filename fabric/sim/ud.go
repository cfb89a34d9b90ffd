package sim

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// Unreliable datagrams. A UD QP has no peer: each send names an address
// handle, a QPN and a Q_Key, goes out as one frame and completes at
// once, whether or not it arrives; one above the port's MTU completes
// the same way but is never sent, as rxe does. The receiving QP
// takes it only if it is a UD QP in RTR or RTS whose Q_Key it carries
// and has a receive posted; otherwise the datagram is dropped without a
// word, as on a real fabric. A delivered datagram lands behind a GRH
// (fabric.GRHLen bytes, laid out as rxe does) naming its source GID, and
// its completion carries the sender's QPN.

// opUDSend is a datagram; its body starts with the Q_Key (4 bytes).
const opUDSend byte = 11

// ah is an address handle: the wire address and LID of a port.
type ah struct {
	pd   *pd
	dip  netip.Addr
	dlid uint16
	dead bool // guarded by Provider.mu
}

func (x *pd) CreateAH(a fabric.AHAttr) (fabric.AH, error) {
	const verb = "ibv_create_ah"
	d := x.dev
	if d.isClosed() {
		return nil, verr(verb, syscall.ENODEV, "device closed")
	}
	if a.Port != 0 && a.Port != portNum {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("port %d (device has port 1 only)", a.Port))
	}
	if a.DLID == 0 {
		return nil, verr(verb, syscall.EINVAL, "DLID 0: the sim routes by DGID and DLID (the peer's Port().LID)")
	}
	h := &ah{pd: x, dip: loopback, dlid: a.DLID}
	if ip := netip.AddrFrom16(a.DGID).Unmap(); ip.Is4() {
		h.dip = ip
	}
	p := d.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	if x.dead {
		return nil, verr(verb, syscall.EINVAL, "PD deallocated")
	}
	if p.nAH >= p.caps.MaxAH {
		// rxe_create_ah → rxe_add_to_pool: -EINVAL when the pool is full.
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_ah %d reached", p.caps.MaxAH))
	}
	p.nAH++
	x.ahs[h] = struct{}{}
	return h, nil
}

func (h *ah) Destroy() error {
	p := h.pd.dev.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	if h.dead {
		return verr("ibv_destroy_ah", syscall.EINVAL, "already destroyed")
	}
	h.dead = true
	p.nAH--
	delete(h.pd.ahs, h)
	return nil
}

func (q *qp) PostSendUD(wrID uint64, m fabric.MR, off, length int, a fabric.AH, qpn, qkey uint32) error {
	const verb = "ibv_post_send"
	if !q.ud {
		return verr(verb, syscall.EINVAL, "an RC QP sends to its connected peer (PostSend)")
	}
	h, _ := a.(*ah)
	if h == nil {
		return verr(verb, syscall.EINVAL, "address handle not created by this fabric")
	}
	if h.pd != q.pd {
		return verr(verb, syscall.EINVAL, "address handle of another PD")
	}
	if qpn == 0 || qpn > psnMask {
		return verr(verb, syscall.EINVAL, fmt.Sprintf("remote QPN %#x not a non-zero 24-bit number", qpn))
	}
	data, err := q.sge(verb, m, off, length)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.destroyed:
		return verr(verb, syscall.EINVAL, "QP destroyed")
	case q.state == fabric.QPSErr:
		q.scq.push(fabric.WC{WRID: wrID, Status: fabric.WCWRFlushErr, Opcode: fabric.WCSend, QPN: q.qpn})
		return nil
	case q.state != fabric.QPSRTS:
		return verr(verb, syscall.EINVAL, fmt.Sprintf("QP is in %s; sends need RTS", q.state))
	}
	// A frame that cannot be sent is lost, as a datagram may be; one
	// above the MTU is never sent (C10-93.1.1: no packet, no error).
	if l := q.dev.linkTo(netip.AddrPortFrom(h.dip, h.dlid)); l != nil && length <= q.dev.port.ActiveMTU.Bytes() {
		var ext [4]byte
		binary.BigEndian.PutUint32(ext[:], qkey)
		q.dev.send(l, header{op: opUDSend, srcLID: q.dev.port.LID, srcQPN: q.qpn, dstQPN: qpn, psn: q.npsn}, ext[:], data)
	}
	q.npsn = psnAdd(q.npsn, 1)
	q.scq.push(fabric.WC{WRID: wrID, Status: fabric.WCSuccess, Opcode: fabric.WCSend, ByteLen: length, QPN: q.qpn})
	return nil
}

// onDatagram is a UD QP's receive side: a datagram from the wire.
func (q *qp) onDatagram(from *link, h header, p []byte) {
	if len(p) < 4 {
		return
	}
	qkey, data := binary.BigEndian.Uint32(p), p[4:]
	if n := q.dev.prov.opts.UDDropEvery; n > 0 && q.dev.prov.udSeen.Add(1)%int64(n) == 0 {
		return // lost on purpose (Options.UDDropEvery)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.ud || q.destroyed || (q.state != fabric.QPSRTR && q.state != fabric.QPSRTS) || qkey != q.qkey {
		return
	}
	r, ok := q.nextRecvLocked()
	if !ok {
		return // no receive posted: a datagram is dropped, not held
	}
	if len(r.buf) < fabric.GRHLen+len(data) {
		q.rcq.push(fabric.WC{WRID: r.wrID, Status: fabric.WCLocLenErr, Opcode: fabric.WCRecv, QPN: q.qpn})
		return
	}
	fabric.PutGRH(r.buf, mappedGID(from.peer.Addr()), q.dev.port.GID)
	copy(r.buf[fabric.GRHLen:], data)
	q.rcq.push(fabric.WC{WRID: r.wrID, Status: fabric.WCSuccess, Opcode: fabric.WCRecv,
		ByteLen: fabric.GRHLen + len(data), QPN: q.qpn, SrcQP: h.srcQPN, GRH: true})
}
