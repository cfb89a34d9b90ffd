package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server/hangup"
)

// admit reserves a client slot; false means the server is at capacity.
func (s *Server) admit() bool {
	for {
		n := s.active.Load()
		if n >= int64(s.cfg.MaxClients) {
			return false
		}
		if s.active.CompareAndSwap(n, n+1) {
			s.mu.Lock()
			if int(n+1) > s.stats.PeakActive {
				s.stats.PeakActive = int(n + 1)
			}
			s.mu.Unlock()
			return true
		}
	}
}

// helloKey is the endpoint a hello names.
type helloKey struct {
	QPN, PSN uint32
	GID      fabric.GID
	LID      uint16
	// Logical tells apart the logical clients sharing one QP (mux mode).
	Logical uint32
}

// claimHello records key; false means a client with the same endpoint is
// connected (or being set up), so this hello is a replay.
func (s *Server) claimHello(k helloKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.hellos[k]; dup {
		return false
	}
	s.hellos[k] = struct{}{}
	return true
}

// releaseHello forgets a hello whose client was refused at capacity,
// failed setup or left: memory for hellos is bounded by the clients
// admitted at once.
func (s *Server) releaseHello(k helloKey) {
	s.mu.Lock()
	delete(s.hellos, k)
	s.mu.Unlock()
}

// connected counts a client connected, and the fabric objects in use
// then.
func (s *Server) connected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Connected++
	if s.cfg.InUse != nil {
		if s.stats.Resources == nil {
			s.stats.Resources = map[string]int{}
		}
		for k, v := range s.cfg.InUse() {
			s.stats.Resources[k] = max(s.stats.Resources[k], v)
		}
	}
}

func (s *Server) handle(ctx context.Context, raw net.Conn) {
	adopted := false
	defer func() {
		if !adopted {
			raw.Close()
		}
	}()
	tc := tls.Server(raw, s.cfg.TLS)
	hctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		s.fail(result.OutcomeTLS, err)
		return
	}
	tc.SetReadDeadline(time.Now().Add(s.cfg.ExchangeTimeout))
	hello, err := exchange.Read(tc)
	if err != nil {
		s.fail(result.OutcomeExchange, fmt.Errorf("read hello: %w", err))
		return
	}
	if hello.Type != exchange.Hello {
		s.fail(result.OutcomeExchange, fmt.Errorf("expected hello, got message type %d", hello.Type))
		return
	}
	tc.SetWriteDeadline(time.Now().Add(s.cfg.ExchangeTimeout))
	if hello.Logical != 0 && s.cfg.Mode != ModeMux {
		err := fmt.Errorf("a hello of logical client %d: logical clients share a QP only with a server in mux mode (this one is %s)", hello.Logical, s.cfg.Mode)
		s.fail(result.OutcomeExchange, err)
		exchange.Write(tc, exchange.Msg{Type: exchange.Refuse, Reason: result.OutcomeExchange + ": " + err.Error()})
		return
	}
	key := helloKey{QPN: hello.QPN, PSN: hello.PSN, GID: hello.GID, LID: hello.LID, Logical: hello.Logical}
	if !s.claimHello(key) {
		s.fail(result.OutcomeExchange, errors.New(exchange.ReasonReplayed))
		exchange.Write(tc, exchange.Msg{Type: exchange.Refuse, Reason: exchange.ReasonReplayed})
		return
	}
	if !s.admit() {
		s.releaseHello(key)
		s.mu.Lock()
		s.stats.Refused++
		s.mu.Unlock()
		exchange.Write(tc, exchange.Msg{Type: exchange.Refuse, Reason: exchange.ReasonAtCapacity})
		return
	}
	if s.cfg.Mode == ModeMux {
		s.serveLogical(ctx, raw, tc, hello, key)
		return
	}

	// From here on c.release gives back the admission and the hello with
	// the rest.
	c := &conn{s: s, slot: -1, remote: -1, hello: key}
	defer func() {
		if !adopted {
			c.release()
		}
	}()
	accept, class, err := c.setup(hello)
	if err != nil {
		s.fail(class, err)
		// The class prefix lets the client classify the server's failure.
		exchange.Write(tc, exchange.Msg{Type: exchange.Refuse, Reason: class + ": " + err.Error()})
		return
	}
	if err := exchange.Write(tc, accept); err != nil {
		s.fail(result.OutcomeExchange, fmt.Errorf("write accept: %w", err))
		return
	}
	tc.SetDeadline(time.Time{})
	if s.cfg.Detach {
		// The client was told (Detached); the connection ends here and
		// the client's goodbye over its QP says when it leaves. The socket
		// is closed without a TLS close_notify: Detached is the protocol's
		// last message, complete and authenticated, so the alert would say
		// nothing new, and it was half of what the close cost (a record
		// sealed and written per client; ramp --detach profiles on rxe0).
		raw.Close()
	}
	s.connected()

	// The connection lives as long as the client: its end is the signal to
	// release the client's QP. Nothing travels over TLS after the
	// exchange, so the server watches the raw socket and lets the TLS state
	// (record buffers, handshake leftovers: most of a connection's memory)
	// be collected: any byte (the client's close_notify, or stray data) or
	// EOF/reset means the client is gone.
	tc = nil
	if s.shared != nil && s.shared.events {
		// The routers echo; the watcher, a goodbye or shutdown releases.
		if s.cfg.Detach {
			adopted = s.adopt(c, nil)
		} else {
			adopted = s.adopt(c, raw)
		}
		return
	}
	cctx, ccancel := context.WithCancel(ctx)
	release := func() {}
	if !s.cfg.Detach {
		release = s.watchDeparture(raw, ccancel)
	}
	err = c.echo(cctx)
	// Before ccancel: a done cctx means the client left (or the server is
	// stopping) and that is what ended the echo, not a failure.
	departed := cctx.Err() != nil
	if departed && s.cfg.Detach && !errors.Is(err, errBye) && c.saidGoodbye() {
		err = errBye
	}
	ccancel()
	release()
	if errors.Is(err, errBye) || !departed {
		s.ended(err)
	}
}

// watchDeparture calls gone when the client behind raw leaves (EOF,
// reset, or any byte: it has nothing more to say after the exchange).
// release ends the watch and closes raw.
func (s *Server) watchDeparture(raw net.Conn, gone func()) (release func()) {
	if hc, ok := raw.(hangup.Conn); ok {
		if stop, err := s.hangups.Watch(hc, gone); err == nil {
			return func() { stop(); raw.Close() }
		}
	}
	// Not a socket (or the watcher refused it): a goroutine reads instead.
	left := make(chan struct{})
	go func() {
		defer close(left)
		var b [1]byte
		raw.Read(b[:])
		gone()
	}()
	return func() { raw.Close(); <-left }
}
