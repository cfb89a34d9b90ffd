package server

import (
	"fmt"
	"net"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// conn is one admitted client's verbs resources. The client has
// Config.Depth buffers of MsgSize bytes at recvOff in recvMR and as many
// at sendOff in sendMR, in MRs of its own (per-client, shared-cq) or in
// the server's pool (pool). Pool mode receives in the first and sends
// from the second (echo.go); the per-client loop (echoloop.go) rotates
// all of them between receiving and sending (fabric.EchoLoop). In srq mode it has neither:
// messages land in SRQ buffers and are echoed from there (echo.go).
type conn struct {
	s                *Server
	sendCQ, recvCQ   fabric.CQ
	sendMR, recvMR   fabric.MR
	sendOff, recvOff int
	own              []fabric.MR // registered for this client alone
	slot             int         // pool slot, -1 if none
	remote           int         // slot of the remote buffer (Config.Remote), -1 if none
	qp               fabric.QP
	sub              *subscription
	// ud mode: the address handle towards the client's UD QP, and the
	// Q_Key its datagrams must carry (no QP of its own: ud.go).
	ah       fabric.AH
	peerQKey uint32

	// pool and srq modes (echo.go): mu serialises the routers' echo with
	// release.
	mu       sync.Mutex
	released bool
	// inflight holds the wrIDs of echoes being sent, by send slot (0 =
	// free); pending the verified messages waiting for a send slot, up to
	// cap(pending).
	inflight []uint64
	pending  []pendingEcho
	sends    uint64 // pool: wrID of the last echo

	raw     net.Conn // the client's socket, once adopted
	unwatch func()

	// hello is the endpoint the client claimed, and psn the PSN it was
	// given (if hasPSN): release gives both back.
	hello  helloKey
	psn    uint32
	hasPSN bool

	// mux is the QP's logical clients in mux mode (mux.go): the conn is
	// then a QP, not a client, and holds no admission of its own.
	mux *muxQP
}

// depth is how many messages c's QP may have outstanding: Config.Depth
// for each of its logical clients.
func (c *conn) depth() int {
	if c.mux != nil {
		return c.s.cfg.Mux * c.s.cfg.Depth
	}
	return c.s.cfg.Depth
}

// wr is c's QP's send and receive queue depth.
func (c *conn) wr() int {
	if c.mux != nil {
		return max(QPMaxSendWR, c.depth())
	}
	return c.s.wr
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
		if s.cfg.Mode == ModeUD {
			return c.setupUD(h)
		}
	} else {
		if c.sendCQ, err = s.cqs.create(c.wr()); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
		if c.recvCQ, err = s.cqs.create(c.wr()); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
	}
	depth, size := c.depth(), s.cfg.MsgSize
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
		if c.sendMR, err = s.pd.RegMR(depth*size, fabric.AccessLocalWrite); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
		c.own = append(c.own, c.sendMR)
		if c.recvMR, err = s.pd.RegMR(depth*size, fabric.AccessLocalWrite); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
		c.own = append(c.own, c.recvMR)
	}
	if s.shared != nil && s.shared.events {
		c.inflight = make([]uint64, s.wr)
		c.pending = make([]pendingEcho, 0, max(maxPending, depth))
	}
	if s.region != nil {
		if c.remote, err = s.region.get(); err != nil {
			return exchange.Msg{}, result.OutcomeQPCreate, err
		}
	}
	attr := fabric.QPInitAttr{
		SendCQ: c.sendCQ, RecvCQ: c.recvCQ,
		MaxSendWR: c.wr(), MaxRecvWR: c.wr(), MaxSendSGE: 1, MaxRecvSGE: 1,
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
	access := fabric.AccessLocalWrite
	var remote exchange.Remote
	if s.region != nil {
		access |= fabric.AccessRemoteWrite | fabric.AccessRemoteRead
		buf := s.region.slice(c.remote)
		for j := 0; j < depth; j++ {
			payload.Fill(buf[j*size:], payload.RegionSeq(c.qp.QPN(), j), size)
		}
		remote = exchange.Remote{Addr: s.region.mr.Addr() + uint64(c.remote*s.region.per),
			RKey: s.region.mr.RKey(), Len: uint32(s.region.per)}
	}
	if err := c.qp.ToInit(fabric.InitAttr{Port: s.port.Port, Access: access}); err != nil {
		return exchange.Msg{}, result.OutcomeInit, err
	}
	// The receives are posted before RTR so the client's first SEND always
	// finds a buffer (in srq mode the SRQ is stocked already); a receive's
	// wrID is its buffer's index.
	if attr.SRQ == nil {
		for j := 0; j < depth; j++ {
			if err := c.qp.PostRecv(uint64(j), c.recvMR, c.recvOff+j*size, size); err != nil {
				return exchange.Msg{}, result.OutcomeInit, err
			}
		}
	}
	psn, err := s.psns.draw()
	if err != nil {
		return exchange.Msg{}, result.OutcomeExchange, fmt.Errorf("generate PSN: %w", err)
	}
	c.psn, c.hasPSN = psn, true
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
	return exchange.Msg{Type: typ, QPN: c.qp.QPN(), PSN: psn, LID: s.port.LID, MTU: s.port.ActiveMTU,
		GID: s.port.GID, Logical: h.Logical, Remote: remote}, "", nil
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
	if c.ah != nil {
		c.ah.Destroy()
		c.s.mu.Lock()
		c.s.ahs--
		c.s.mu.Unlock()
		released = true
	}
	for _, mr := range c.own {
		mr.Dereg()
	}
	if c.slot >= 0 {
		c.s.pool.put(c.slot)
	}
	if c.remote >= 0 {
		c.s.region.put(c.remote)
	}
	if c.sub == nil {
		for _, cq := range []fabric.CQ{c.sendCQ, c.recvCQ} {
			if cq != nil {
				c.s.cqs.destroy(cq)
			}
		}
	}
	return released
}
