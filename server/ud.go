package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// ud mode. Each CQ group has one UD QP, whose receive queue holds the
// group's buffers of the pool (as an SRQ does in srq mode) and whose
// sends carry every echo of the group's clients. A client costs an
// address handle, created at admission, towards its UD QP, and a slot
// in its group: no QP, no CQ, no MR. The receive router finds a
// datagram's client by its sender, the QPN of the completion (src_qp)
// and the GID of the GRH in front of the message: a Q_Key travels in
// every packet and keeps out no one, so a datagram of an unknown sender
// is dropped and counted. The echo goes out of the buffer the message
// arrived in, through the client's address handle; the send router
// finds the client by the buffer (its owner) to return it.
//
// UD is unreliable: a datagram that finds the group's receive queue
// empty is dropped. A buffer returns to the queue only once the send
// router has seen its echo's send complete, by which time the client
// may have sent its next message or two; the queue holds UDBuffers per
// message its clients may have outstanding (at least MinSRQDepth), so
// it runs dry only when the send router lags that far behind. The
// clients count what is lost. A message is one packet: a message size
// above the path MTU is refused at start.

// UDBuffers is the receive buffers of a ud group per message its
// clients may have outstanding.
const UDBuffers = 4

// udConf is what a ud-mode server's groups share.
type udConf struct {
	qkey uint32
	port fabric.PortInfo
	// unknown counts a datagram of an unknown sender.
	unknown func()
}

// udPeer names a client's UD QP: its QPN and its port's GID.
type udPeer struct {
	qpn uint32
	gid fabric.GID
}

// errUnknownSender is counted for a datagram that names no client.
var errUnknownSender = errors.New("datagram from an unknown sender (the QPN and GID of no client): dropped")

// newUD prepares ud mode: the pool of receive buffers (each with room
// for the GRH) and the groups, sized so that a group's receive queue and
// CQs hold UDBuffers per message its clients may have outstanding.
func (s *Server) newUD(caps fabric.Caps) error {
	cfg := s.cfg
	if mtu := s.port.ActiveMTU.Bytes(); cfg.MsgSize > mtu {
		return fmt.Errorf("--msg-size %d is above the path MTU of %s (%d bytes): a ud message is one packet", cfg.MsgSize, s.dev.Name(), mtu)
	}
	if cfg.Remote {
		return errors.New("--remote lends a buffer to RDMA WRITE and READ, which UD QPs do not do: use an RC mode")
	}
	per := groupSize(caps, cfg.MaxClients, UDBuffers*cfg.Depth)
	depth := max(UDBuffers*per*cfg.Depth, MinSRQDepth)
	if caps.MaxQPWR > 0 {
		depth = min(depth, caps.MaxQPWR)
	}
	if caps.MaxCQE > 0 {
		depth = min(depth, caps.MaxCQE)
	}
	groups := (cfg.MaxClients + per - 1) / per
	var err error
	if s.pool, err = newBufPool(s.pd, caps, groups*depth, cfg.MsgSize+fabric.GRHLen); err != nil {
		return err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("generate Q_Key: %w", err)
	}
	// The high bit marks a controlled Q_Key, which only privileged QPs
	// may send; 0 would read as no Q_Key in the exchange.
	qkey := max(binary.BigEndian.Uint32(b[:])&0x7fffffff, 1)
	s.shared = newSharedCQs(s.cqs, s.pd, cfg.MaxClients, per, s.wr, true, s.pool, depth)
	s.shared.ud = &udConf{qkey: qkey, port: s.port, unknown: func() { s.fail(result.OutcomeMessage, errUnknownSender) }}
	return nil
}

// newUDQP creates group g's UD QP over its CQs, in RTS; the caller
// stocks its receive queue.
func (s *sharedCQs) newUDQP(g *cqGroup) error {
	q, err := s.pd.CreateQP(fabric.QPInitAttr{Type: fabric.QPTypeUD, SendCQ: g.send, RecvCQ: g.recv,
		MaxSendWR: s.depth, MaxRecvWR: s.depth, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		return fmt.Errorf("the group's UD QP: %w", err)
	}
	for _, err = range []error{
		q.ToInit(fabric.InitAttr{Port: s.ud.port.Port, QKey: s.ud.qkey}),
		q.ToRTR(fabric.RTRAttr{}),
		q.ToRTS(fabric.RTSAttr{}),
	} {
		if err != nil {
			q.Destroy()
			return fmt.Errorf("the group's UD QP: %w", err)
		}
	}
	g.udqp, g.peers, g.owners = q, map[udPeer]*subscription{}, make([]*conn, s.depth)
	return nil
}

// destroyRecvSide destroys the group's SRQ or UD QP, if it has one.
func (g *cqGroup) destroyRecvSide() {
	if g.srq != nil {
		g.srq.Destroy()
	}
	if g.udqp != nil {
		g.udqp.Destroy()
	}
}

// sendingFor is sending for an echo of c from buffer k (ud mode).
func (g *cqGroup) sendingFor(k int, c *conn) uint64 {
	g.bufMu.Lock()
	g.owners[k-g.bufLo] = c
	g.bufMu.Unlock()
	return g.sending(k)
}

// owner is the client whose echo buffer k sent (ud mode).
func (g *cqGroup) owner(k int) *conn {
	g.bufMu.Lock()
	defer g.bufMu.Unlock()
	c := g.owners[k-g.bufLo]
	g.owners[k-g.bufLo] = nil
	return c
}

// receivedUD is a receive completion of group g's UD QP in buffer k:
// the client is the datagram's sender, if it is one.
func (s *sharedCQs) receivedUD(g *cqGroup, wc fabric.WC, k int) {
	var sub *subscription
	if wc.Status == fabric.WCSuccess && wc.GRH {
		if src, ok := fabric.SourceGID(s.pool.buf(k, fabric.GRHLen)); ok {
			g.mu.Lock()
			sub = g.peers[udPeer{qpn: wc.SrcQP, gid: src}]
			g.mu.Unlock()
		}
		if sub == nil {
			s.ud.unknown()
		}
	}
	if sub == nil {
		// Not a client's, or a receive that failed (flushed as the
		// server stops): only the buffer is left to return.
		s.post(g, k)
		return
	}
	sub.c.received(wc, k)
}

// setupUD admits a ud-mode client: an address handle towards its UD QP,
// and its place in its group's routing. The accept names the group's UD
// QP and the server's Q_Key.
func (c *conn) setupUD(h exchange.Msg) (exchange.Msg, string, error) {
	s := c.s
	if h.QKey == 0 {
		return exchange.Msg{}, result.OutcomeExchange, errors.New("hello without a Q_Key: the client has an RC QP, this server serves UD QPs (--mode ud)")
	}
	var err error
	c.ah, err = s.pd.CreateAH(fabric.AHAttr{DLID: h.LID, DGID: h.GID, GIDIndex: s.port.GIDIndex,
		HopLimit: QPHopLimit, Port: s.port.Port})
	if err != nil {
		return exchange.Msg{}, result.OutcomeQPCreate, err
	}
	s.mu.Lock()
	s.ahs++
	s.stats.PeakAHs = max(s.stats.PeakAHs, s.ahs)
	s.mu.Unlock()
	c.peerQKey = h.QKey
	c.inflight = make([]uint64, s.wr)
	c.pending = make([]pendingEcho, 0, max(maxPending, s.cfg.Depth))
	c.sub.bindPeer(udPeer{qpn: h.QPN, gid: h.GID}, c)
	typ := exchange.Accept
	if s.cfg.Detach {
		typ = exchange.Detached
	}
	g := c.sub.group
	return exchange.Msg{Type: typ, QPN: g.udqp.QPN(), LID: s.port.LID, MTU: s.port.ActiveMTU, GID: s.port.GID,
		QKey: s.shared.ud.qkey}, "", nil
}
