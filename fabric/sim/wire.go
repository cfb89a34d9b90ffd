package sim

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Frame opcodes. SENDs flow on the connection the sender's context dialed;
// responses come back on the same connection, so each ordered pair of
// contexts uses exactly one TCP connection.
const (
	opSend      byte = 1
	opAck       byte = 2
	opNakSeq    byte = 3 // PSN sequence error; psn = the PSN expected
	opNakInvReq byte = 4 // invalid request (message longer than the receive)
	opRNR       byte = 5 // receiver not ready: accepted and held
	// opDropped is the sim's own: the responder dropped the request (no
	// such QP, not ready, failed header checks, destroyed while holding
	// it). IB says nothing and the requester times out; here the word
	// lets the requester tell a lost request from one a CPU-starved
	// responder has not read yet (see retryWindow in qp.go). It changes
	// no timing: the requester still waits for its timer.
	opDropped byte = 6
	// RDMA WRITE and READ requests: the payload starts with the remote
	// address (8 bytes) and rkey (4); a WRITE's data follows, a READ's
	// length (4) does.
	opWrite byte = 7
	opRead  byte = 8
	// opReadResp carries a READ's data back; it acknowledges the READ and
	// every request before it.
	opReadResp byte = 9
	// opNakAccess is the remote access error NAK: bad rkey, address out
	// of the region, or access the region or QP does not allow.
	opNakAccess byte = 10
)

// isRequest reports whether op flows from requester to responder.
func isRequest(op byte) bool {
	return op == opSend || op == opWrite || op == opRead || op == opUDSend
}

// Frame layout, big-endian: op(1) pad(1) srcLID(2) srcQPN(4) dstQPN(4)
// psn(4) len(4), then len payload bytes.
const hdrLen = 20

// maxFrame bounds a payload read from the wire (rxe's port max_msg_sz is
// 2^31), so a corrupt stream cannot make the reader allocate without end.
const maxFrame = 1 << 31

// wireMagic opens every connection so a stray client on the port is
// refused before it can inject frames.
var wireMagic = [8]byte{'r', 'd', 'm', 'a', 's', 'i', 'm', 1}

type header struct {
	op     byte
	srcLID uint16
	srcQPN uint32
	dstQPN uint32
	psn    uint32
	n      uint32
}

func (h header) put(b []byte) {
	b[0], b[1] = h.op, 0
	binary.BigEndian.PutUint16(b[2:], h.srcLID)
	binary.BigEndian.PutUint32(b[4:], h.srcQPN)
	binary.BigEndian.PutUint32(b[8:], h.dstQPN)
	binary.BigEndian.PutUint32(b[12:], h.psn)
	binary.BigEndian.PutUint32(b[16:], h.n)
}

func parseHeader(b []byte) header {
	return header{
		op:     b[0],
		srcLID: binary.BigEndian.Uint16(b[2:]),
		srcQPN: binary.BigEndian.Uint32(b[4:]),
		dstQPN: binary.BigEndian.Uint32(b[8:]),
		psn:    binary.BigEndian.Uint32(b[12:]),
		n:      binary.BigEndian.Uint32(b[16:]),
	}
}

// link is one TCP connection of the wire. Frames are appended to buf by
// whoever sends (never blocking on the socket, so a QP lock is never held
// across a syscall) and written in batches by the link's writer goroutine.
type link struct {
	dev      *device
	outbound bool // we dialed it; carries our SENDs and their responses
	// peer is the peer wire's address and port (its GID's address and
	// LID) on an outbound link; on an inbound one, the address the peer
	// dialed from (its GID's: dials are made from the wire's address)
	// and port 0.
	peer netip.AddrPort
	dead atomic.Bool

	mu    sync.Mutex
	conn  net.Conn // nil until an outbound dial completes
	buf   []byte
	spare []byte
	kick  chan struct{} // capacity 1: "buf has data"
	done  chan struct{} // closed by fail
}

// Buffers larger than this are dropped after a write instead of reused, so
// one burst does not pin memory for the life of the connection.
const maxSpare = 1 << 20

func newLink(d *device, outbound bool, peer netip.AddrPort, c net.Conn) *link {
	return &link{dev: d, outbound: outbound, peer: peer, conn: c,
		kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// send queues one frame: the header, then ext and payload as its body.
func (l *link) send(h header, ext, payload []byte) {
	h.n = uint32(len(ext) + len(payload))
	var hb [hdrLen]byte
	h.put(hb[:])
	l.mu.Lock()
	if l.dead.Load() {
		l.mu.Unlock()
		return
	}
	l.buf = append(l.buf, hb[:]...)
	l.buf = append(l.buf, ext...)
	l.buf = append(l.buf, payload...)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// fail tears the link down once; frames still queued are lost, which the
// QPs' retransmission timers turn into retries or RETRY_EXC_ERR.
func (l *link) fail() {
	l.mu.Lock()
	if l.dead.Load() {
		l.mu.Unlock()
		return
	}
	l.dead.Store(true)
	l.buf, l.spare = nil, nil
	c := l.conn
	l.mu.Unlock()
	close(l.done)
	if c != nil {
		_ = c.Close()
	}
	l.dev.dropLink(l)
}

func (l *link) writeLoop() {
	defer l.dev.wg.Done()
	if l.outbound && !l.dial() {
		return
	}
	for {
		select {
		case <-l.kick:
		case <-l.done:
			return
		}
		l.mu.Lock()
		b := l.buf
		l.buf, l.spare = l.spare, nil
		l.mu.Unlock()
		if len(b) == 0 {
			continue
		}
		if _, err := l.conn.Write(b); err != nil {
			l.fail()
			return
		}
		if cap(b) <= maxSpare {
			l.mu.Lock()
			if !l.dead.Load() {
				l.spare = b[:0]
			}
			l.mu.Unlock()
		}
	}
}

// dial connects an outbound link and starts its response reader.
func (l *link) dial() bool {
	// From the wire's own address: the peer checks that a request comes
	// from the address of the GID its QP was connected to.
	dl := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(l.dev.addr, 0))}
	c, err := dl.DialContext(l.dev.ctx, "tcp", l.peer.String())
	if err != nil {
		l.fail()
		return false
	}
	if _, err := c.Write(wireMagic[:]); err != nil {
		_ = c.Close()
		l.fail()
		return false
	}
	l.mu.Lock()
	if l.dead.Load() {
		l.mu.Unlock()
		_ = c.Close()
		return false
	}
	l.conn = c
	l.dev.wg.Add(1)
	l.mu.Unlock()
	go l.readLoop(c)
	return true
}

func (l *link) readLoop(c net.Conn) {
	defer l.dev.wg.Done()
	defer l.fail()
	br := bufio.NewReaderSize(c, 64<<10)
	if !l.outbound {
		var m [len(wireMagic)]byte
		if _, err := io.ReadFull(br, m[:]); err != nil || m != wireMagic {
			return
		}
	}
	var hb [hdrLen]byte
	var scratch []byte
	for {
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			return
		}
		h := parseHeader(hb[:])
		if uint64(h.n) > maxFrame {
			return
		}
		if cap(scratch) < int(h.n) {
			scratch = make([]byte, h.n)
		}
		p := scratch[:h.n]
		if _, err := io.ReadFull(br, p); err != nil {
			return
		}
		l.dev.dispatch(l, h, p)
		if cap(scratch) > maxSpare {
			scratch = nil
		}
	}
}

// dispatch demultiplexes a frame by destination QPN. Requests are only
// taken from connections peers dialed and responses only from ours.
func (d *device) dispatch(l *link, h header, p []byte) {
	q := d.lookup(h.dstQPN)
	if h.op == opUDSend {
		if q != nil && !l.outbound {
			q.onDatagram(l, h, p)
		}
		return // a datagram to no QP is dropped without a word
	}
	if q == nil {
		if isRequest(h.op) && !l.outbound {
			d.dropped(l, h) // unknown QPN: dropped; the requester times out
		}
		return
	}
	switch {
	case isRequest(h.op) && !l.outbound:
		q.onRequest(l, h, p)
	case !isRequest(h.op) && l.outbound:
		q.onResponse(l, h, p)
	}
}

// dropped tells the requester of h that its request was dropped.
func (d *device) dropped(l *link, h header) {
	if l != nil {
		d.send(l, header{op: opDropped, srcLID: d.port.LID, srcQPN: h.dstQPN, dstQPN: h.srcQPN, psn: h.psn}, nil, nil)
	}
}

func (d *device) lookup(qpn uint32) *qp {
	p := d.prov
	p.mu.RLock()
	q := p.qps[qpn]
	p.mu.RUnlock()
	if q == nil || q.dev != d {
		return nil
	}
	return q
}

func (d *device) start() {
	d.wg.Add(1)
	go d.acceptLoop()
	if d.delay != nil {
		d.wg.Add(1)
		go d.runDelay()
	}
}

func (d *device) acceptLoop() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or similar: back off instead of spinning,
			// as net/http does.
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		var peer netip.AddrPort
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			peer = netip.AddrPortFrom(ta.AddrPort().Addr().Unmap(), 0)
		}
		l := newLink(d, false, peer, c)
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			_ = c.Close()
			return
		}
		d.in[l] = struct{}{}
		d.wg.Add(2)
		d.mu.Unlock()
		go l.readLoop(c)
		go l.writeLoop()
	}
}

// linkTo returns the connection towards the context whose wire is peer
// (its GID's address, its LID), dialing it (in the link's writer
// goroutine) on first use.
func (d *device) linkTo(peer netip.AddrPort) *link {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if l := d.out[peer]; l != nil && !l.dead.Load() {
		return l
	}
	l := newLink(d, true, peer, nil)
	d.out[peer] = l
	d.wg.Add(1)
	go l.writeLoop()
	return l
}

func (d *device) dropLink(l *link) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l.outbound {
		if d.out[l.peer] == l {
			delete(d.out, l.peer)
		}
	} else {
		delete(d.in, l)
	}
}
