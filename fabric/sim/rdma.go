package sim

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// RDMA WRITE and READ. A request names the responder's memory by
// address and rkey; the responder checks, as rxe does, that its QP allows
// the access (qp_access_flags at INIT), that the rkey is a live region of
// the QP's PD registered with that access, and that the range lies in
// the region. A failed check answers a remote access error NAK: the
// requester's WR completes with IBV_WC_REM_ACCESS_ERR and both QPs go to
// ERR. A WRITE completes when the responder acknowledged it (the data is
// in its memory); a READ when its response brought the data. Neither
// consumes a receive or makes a completion at the responder. Unlike
// rxe, the requester does not bound its READs in flight by
// max_rd_atomic.

func (q *qp) PostWrite(wrID uint64, m fabric.MR, off, length int, raddr uint64, rkey uint32) error {
	return q.post("ibv_post_send", sendWR{wrID: wrID, op: opWrite, raddr: raddr, rkey: rkey}, m, off, length)
}

func (q *qp) PostRead(wrID uint64, m fabric.MR, off, length int, raddr uint64, rkey uint32) error {
	const verb = "ibv_post_send"
	if r, _ := m.(*mr); r != nil && r.access&fabric.AccessLocalWrite == 0 {
		// rxe fails the WQE with a local protection error; the sim
		// refuses it at post time, like the other buffer checks.
		return verr(verb, syscall.EINVAL, "RDMA READ into an MR without local write access")
	}
	return q.post(verb, sendWR{wrID: wrID, op: opRead, raddr: raddr, rkey: rkey}, m, off, length)
}

// putRemote writes a request's remote address and rkey.
func putRemote(b []byte, addr uint64, rkey uint32) {
	binary.BigEndian.PutUint64(b, addr)
	binary.BigEndian.PutUint32(b[8:], rkey)
}

// executeLocked runs a WRITE or READ that arrived in order, with the
// frame's body p, and answers it.
func (q *qp) executeLocked(from *link, op byte, psn uint32, p []byte) {
	want, need := fabric.AccessRemoteWrite, 12
	if op == opRead {
		want, need = fabric.AccessRemoteRead, 16
	}
	if len(p) < need {
		q.dev.dropped(from, header{op: op, srcLID: q.dlid, srcQPN: q.destQPN, dstQPN: q.qpn, psn: psn})
		return
	}
	addr, rkey := binary.BigEndian.Uint64(p), binary.BigEndian.Uint32(p[8:])
	n := len(p) - 12
	if op == opRead {
		n = int(binary.BigEndian.Uint32(p[12:]))
	}
	buf, err := q.remoteLocked(addr, rkey, n, want)
	if err != nil {
		q.replyLocked(from, opNakAccess, psn)
		q.errorLocked(fabric.WCSuccess)
		return
	}
	q.lastIn = psn
	if op == opWrite {
		copy(buf, p[12:])
		q.replyLocked(from, opAck, psn)
		return
	}
	q.dev.send(from, header{op: opReadResp, srcLID: q.dev.port.LID, srcQPN: q.qpn, dstQPN: q.destQPN, psn: psn}, nil, buf)
}

// remoteLocked resolves n bytes at addr of the region rkey names, for
// access want by this QP's peer.
func (q *qp) remoteLocked(addr uint64, rkey uint32, n int, want fabric.Access) ([]byte, error) {
	if q.access&want == 0 {
		return nil, fmt.Errorf("QP does not allow remote access %d", want)
	}
	p := q.dev.prov
	p.remoteMu.RLock()
	m := p.remote[rkey]
	p.remoteMu.RUnlock()
	switch {
	case m == nil || m.rkey != rkey:
		return nil, fmt.Errorf("no region with rkey %#x", rkey)
	case m.pd != q.pd:
		return nil, fmt.Errorf("rkey %#x belongs to another PD", rkey)
	case m.access&want == 0:
		return nil, fmt.Errorf("region %#x does not allow remote access %d", rkey, want)
	case n < 0 || addr < m.addr || addr-m.addr > uint64(len(m.buf)) || uint64(n) > uint64(len(m.buf))-(addr-m.addr):
		return nil, fmt.Errorf("[%#x, +%d) outside region %#x", addr, n, rkey)
	}
	off := int(addr - m.addr)
	return m.buf[off : off+n], nil
}
