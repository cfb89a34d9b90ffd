package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Mux mode: up to Config.Mux logical clients share one RC QP. Each logical
// client is a client as in the other modes (its own TLS connection and
// exchange, its own admission against MaxClients, its hello refused if
// replayed), but its hello names the client QP that carries it, and its
// logical ID: the first hello for a client QP opens the server's QP
// towards it, the next ones join that QP and get the same accept. The QP
// holds what a per-client-mode client holds (1 QP + 2 CQ + 2 MR), sized
// for Mux·Depth messages, and one goroutine echoes it.
//
// Every message names its logical client (payload.MuxSeq) and the echo
// counts it for that client, which must be on the QP and must send its
// round trips in order. A QP is one RC connection, so its logical clients
// share its fate: a message that fails its check, names a logical client
// the QP does not carry, or comes out of order, or a failed completion,
// ends the QP and every logical client on it. The server counts that once
// as a "message" failure (of the logical client the message named, or of
// the QP) and each other logical client on it as "shared-fate", and
// closes their connections, so their generator sees them go. A logical
// client that stalls (sends nothing) holds only its own slot: the QP
// echoes its neighbours' messages as they come.
//
// The QP leaves with its last logical client.

// MaxMux bounds Config.Mux: a shared QP has Mux·Depth receives and sends
// posted, within what a device grants one QP.
const MaxMux = 1024

// muxKey names a client QP: the endpoint its logical clients' hellos
// share.
type muxKey struct {
	QPN, PSN uint32
	GID      fabric.GID
	LID      uint16
}

// muxQP is the server's QP towards one client QP, and the logical
// clients it carries.
type muxQP struct {
	key muxKey
	// ready is closed once the QP is set up: c and accept, or class and
	// err saying why there is none.
	ready  chan struct{}
	c      *conn
	accept exchange.Msg
	class  string
	err    error
	cancel context.CancelFunc
	// done is closed when the QP's echo has ended; cause is the failure
	// that ended it (nil: its last logical client left, or the server
	// stopped), culprit the logical client its failing message named (0:
	// none on the QP).
	done  chan struct{}
	cause error

	mu      sync.Mutex
	members map[uint32]*logical
	culprit uint32
	// gone: the QP is ending, and takes no more logical clients.
	gone bool
}

// logical is one logical client's account on its QP.
type logical struct {
	// next is the round trip its next message must be (from 1).
	next uint64
}

// serveLogical runs one admitted logical client of mux mode from its
// hello until it leaves or its QP ends: join (or open) its QP, accept,
// wait. It gives back the client's admission and hello when it returns.
func (s *Server) serveLogical(ctx context.Context, raw net.Conn, tc *tls.Conn, hello exchange.Msg, key helloKey) {
	held := true
	free := func() {
		if held {
			held = false
			s.releaseHello(key)
			s.active.Add(-1)
		}
	}
	defer free()
	// A refused logical client's slot is free before it hears so: its
	// generator may try the next one at once.
	refuse := func(class string, err error) {
		s.fail(class, err)
		free()
		exchange.Write(tc, exchange.Msg{Type: exchange.Refuse, Reason: class + ": " + err.Error()})
	}
	if hello.Logical == 0 {
		refuse(result.OutcomeExchange, errors.New("mux mode needs a logical client ID in the hello (from 1)"))
		return
	}
	m, class, err := s.joinMux(ctx, hello)
	if err != nil {
		refuse(class, err)
		return
	}
	accept := m.accept
	accept.Logical = hello.Logical
	if err := exchange.Write(tc, accept); err != nil {
		s.fail(result.OutcomeExchange, fmt.Errorf("write accept: %w", err))
		s.leaveMux(m, hello.Logical)
		return
	}
	tc.SetDeadline(time.Time{})
	s.connected()
	lctx, cancel := context.WithCancel(ctx)
	release := s.watchDeparture(raw, cancel)
	select {
	case <-lctx.Done():
	case <-m.done:
	}
	cancel()
	release()
	select {
	case <-m.done:
		m.mu.Lock()
		culprit := m.culprit
		m.mu.Unlock()
		if m.cause != nil && culprit != hello.Logical {
			s.fail(result.OutcomeSharedFate, fmt.Errorf("its QP ended with a failure of another logical client or of the QP: %v", m.cause))
		}
	default:
	}
	s.leaveMux(m, hello.Logical)
	free()
	// Counted last, so a client seen released has its slot free.
	s.mu.Lock()
	s.stats.Released++
	s.mu.Unlock()
}

// joinMux adds the logical client of hello to the QP towards its client
// QP, opening that QP if there is none. On failure it returns the
// outcome class to refuse the logical client with.
func (s *Server) joinMux(ctx context.Context, hello exchange.Msg) (*muxQP, string, error) {
	k := muxKey{QPN: hello.QPN, PSN: hello.PSN, GID: hello.GID, LID: hello.LID}
	s.mu.Lock()
	m := s.muxes[k]
	open := m == nil
	if open {
		m = &muxQP{key: k, ready: make(chan struct{}), done: make(chan struct{}), members: map[uint32]*logical{}}
		s.muxes[k] = m
	}
	s.mu.Unlock()
	if open {
		s.openMux(ctx, m, hello)
	} else {
		<-m.ready // setup is a bounded series of verbs calls
	}
	if m.c == nil {
		return nil, m.class, m.err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return nil, result.OutcomeExchange, fmt.Errorf("the QP of client QP %d has ended", k.QPN)
	}
	if len(m.members) >= s.cfg.Mux {
		return nil, result.OutcomeExchange, fmt.Errorf("client QP %d carries %d logical clients already (the server's --mux)", k.QPN, len(m.members))
	}
	m.members[hello.Logical] = &logical{next: 1}
	return m, "", nil
}

// openMux sets up m's QP from the hello that named its client QP first,
// and starts its echo.
func (s *Server) openMux(ctx context.Context, m *muxQP, hello exchange.Msg) {
	defer close(m.ready)
	c := &conn{s: s, slot: -1, remote: -1, mux: m}
	accept, class, err := c.setup(hello)
	if err != nil {
		c.release()
		m.class, m.err = class, err
		s.mu.Lock()
		delete(s.muxes, m.key)
		s.mu.Unlock()
		return
	}
	m.c, m.accept = c, accept
	ectx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	s.mu.Lock()
	s.muxQPs++
	s.stats.PeakQPs = max(s.stats.PeakQPs, s.muxQPs)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		m.run(ectx)
	}()
}

// run echoes m's QP until its context ends (its last logical client left,
// or the server stops) or a failure ends it, then releases it.
func (m *muxQP) run(ctx context.Context) {
	c := m.c
	s := c.s
	err := c.echo(ctx)
	m.mu.Lock()
	m.gone = true
	culprit := m.culprit
	m.mu.Unlock()
	if ctx.Err() == nil && err != nil {
		if culprit != 0 {
			err = fmt.Errorf("logical client %d: %w", culprit, err)
		} else {
			err = fmt.Errorf("shared QP %d: %w", c.qp.QPN(), err)
		}
		m.cause = err
		s.fail(result.OutcomeMessage, err)
	}
	s.mu.Lock()
	if s.muxes[m.key] == m {
		delete(s.muxes, m.key)
	}
	s.muxQPs--
	s.mu.Unlock()
	c.release()
	close(m.done)
}

// leaveMux takes logical client id off m; the last one to leave ends the
// QP and waits until it is released.
func (s *Server) leaveMux(m *muxQP, id uint32) {
	m.mu.Lock()
	delete(m.members, id)
	last := len(m.members) == 0 && !m.gone
	if last {
		m.gone = true
	}
	m.mu.Unlock()
	if last {
		m.cancel()
		<-m.done
	}
}

// echoed accounts message seq, just echoed, to its logical client: one
// on the QP, at the round trip it is due.
func (m *muxQP) echoed(seq uint64) error {
	id, n := payload.Logical(seq), seq&(1<<40-1)
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.members[id]
	if l == nil {
		return fmt.Errorf("message %#x names logical client %d, which this QP does not carry", seq, id)
	}
	if n != l.next {
		m.culprit = id
		return fmt.Errorf("message %d out of order (round trip %d is due)", n, l.next)
	}
	l.next++
	return nil
}

// blame records the logical client a message that failed its check
// names, if the QP carries it: its header may still say who sent it.
func (m *muxQP) blame(in []byte) {
	id := payload.Logical(payload.Seq(in))
	m.mu.Lock()
	if m.members[id] != nil {
		m.culprit = id
	}
	m.mu.Unlock()
}
