package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// Logical clients (Config.Mux, the server's mux mode): up to Mux clients
// share one RC QP. Each still has its own TLS connection, exchange and
// send buffer; its hello names the shared QP and its logical ID (1 to
// Mux). A client joins the QP being filled, or opens the next one when
// that QP has handed out Mux IDs; the first accept to come back takes the
// QP to RTS, and the others must name the same server QP.
//
// The QP has Depth receives posted for each of its logical clients, each
// in a buffer of its own: an echo lands in whichever receive is next, so the
// group's router checks it there, hands the verified sequence number to
// the logical client it names (payload.MuxSeq) and posts the receive
// again. A send's wrID is its message's sequence, which names its
// logical client too. A message that fails its check, an echo for a
// logical client the QP does not carry, or a failed receive ends the QP
// for all of them: the one named (if any) fails its round trip, its
// neighbours share its fate (result.OutcomeSharedFate).
//
// In the traffic phase each logical client is a flow as any client is
// (flow.go), Depth messages outstanding from its own send buffers, its
// sequence numbers going on from its connect's round trips: the router
// hands its verified echoes and its sends' completions to its flow
// (takeLogical), which accounts them to it alone. A failed completion
// ends the QP: the logical client it belongs to fails with its status,
// the others' flows with result.OutcomeSharedFate.

// sharedQP is one QP of a dialer's logical clients.
type sharedQP struct {
	d     *Dialer
	qp    fabric.QP
	group *cqGroup
	mr    fabric.MR // Depth receive buffers per logical client
	psn   uint32

	mu      sync.Mutex
	given   uint32 // logical IDs handed out, 1..given
	users   int    // logical clients holding the QP
	members map[uint32]*Conn
	// remote is the server's QP this one is connected to (0: not yet).
	remote uint32
	// dead is closed, with culprit, class and err set, when the QP has
	// failed; class is what the culprit failed with.
	dead    chan struct{}
	culprit uint32
	class   string
	err     error
}

// fateError is a logical client's failed round trip on a QP that failed:
// its own failure, or (shared) its neighbour's or the QP's.
type fateError struct {
	shared bool
	class  string // the culprit's outcome class
	err    error
}

func (e *fateError) Error() string {
	if e.shared {
		return fmt.Sprintf("its shared QP failed: %v", e.err)
	}
	return e.err.Error()
}

func (e *fateError) Unwrap() error { return e.err }

// join hands out a logical ID on the QP being filled, opening the next QP
// when that one has given out Config.Mux IDs.
func (d *Dialer) join() (*sharedQP, uint32, error) {
	d.muxMu.Lock()
	defer d.muxMu.Unlock()
	sq := d.filling
	if sq == nil || int(sq.given) >= d.cfg.Mux {
		var err error
		if sq, err = d.openShared(); err != nil {
			return nil, 0, err
		}
		d.filling = sq
	}
	sq.mu.Lock()
	defer sq.mu.Unlock()
	sq.given++
	sq.users++
	return sq, sq.given, nil
}

// openShared creates a QP for Config.Mux logical clients and posts its
// receives: Depth for each, as many as their messages outstanding.
func (d *Dialer) openShared() (*sharedQP, error) {
	psn, err := randPSN()
	if err != nil {
		return nil, fmt.Errorf("generate PSN: %w", err)
	}
	sq := &sharedQP{d: d, psn: psn, members: map[uint32]*Conn{}, dead: make(chan struct{})}
	if sq.group, err = d.groups.join(); err != nil {
		return nil, err
	}
	k, size := d.cfg.Mux*d.cfg.Depth, d.cfg.MsgSize
	if sq.mr, err = d.pd.RegMR(k*size, fabric.AccessLocalWrite); err != nil {
		sq.close()
		return nil, err
	}
	if sq.qp, err = d.pd.CreateQP(fabric.QPInitAttr{SendCQ: sq.group.cq, RecvCQ: sq.group.cq,
		MaxSendWR: d.wr, MaxRecvWR: d.wr, MaxSendSGE: 1, MaxRecvSGE: 1}); err != nil {
		sq.close()
		return nil, err
	}
	sq.group.bindShared(sq.qp.QPN(), sq)
	if err := sq.qp.ToInit(fabric.InitAttr{Port: d.port.Port, Access: fabric.AccessLocalWrite}); err != nil {
		sq.close()
		return nil, err
	}
	for j := 0; j < k; j++ {
		if err := sq.qp.PostRecv(uint64(j), sq.mr, j*size, size); err != nil {
			sq.close()
			return nil, err
		}
	}
	return sq, nil
}

// connect takes the QP to RTS towards the server's QP of reply, the first
// time; after, reply must name that QP.
func (sq *sharedQP) connect(reply exchange.Msg) (class string, err error) {
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if sq.remote != 0 {
		if reply.QPN != sq.remote {
			return result.OutcomeExchange, fmt.Errorf("the server answered with QP %d; this shared QP is connected to its QP %d", reply.QPN, sq.remote)
		}
		return "", nil
	}
	port := sq.d.port
	if err := sq.qp.ToRTR(server.RTR(port, reply, min(port.ActiveMTU, reply.MTU))); err != nil {
		return result.OutcomeRTR, err
	}
	if err := sq.qp.ToRTS(server.RTS(sq.psn)); err != nil {
		return result.OutcomeRTS, err
	}
	sq.remote = reply.QPN
	return "", nil
}

// enter makes c, logical client id, a recipient of the QP's echoes.
func (sq *sharedQP) enter(id uint32, c *Conn) {
	sq.mu.Lock()
	sq.members[id] = c
	sq.mu.Unlock()
}

// post sends c's message seq from its send buffer at off; the QP's
// logical clients post from their own goroutines. On a QP that failed it
// returns c's fate.
func (sq *sharedQP) post(c *Conn, seq uint64, off, size int) error {
	sq.mu.Lock()
	defer sq.mu.Unlock()
	select {
	case <-sq.dead:
		return &fateError{shared: sq.culprit != c.logical, class: sq.class, err: sq.err}
	default:
	}
	return sq.qp.PostSend(seq, c.buf.mr, off, size)
}

// take handles a completion of the QP, from its group's router.
func (sq *sharedQP) take(wc fabric.WC) {
	if wc.Opcode != fabric.WCRecv {
		// A send: its wrID is its message's sequence, naming its sender.
		sq.mu.Lock()
		c := sq.members[payload.Logical(wc.WRID)]
		sq.mu.Unlock()
		if c != nil {
			c.deliver(wc)
		}
		return
	}
	if wc.Status != fabric.WCSuccess {
		sq.fail(0, wc.Status.Name(), &fabric.WCError{Op: "recv", Status: wc.Status})
		return
	}
	size := sq.d.cfg.MsgSize
	j := int(min(wc.WRID, uint64(sq.d.cfg.Mux*sq.d.cfg.Depth-1)))
	b := sq.mr.Buf()[j*size : j*size+min(max(wc.ByteLen, 0), size)]
	seq, err := payload.Check(b)
	if err != nil {
		sq.fail(payload.Logical(payload.Seq(b)), result.TrafficVerify, fmt.Errorf("echo: %w", err))
		return
	}
	sq.mu.Lock()
	c := sq.members[payload.Logical(seq)]
	sq.mu.Unlock()
	if c == nil {
		sq.fail(0, result.TrafficVerify, fmt.Errorf("echo %#x for logical client %d, which this QP does not carry", seq, payload.Logical(seq)))
		return
	}
	// Verified: the echo's sequence goes to its logical client, and the
	// buffer back to the QP's receives.
	if err := sq.qp.PostRecv(uint64(j), sq.mr, j*size, size); err != nil {
		sq.fail(0, result.TrafficPost, err)
		return
	}
	wc.WRID = seq
	c.deliver(wc)
}

// deliver hands a completion to c's flow in the traffic phase, else to
// c's goroutine. The channel holds every completion c's round trip can
// have outstanding (a send and an echo).
func (c *Conn) deliver(wc fabric.WC) {
	if f := c.flow.Load(); f != nil {
		f.takeLogical(wc)
		return
	}
	select {
	case c.wcs <- wc:
	default:
	}
}

// fail ends the QP for its logical clients: culprit (if it is one of
// them) fails with class, the others share its fate. Those in the
// traffic phase have their flows failed so; the others see dead.
func (sq *sharedQP) fail(culprit uint32, class string, err error) {
	sq.mu.Lock()
	select {
	case <-sq.dead:
		sq.mu.Unlock()
		return
	default:
	}
	sq.culprit, sq.class, sq.err = culprit, class, err
	close(sq.dead)
	var flows []*flow
	for _, c := range sq.members {
		if f := c.flow.Load(); f != nil {
			flows = append(flows, f)
		}
	}
	// A flow's lock is taken before sq.mu (post), so not under it.
	sq.mu.Unlock()
	for _, f := range flows {
		f.fated()
	}
}

// fate is the error of logical client id once the QP has failed.
func (sq *sharedQP) fate(id uint32) error {
	sq.mu.Lock()
	defer sq.mu.Unlock()
	return &fateError{shared: sq.culprit != id, class: sq.class, err: sq.err}
}

// fateClass is the traffic error class of a logical client's fate.
func fateClass(fe *fateError) string {
	if fe.shared {
		return result.OutcomeSharedFate
	}
	return fe.class
}

// fated fails f's logical client with its fate on the QP that failed.
func (f *flow) fated() {
	c := f.c
	err := c.sq.fate(c.logical)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.finished {
		fe := err.(*fateError)
		f.failLocked(fateClass(fe), err)
	}
}

// takeLogical is a completion of f's logical client in the traffic
// phase: a send of one of its messages, or an echo of one that the
// router verified already (sharedQP.take, its WRID the message's
// sequence). A failed completion ends the QP.
func (f *flow) takeLogical(wc fabric.WC) {
	c := f.c
	if wc.Status != fabric.WCSuccess {
		c.sq.fail(c.logical, wc.Status.Name(), &fabric.WCError{Op: wc.Opcode.String(), Status: wc.Status})
		f.fated()
		return
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.finished {
		return
	}
	j := -1
	for k := range f.slots {
		if s := &f.slots[k]; s.busy && s.seq == wc.WRID {
			j = k
			break
		}
	}
	if j < 0 {
		f.failLocked(result.TrafficVerify, fmt.Errorf("completion of message %#x, which is not outstanding", wc.WRID))
		return
	}
	s := &f.slots[j]
	if wc.Opcode != fabric.WCRecv {
		s.sent = true
	} else {
		if s.echoed || wc.ByteLen != f.e.size {
			f.failLocked(result.TrafficVerify, fmt.Errorf("echo of message %#x: %d bytes, sent %d, echoed before %v", wc.WRID, wc.ByteLen, f.e.size, s.echoed))
			return
		}
		s.echoed = true
		f.lat.RecordDuration(now.Sub(s.due))
		f.countLocked(now)
	}
	f.echoDoneLocked(j, now)
}

// postLogical posts f's logical client's message n from slot j: the
// message is round trip n of its logical client on the wire.
func (f *flow) postLogical(j int, n uint64) (uint64, error) {
	c := f.c
	seq := payload.MuxSeq(c.logical, n)
	payload.Fill(c.sendBuf(j), seq, f.e.size)
	return seq, c.sq.post(c, seq, c.buf.sendOff(j), f.e.size)
}

// leave gives back logical client id's hold on the QP; the last to leave
// destroys it.
func (sq *sharedQP) leave(id uint32) {
	sq.d.muxMu.Lock()
	sq.mu.Lock()
	delete(sq.members, id)
	sq.users--
	last := sq.users == 0
	if last && sq.d.filling == sq {
		sq.d.filling = nil
	}
	sq.mu.Unlock()
	sq.d.muxMu.Unlock()
	if last {
		sq.close()
	}
}

// close destroys what openShared created: the QP before its buffer.
func (sq *sharedQP) close() {
	var qpn uint32
	if sq.qp != nil {
		qpn = sq.qp.QPN()
		sq.qp.Destroy()
	}
	if sq.group != nil {
		sq.group.unbindShared(qpn)
		sq.d.groups.leave(sq.group, 0)
	}
	if sq.mr != nil {
		sq.mr.Dereg()
	}
}

// connectLogical runs logical client c from its TLS connection tc to its
// verified round trips on a shared QP.
func (d *Dialer) connectLogical(ctx context.Context, a *attempt, c *Conn, tc net.Conn) error {
	sq, id, err := d.join()
	if err != nil {
		a.fail(ctx, result.OutcomeQPCreate, err)
		return err
	}
	c.sq, c.logical, c.sqDead, c.group = sq, id, sq.dead, sq.group
	a.rec.LocalPSN, a.rec.LocalQPN, a.rec.Logical = sq.psn, sq.qp.QPN(), id
	a.phase(result.PhasePSN)
	if c.buf, err = d.bufs.get(); err != nil {
		a.fail(ctx, result.OutcomeQPCreate, err)
		return err
	}
	c.held = true
	c.qp = sq.qp
	a.phase(result.PhaseQPCreate)
	a.phase(result.PhaseInit)

	hello := exchange.Msg{Type: exchange.Hello, QPN: sq.qp.QPN(), PSN: sq.psn,
		LID: d.port.LID, MTU: d.port.ActiveMTU, GID: d.port.GID, Logical: id}
	if err := exchange.Write(tc, hello); err != nil {
		a.fail(ctx, exchangeClass(err), fmt.Errorf("send hello: %w", err))
		return err
	}
	reply, err := exchange.Read(tc)
	if err != nil {
		a.fail(ctx, exchangeClass(err), fmt.Errorf("read reply: %w", err))
		return err
	}
	switch {
	case reply.Type == exchange.Refuse:
		err := refusal(reply.Reason)
		a.fail(ctx, classOfRefusal(reply.Reason), err)
		return err
	case reply.Type != exchange.Accept:
		err := fmt.Errorf("unexpected reply type %d (a server of logical clients keeps their connections)", reply.Type)
		a.fail(ctx, result.OutcomeExchange, err)
		return err
	case reply.Logical != id:
		err := fmt.Errorf("the accept names logical client %d, not %d", reply.Logical, id)
		a.fail(ctx, result.OutcomeExchange, err)
		return err
	}
	a.rec.RemoteQPN, a.rec.RemotePSN = reply.QPN, reply.PSN
	c.serverQPN = reply.QPN
	a.phase(result.PhaseExchange)
	if class, err := sq.connect(reply); err != nil {
		a.fail(ctx, class, err)
		return err
	}
	sq.enter(id, c)
	a.phase(result.PhaseRTR)
	c.rts = true
	a.phase(result.PhaseRTS)

	size := d.cfg.MsgSize
	for i := 0; i < d.cfg.Rounds; i++ {
		c.sent = uint64(i) + 1
		t0 := time.Now()
		if err := c.logicalRoundTrip(ctx, payload.MuxSeq(id, uint64(i)+1), size); err != nil {
			class := result.OutcomeMessage
			var fe *fateError
			if errors.As(err, &fe) && fe.shared {
				class = result.OutcomeSharedFate
			}
			a.fail(ctx, class, fmt.Errorf("round trip %d: %w", i+1, err))
			return err
		}
		if i == 0 {
			a.phase(result.PhaseFirstRTT)
		}
		a.rec.RTTsUS = append(a.rec.RTTsUS, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	return nil
}

// logicalRoundTrip sends message seq over the shared QP and waits for its
// send to complete and its echo, which the router checked already
// (sharedQP.take), to come back.
func (c *Conn) logicalRoundTrip(ctx context.Context, seq uint64, size int) error {
	payload.Fill(c.sendBuf(0), seq, size)
	if err := c.sq.post(c, seq, c.buf.sendOff(0), size); err != nil {
		return err
	}
	var sent, got bool
	for !sent || !got {
		wc, err := c.await(ctx)
		if err != nil {
			return err
		}
		if wc.Status != fabric.WCSuccess {
			return &fabric.WCError{Op: "send", Status: wc.Status}
		}
		if wc.WRID != seq {
			return fmt.Errorf("completion of message %#x while message %#x is outstanding", wc.WRID, seq)
		}
		if wc.Opcode == fabric.WCRecv {
			if wc.ByteLen != size {
				return fmt.Errorf("echo of %d bytes, sent %d", wc.ByteLen, size)
			}
			got = true
		} else {
			sent = true
		}
	}
	return nil
}

// RoundTrips names a logical client's shared QP (its number) and its
// logical ID, and counts the messages it has sent over it, round trips
// and traffic, each of which its server counts for it; zeros for a
// client with a QP of its own.
func (c *Conn) RoundTrips() (qpn, logical uint32, n uint64) {
	if c.sq == nil {
		return 0, 0, 0
	}
	return c.sq.qp.QPN(), c.logical, c.sent
}
