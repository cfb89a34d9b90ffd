// Package client is one RDMA client of the server under test and the load
// generator that runs many of them per process. A client counts as
// connected only after its QP reached RTS and a self-checking payload came
// back intact.
package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// Config of the clients of one process.
type Config struct {
	Addr    string
	TLS     *tls.Config
	Rounds  int           // verified round trips per client (≥ 1)
	MsgSize int           // bytes per message (≥ payload.HeaderLen)
	Timeout time.Duration // per-client deadline for the whole attempt
	// Depth is how many messages a client may have outstanding in the
	// traffic phase (1 if 0): it sizes each client's queues and buffers.
	Depth int
	// BusyPoll, if not 0, keeps polling an empty CQ this long before
	// sleeping on its completion channel (fabric.Spin; server.Config).
	BusyPoll time.Duration
	// Mux, if not 0, makes the clients logical clients of a mux-mode
	// server, Mux to a QP (mux.go).
	Mux int
	// UD makes each client a UD QP and an address handle towards the
	// server's, for a server of --mode ud. A message is then one
	// datagram: no larger than the path MTU, and a lost one is counted
	// (result.OutcomeLost, result.TrafficLost), never retried.
	UD bool
}

// Dialer connects clients over one device context and PD, as a
// multi-client process would.
type Dialer struct {
	cfg    Config
	dev    fabric.Device
	pd     fabric.PD
	port   fabric.PortInfo
	bufs   *bufs
	groups *groups
	wr     int // each client QP's send and receive queue depth

	// muxMu guards filling, the shared QP handing out logical IDs
	// (Config.Mux).
	muxMu   sync.Mutex
	filling *sharedQP
}

// NewDialer allocates the shared PD on dev.
func NewDialer(dev fabric.Device, cfg Config) (*Dialer, error) {
	if cfg.Rounds < 1 {
		cfg.Rounds = 1
	}
	if cfg.MsgSize < payload.HeaderLen {
		cfg.MsgSize = 64
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Depth < 1 {
		cfg.Depth = 1
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, err
	}
	// Twice Depth receives stay posted in the traffic phase (bufs).
	wr := max(QPDepth, 2*cfg.Depth)
	if cfg.Mux > 0 {
		// Depth receives and sends for each logical client of a QP.
		wr = max(wr, cfg.Mux*cfg.Depth)
		if err := dev.Caps().FitsQP(wr, fmt.Sprintf("--mux %d × --depth %d", cfg.Mux, cfg.Depth)); err != nil {
			pd.Dealloc()
			return nil, err
		}
	}
	head := 0
	if cfg.UD {
		if mtu := dev.Port().ActiveMTU.Bytes(); cfg.MsgSize > mtu {
			pd.Dealloc()
			return nil, fmt.Errorf("--msg-size %d is above the path MTU of %s (%d bytes): a ud message is one packet", cfg.MsgSize, dev.Name(), mtu)
		}
		head = fabric.GRHLen
	}
	return &Dialer{cfg: cfg, dev: dev, pd: pd, port: dev.Port(), bufs: newBufs(pd, cfg.MsgSize, cfg.Depth, head),
		groups: newGroups(dev, wr, cfg.BusyPoll), wr: wr}, nil
}

// Close stops the CQ routers and releases the CQs, the buffers and the
// PD; every Conn must be closed first.
func (d *Dialer) Close() error {
	err := d.groups.close()
	if berr := d.bufs.close(); err == nil {
		err = berr
	}
	if perr := d.pd.Dealloc(); err == nil {
		err = perr
	}
	return err
}

// Conn is a connected client. It holds its QP and TLS connection until
// Close, so the server sees it as a concurrent client.
type Conn struct {
	id     int // the client's ID (ClientRecord.ID)
	tls    net.Conn
	groups *groups
	group  *cqGroup // the shared CQ its QP completes on
	wcs    chan fabric.WC
	// flow runs the client's traffic phase; while set, the group's router
	// hands it the client's completions instead of wcs.
	flow atomic.Pointer[flow]
	bufs *bufs
	buf  bufPair // send and receive buffers, from the dialer's regions
	held bool    // buf is this client's
	msg  int
	qp   fabric.QP
	// remote is the client's region of the server's buffer (RDMA WRITE
	// and READ), zero when the server offers none; serverQPN is the
	// server's QP, which names what the server put in that region.
	remote    exchange.Remote
	serverQPN uint32
	// detached: the server closed the control connection after accepting
	// (exchange.Detached); Close says goodbye over the QP instead.
	detached bool
	rts      bool // the QP reached RTS: a goodbye can be sent
	// sq is the QP the client shares as logical client logical
	// (Config.Mux, mux.go); sqDead is sq's, nil without one.
	sq      *sharedQP
	logical uint32
	// sent is the logical client's round trips so far: its next message
	// is round trip sent+1, as the server counts them.
	sent uint64
	// recvs is how many receive buffers are posted (0..recvs-1): the
	// connect posts buffer 0, a traffic phase the rest of its 2·Depth,
	// and every echo re-posts its buffer, so they stay posted after the
	// phase for the next one (a staircase runs a phase per step).
	recvs  int
	sqDead chan struct{}
	// ud: the address handle towards the server's UD QP (serverQPN) and
	// the Q_Key its datagrams must carry.
	ah         fabric.AH
	serverQKey uint32
}

// postSend posts the send of size bytes from send buffer j: over the
// connection, or as a datagram to the server's UD QP.
func (c *Conn) postSend(wrID uint64, j, size int) error {
	if c.ah != nil {
		return c.qp.PostSendUD(wrID, c.buf.mr, c.buf.sendOff(j), size, c.ah, c.serverQPN, c.serverQKey)
	}
	return c.qp.PostSend(wrID, c.buf.mr, c.buf.sendOff(j), size)
}

// postRecv posts receive buffer j for a message of size bytes (behind
// the room for its GRH, for a datagram).
func (c *Conn) postRecv(wrID uint64, j, size int) error {
	return c.qp.PostRecv(wrID, c.buf.mr, c.buf.postOff(j), c.buf.head+size)
}

// received is the length of the message a successful receive brought,
// without the GRH of a datagram, or an error if a datagram came from
// another sender than the server's UD QP.
func (c *Conn) received(wc fabric.WC) (int, error) {
	if c.buf.head == 0 {
		return wc.ByteLen, nil
	}
	if wc.SrcQP != c.serverQPN {
		return 0, fmt.Errorf("datagram from QP %d, not the server's QP %d", wc.SrcQP, c.serverQPN)
	}
	return wc.ByteLen - c.buf.head, nil
}

// Close releases the client's QP and CQ, gives its buffers back and
// closes its connection. Towards a detached server it first says goodbye
// over the QP (see goodbye).
func (c *Conn) Close() {
	if c.detached && c.rts {
		c.goodbye()
	}
	if c.tls != nil {
		c.tls.Close()
	}
	if c.sq != nil {
		c.sq.leave(c.logical)
		c.sq = nil
		if c.held {
			c.bufs.put(c.buf)
			c.held = false
		}
		return
	}
	var qpn uint32
	if c.qp != nil {
		qpn = c.qp.QPN()
		c.qp.Destroy()
	}
	if c.ah != nil {
		c.ah.Destroy()
		c.ah = nil
	}
	if c.group != nil {
		c.groups.leave(c.group, qpn)
		c.group = nil
	}
	if c.held {
		c.bufs.put(c.buf) // after the QP: nothing can write it now
		c.held = false
	}
}

// ByeTimeout bounds how long Close waits for its goodbye to be
// acknowledged.
const ByeTimeout = 10 * time.Second

// goodbye tells a detached server that this client leaves: a self-checking
// header whose sequence is payload.Bye, sent over the QP, and waited for
// until the server's device acknowledged it (RC), so the message is the
// server's before the QP goes; a UD goodbye until the server's echo of
// it came back (a lost one leaves the client's slot taken until the
// server stops). Errors are ignored: the client leaves either way.
func (c *Conn) goodbye() {
	ctx, cancel := context.WithTimeout(context.Background(), ByeTimeout)
	defer cancel()
	payload.Fill(c.sendBuf(0), payload.Bye, payload.HeaderLen)
	if err := c.postSend(payload.Bye, 0, payload.HeaderLen); err != nil {
		return
	}
	for {
		wc, err := c.await(ctx)
		if err != nil || wc.Status != fabric.WCSuccess {
			return
		}
		if c.ah == nil && wc.Opcode == fabric.WCSend && wc.WRID == payload.Bye {
			return
		}
		if _, j := unwrid(wc.WRID); c.ah != nil && wc.Opcode == fabric.WCRecv && j < 2*c.buf.depth &&
			payload.Seq(c.recvBuf(j)) == payload.Bye {
			return
		}
	}
}

// sendBuf and recvBuf are the client's send and receive buffer j.
func (c *Conn) sendBuf(j int) []byte { return c.buf.mr.Buf()[c.buf.sendOff(j):][:c.msg] }
func (c *Conn) recvBuf(j int) []byte { return c.buf.mr.Buf()[c.buf.recvOff(j):][:c.msg] }

// attempt tracks the phases of one Connect for its record.
type attempt struct {
	rec   result.ClientRecord
	last  time.Time
	start time.Time
}

func (a *attempt) phase(name string) {
	now := time.Now()
	a.rec.PhasesUS[name] = now.Sub(a.last).Microseconds()
	a.last = now
}

// fail classifies err into the record. A context deadline is a timeout
// whatever the phase, with the phase named in the text.
func (a *attempt) fail(ctx context.Context, class string, err error) {
	if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		a.rec.Outcome = result.OutcomeTimeout
		a.rec.Error = fmt.Sprintf("deadline during %s: %v", class, err)
		return
	}
	a.rec.Outcome = class
	a.rec.Error = err.Error()
	if e := fabric.Errno(err); e != 0 {
		a.rec.Errno = fabric.ErrnoName(e)
	} else if e := errnoOf(err); e != 0 {
		a.rec.Errno = fabric.ErrnoName(e)
	} else if m := errnoText.FindStringSubmatch(a.rec.Error); m != nil {
		a.rec.Errno = m[1]
	}
}

var errnoText = regexp.MustCompile(`: (E[A-Z0-9]+) \(`)

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// Connect runs one client to its first verified round trips. On success
// the returned Conn is open; on failure it is nil and everything the
// attempt allocated is released.
func (d *Dialer) Connect(ctx context.Context, id, proc int) (*Conn, result.ClientRecord) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	now := time.Now()
	a := &attempt{start: now, last: now}
	a.rec = result.ClientRecord{ID: id, Proc: proc, PhasesUS: map[string]int64{}}
	c, err := d.connect(ctx, a)
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, a.rec
	}
	a.rec.Outcome = result.OutcomeOK
	a.rec.ConnectUS = time.Since(a.start).Microseconds()
	return c, a.rec
}

func (d *Dialer) connect(ctx context.Context, a *attempt) (*Conn, error) {
	c := &Conn{id: a.rec.ID, bufs: d.bufs, msg: d.cfg.MsgSize, groups: d.groups, wcs: make(chan fabric.WC, 2*d.wr+2)}
	// No keepalive from this end: Go's default probes every socket
	// after 15 s idle, and a held client's socket is idle for good; the
	// server probes (rarely) for the clients that vanish.
	nd := net.Dialer{LocalAddr: loopbackSource(d.cfg.Addr, a.rec.ID), KeepAlive: -1}
	raw, err := nd.DialContext(ctx, "tcp", d.cfg.Addr)
	if err != nil {
		a.fail(ctx, result.OutcomeTCPConnect, err)
		return nil, err
	}
	a.phase(result.PhaseTCP)
	tc := tls.Client(raw, d.cfg.TLS)
	c.tls = tc
	if err := tc.HandshakeContext(ctx); err != nil {
		a.fail(ctx, result.OutcomeTLS, err)
		return c, err
	}
	a.phase(result.PhaseTLS)
	a.rec.TLSResumed = tc.ConnectionState().DidResume
	if dl, ok := ctx.Deadline(); ok {
		tc.SetDeadline(dl)
	}
	// Cancelling ctx must unblock reads too.
	stop := context.AfterFunc(ctx, func() { tc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if d.cfg.Mux > 0 {
		return c, d.connectLogical(ctx, a, c, tc)
	}

	psn, err := randPSN()
	if err != nil {
		a.fail(ctx, result.OutcomeExchange, fmt.Errorf("generate PSN: %w", err))
		return c, err
	}
	a.rec.LocalPSN = psn
	a.phase(result.PhasePSN)

	size := d.cfg.MsgSize
	if c.group, err = d.groups.join(); err != nil {
		a.fail(ctx, result.OutcomeQPCreate, err)
		return c, err
	}
	if c.buf, err = d.bufs.get(); err != nil {
		a.fail(ctx, result.OutcomeQPCreate, err)
		return c, err
	}
	c.held = true
	typ := fabric.QPTypeRC
	var qkey uint32
	if d.cfg.UD {
		typ = fabric.QPTypeUD
		if qkey, err = randPSN(); err != nil {
			a.fail(ctx, result.OutcomeExchange, fmt.Errorf("generate Q_Key: %w", err))
			return c, err
		}
		qkey = max(qkey, 1) // 0 reads as no Q_Key in the exchange
	}
	c.qp, err = d.pd.CreateQP(fabric.QPInitAttr{Type: typ, SendCQ: c.group.cq, RecvCQ: c.group.cq,
		MaxSendWR: d.wr, MaxRecvWR: d.wr, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		a.fail(ctx, result.OutcomeQPCreate, err)
		return c, err
	}
	c.group.bind(c.qp.QPN(), c)
	a.rec.LocalQPN = c.qp.QPN()
	a.phase(result.PhaseQPCreate)
	if err := c.qp.ToInit(fabric.InitAttr{Port: d.port.Port, Access: fabric.AccessLocalWrite, QKey: qkey}); err != nil {
		a.fail(ctx, result.OutcomeInit, err)
		return c, err
	}
	if err := c.postRecv(0, 0, size); err != nil {
		a.fail(ctx, result.OutcomeInit, err)
		return c, err
	}
	a.phase(result.PhaseInit)

	hello := exchange.Msg{Type: exchange.Hello, QPN: c.qp.QPN(), PSN: psn,
		LID: d.port.LID, MTU: d.port.ActiveMTU, GID: d.port.GID, QKey: qkey}
	if err := exchange.Write(tc, hello); err != nil {
		a.fail(ctx, exchangeClass(err), fmt.Errorf("send hello: %w", err))
		return c, err
	}
	reply, err := exchange.Read(tc)
	if err != nil {
		a.fail(ctx, exchangeClass(err), fmt.Errorf("read reply: %w", err))
		return c, err
	}
	switch reply.Type {
	case exchange.Accept:
	case exchange.Detached:
		// The server closes its end now; so do we, without a
		// close_notify (see server.handle: nothing follows Detached).
		c.detached = true
		stop()
		raw.Close()
		c.tls = nil
	case exchange.Refuse:
		err := refusal(reply.Reason)
		a.fail(ctx, classOfRefusal(reply.Reason), err)
		return c, err
	default:
		err := fmt.Errorf("unexpected reply type %d", reply.Type)
		a.fail(ctx, result.OutcomeExchange, err)
		return c, err
	}
	a.rec.RemoteQPN, a.rec.RemotePSN = reply.QPN, reply.PSN
	c.remote, c.serverQPN = reply.Remote, reply.QPN
	a.phase(result.PhaseExchange)

	mtu := reply.MTU
	if d.port.ActiveMTU < mtu {
		mtu = d.port.ActiveMTU
	}
	rtr := server.RTR(d.port, reply, mtu)
	if d.cfg.UD {
		if reply.QKey == 0 {
			err := errors.New("the server's accept has no Q_Key: it serves RC QPs (--mode ud is the server's to choose)")
			a.fail(ctx, result.OutcomeExchange, err)
			return c, err
		}
		if size > mtu.Bytes() {
			err := fmt.Errorf("--msg-size %d is above the path MTU (%d bytes): a ud message is one packet", size, mtu.Bytes())
			a.fail(ctx, result.OutcomeExchange, err)
			return c, err
		}
		c.serverQKey = reply.QKey
		if c.ah, err = d.pd.CreateAH(fabric.AHAttr{DLID: reply.LID, DGID: reply.GID, GIDIndex: d.port.GIDIndex,
			HopLimit: server.QPHopLimit, Port: d.port.Port}); err != nil {
			// A resource, like the server's AH for this client: both
			// come from the device's AH pool, which rxe caps at max_ah.
			a.fail(ctx, result.OutcomeQPCreate, err)
			return c, err
		}
		rtr = fabric.RTRAttr{}
	} else if reply.QKey != 0 {
		err := errors.New("the server serves UD QPs (--mode ud): these clients need --mode ud too")
		a.fail(ctx, result.OutcomeExchange, err)
		return c, err
	}
	if err := c.qp.ToRTR(rtr); err != nil {
		a.fail(ctx, result.OutcomeRTR, err)
		return c, err
	}
	a.phase(result.PhaseRTR)
	if err := c.qp.ToRTS(server.RTS(psn)); err != nil {
		a.fail(ctx, result.OutcomeRTS, err)
		return c, err
	}
	c.rts = true
	a.phase(result.PhaseRTS)

	for i := 0; i < d.cfg.Rounds; i++ {
		t0 := time.Now()
		if err := c.roundTrip(ctx, uint64(i)+1, size); err != nil {
			a.fail(ctx, result.OutcomeMessage, fmt.Errorf("round trip %d: %w", i+1, err))
			if c.ah != nil && a.rec.Outcome == result.OutcomeTimeout {
				// Nothing retransmits a datagram: one that never came
				// back was lost, or its echo was.
				a.rec.Outcome = result.OutcomeLost
				a.rec.Error = fmt.Sprintf("round trip %d: no echo by the deadline: the datagram or its echo was lost", i+1)
			}
			return c, err
		}
		rtt := time.Since(t0)
		if i == 0 {
			a.phase(result.PhaseFirstRTT)
		}
		a.rec.RTTsUS = append(a.rec.RTTsUS, float64(rtt.Nanoseconds())/1e3)
	}
	return c, nil
}

// QPDepth is the client QP's send and receive queue depth, at least
// (Config.Depth may ask for more).
const QPDepth = 2

// roundTrip sends one self-checking payload and waits for its intact echo.
// The receive for it is already posted; the next one is posted before
// returning. Send and receive complete on the same CQ in either order.
func (c *Conn) roundTrip(ctx context.Context, seq uint64, size int) error {
	payload.Fill(c.sendBuf(0), seq, size)
	if err := c.postSend(seq, 0, size); err != nil {
		return err
	}
	var sent, got bool
	for !sent || !got {
		wc, err := c.await(ctx)
		if err != nil {
			return err
		}
		op := "send"
		if wc.Opcode == fabric.WCRecv {
			op = "recv"
		}
		if wc.Status != fabric.WCSuccess {
			return &fabric.WCError{Op: op, Status: wc.Status}
		}
		if wc.Opcode == fabric.WCRecv {
			got = true
			n, err := c.received(wc)
			if err != nil {
				return err
			}
			if n != size {
				return fmt.Errorf("echo of %d bytes, sent %d", n, size)
			}
			echo := c.recvBuf(0)[:size]
			s, err := payload.Check(echo)
			if err != nil {
				return err
			}
			// Message seq is payload.Fill(seq, size): one that checks
			// as seq at that length is it, byte for byte.
			if s != seq {
				return fmt.Errorf("echo of message %d does not match message %d", s, seq)
			}
		} else {
			sent = true
		}
	}
	return c.postRecv(0, 0, size)
}

// exchangeClass classifies a failed hello write or reply read. In TLS 1.3
// the server checks the client certificate after the client's handshake
// has completed, so a missing or unknown client certificate surfaces here,
// as the server's alert: that is a TLS failure, not an exchange one.
func exchangeClass(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" {
		return result.OutcomeTLS
	}
	var ae tls.AlertError
	if errors.As(err, &ae) {
		return result.OutcomeTLS
	}
	return result.OutcomeExchange
}

func randPSN() (uint32, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b[:]) & 0xffffff, nil
}

func refusal(reason string) error {
	if reason == exchange.ReasonAtCapacity {
		return errors.New("server refused: at capacity")
	}
	return fmt.Errorf("server: %s", reason)
}

// classOfRefusal maps the server's reason to an outcome: "at capacity",
// or the failing class the server put before its error text.
func classOfRefusal(reason string) string {
	if reason == exchange.ReasonAtCapacity {
		return result.OutcomeRefused
	}
	if class, _, ok := strings.Cut(reason, ": "); ok {
		for _, o := range result.Outcomes {
			if o == class {
				return class
			}
		}
	}
	return result.OutcomeExchange
}

// loopbackSource spreads clients of an IPv4 loopback server over the
// source addresses 127.0.0.1–127.0.0.250: one source address has only
// the ephemeral port range (about 28,000 ports) towards one server
// address, which would cap a point near 28k clients. Other servers dial
// from the kernel's choice (nil).
func loopbackSource(addr string, id int) net.Addr {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host).To4()
	if ip == nil || ip[0] != 127 {
		return nil
	}
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+id%250))}
}
