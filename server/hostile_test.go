package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// hostileFrames are exchange frames (length prefix included) an
// authenticated but broken or malicious peer might send instead of a
// hello. The server must drop each without a reply and without touching
// the device.
func hostileFrames(t *testing.T) map[string][]byte {
	good, err := exchange.Encode(hello(0x99, 1))
	if err != nil {
		t.Fatal(err)
	}
	patch := func(off int, b ...byte) []byte {
		f := bytes.Clone(good)
		copy(f[off:], b)
		return f
	}
	accept := patch(3, byte(exchange.Accept))
	oversized := make([]byte, 2+exchange.MaxBody+1)
	binary.BigEndian.PutUint16(oversized, exchange.MaxBody+1)
	return map[string][]byte{
		"empty body":            {0, 0},
		"short":                 {0, 3, exchange.Version, byte(exchange.Hello), 0},
		"oversized header":      {0xff, 0xff},
		"oversized":             oversized,
		"truncated":             good[:12], // then stalls (stallsMidFrame)
		"reason length lies":    patch(2+33, 0x00, 0x07),
		"wrong version":         patch(2, exchange.Version+1),
		"unknown type":          patch(3, 9),
		"accept as hello":       accept,
		"zero QPN":              patch(4, 0, 0, 0, 0),
		"QPN wider than 24 bit": patch(4, 0x01, 0, 0, 0x99),
		"PSN wider than 24 bit": patch(8, 0xff, 0, 0, 1),
		"invalid MTU":           patch(2+12, 9),
		"zero MTU":              patch(2+12, 0),
	}
}

// hostile is one misbehaving peer; run returns an error when the server
// did not drop it as it should. A peer that stalls stops before what it
// sends is complete, so only a deadline or its own departure can end it:
// it leaves when release is closed, or with a nil release waits for the
// server's deadline (TestStalledPeersTimeOut).
type hostile struct {
	name   string
	class  string // the server's failure class for it
	stalls bool
	run    func(h *harness, release <-chan struct{}) error
}

func rawDial(h *harness) (net.Conn, error) { return net.Dial("tcp", h.addr) }

// expectDropped sends b on a raw TCP connection, leaves when release is
// closed (see leaveOn), and waits for the server to close it.
func expectDropped(h *harness, b []byte, release <-chan struct{}) error {
	c, err := rawDial(h)
	if err != nil {
		return err
	}
	defer c.Close()
	if len(b) > 0 {
		if _, err := c.Write(b); err != nil {
			return err
		}
	}
	if err := leaveOn(c, release); err != nil {
		return err
	}
	_, err = awaitClose(c)
	return err
}

// leaveOn half-closes c once release is closed, as a peer that gives up
// would (a FIN, or TLS's close_notify); the peer can still read whether
// the server replied. A nil release means never.
func leaveOn(c net.Conn, release <-chan struct{}) error {
	if release == nil {
		return nil
	}
	<-release
	switch c := c.(type) {
	case *tls.Conn:
		return c.CloseWrite()
	case *net.TCPConn:
		return c.CloseWrite()
	}
	return fmt.Errorf("cannot half-close a %T", c)
}

// stallsMidFrame tells whether frame f promises a body longer than it
// carries (and no longer than the server accepts), so the server waits
// for the rest.
func stallsMidFrame(f []byte) bool {
	if len(f) < 2 {
		return true
	}
	n := int(binary.BigEndian.Uint16(f))
	return n <= exchange.MaxBody && len(f)-2 < n
}

func hostiles(t *testing.T) []hostile {
	garbage := make([]byte, 700)
	rand.Read(garbage)
	hs := []hostile{
		{"raw TCP garbage", result.OutcomeTLS, false, func(h *harness, _ <-chan struct{}) error {
			return expectDropped(h, garbage, nil)
		}},
		{"plain HTTP request", result.OutcomeTLS, false, func(h *harness, _ <-chan struct{}) error {
			return expectDropped(h, []byte("GET / HTTP/1.1\r\nHost: rdmaprobe\r\n\r\n"), nil)
		}},
		{"stalled mid-handshake", result.OutcomeTLS, true, func(h *harness, release <-chan struct{}) error {
			// The first bytes of a ClientHello record, then nothing.
			return expectDropped(h, []byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01}, release)
		}},
		{"silent TCP", result.OutcomeTLS, true, func(h *harness, release <-chan struct{}) error {
			return expectDropped(h, nil, release)
		}},
		{"TLS without a client certificate", result.OutcomeTLS, false, func(h *harness, _ <-chan struct{}) error {
			return noClientCert(h, nil)
		}},
		{"stalled after the handshake", result.OutcomeExchange, true, func(h *harness, release <-chan struct{}) error {
			// One byte of the length prefix, then nothing (slowloris).
			return sendTLS(h, []byte{0}, release)
		}},
	}
	for name, f := range hostileFrames(t) {
		hs = append(hs, hostile{"frame: " + name, result.OutcomeExchange, stallsMidFrame(f),
			func(h *harness, release <-chan struct{}) error { return sendTLS(h, f, release) }})
	}
	return hs
}

// sendTLS sends b after a mutual-TLS handshake as an authorised client,
// leaves when release is closed (see leaveOn), and expects the server to
// close the connection without a reply.
func sendTLS(h *harness, b []byte, release <-chan struct{}) error {
	tc, err := dialTLS(h)
	if err != nil {
		return err
	}
	defer tc.Close()
	if _, err := tc.Write(b); err != nil {
		return err
	}
	if err := leaveOn(tc, release); err != nil {
		return err
	}
	return expectNoReply(tc)
}

// dialTLS is harness.dialTLS returning its error, for use off the test
// goroutine.
func dialTLS(h *harness) (*tls.Conn, error) {
	raw, err := rawDial(h)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, h.clientTLS(true))
	if err := tc.Handshake(); err != nil {
		tc.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	return tc, nil
}

func expectNoReply(tc *tls.Conn) error {
	b, err := awaitClose(tc)
	if err != nil {
		return err
	}
	if len(b) > 0 {
		return fmt.Errorf("server replied %q", b)
	}
	return nil
}

// noClientCert completes the client side of a TLS 1.3 handshake without a
// client certificate and expects the server's alert on the first read.
// check, if set, runs while the connection is still open.
func noClientCert(h *harness, check func()) error {
	raw, err := rawDial(h)
	if err != nil {
		return err
	}
	tc := tls.Client(raw, h.clientTLS(false))
	defer tc.Close()
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("client side of the handshake: %w", err)
	}
	_, err = tc.Read(make([]byte, 1))
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "remote error" {
		return fmt.Errorf("read after handshake: %v, want the server's alert", err)
	}
	if check != nil {
		check()
	}
	return nil
}

// TestHostilePeers runs every kind of hostile peer at the server while
// legitimate clients connect, and checks that the server keeps serving,
// every legitimate client succeeds, each hostile peer is dropped without
// a reply and counted in its class, and nothing leaks. The server's
// deadlines outlast the test's waits (serverTimeout): peers that stall
// leave by themselves once the rest is done, so every drop and every
// class here follows from what the peer did, not from how fast the
// machine was. TestStalledPeersTimeOut tests the deadlines.
func TestHostilePeers(t *testing.T) {
	const maxClients, legit = 16, 12
	h := newHarness(t, maxClients)
	ctx := context.Background()

	t.Run("unauthenticated peers create nothing", func(t *testing.T) {
		// Peers held open while the server is done with them: the device
		// counts must not move.
		if err := noClientCert(h, func() {
			if !h.inUseIsBaseline() {
				t.Errorf("in use %v with an unauthenticated client connected, baseline %v", h.inUse(), h.baseline)
			}
		}); err != nil {
			t.Fatal(err)
		}
		before := h.srv.Stats().Accepted
		var held []net.Conn
		for i := 0; i < 3; i++ {
			c, err := rawDial(h)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			held = append(held, c)
		}
		tc, err := dialTLS(h)
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		held = append(held, tc)
		eventually.True(t, guard, "the server accepted the stalled peers", func() bool { return h.srv.Stats().Accepted >= before+4 })
		if !h.inUseIsBaseline() {
			t.Errorf("in use %v with stalled peers connected, baseline %v", h.inUse(), h.baseline)
		}
		// They give up: three during the handshake, one before its hello.
		left := make(chan struct{})
		close(left)
		for _, c := range held {
			if err := leaveOn(c, left); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range held[:3] {
			if _, err := awaitClose(c); err != nil {
				t.Error(err)
			}
		}
		if err := expectNoReply(tc); err != nil {
			t.Error(err)
		}

		// The client package classifies the missing certificate as tls.
		// Its dialer's own PD (on a shared device) goes before the count.
		d := h.newDialer(h.cdev, h.clientTLS(false))
		c, rec := d.Connect(ctx, 0, 0)
		d.Close()
		if c != nil {
			c.Close()
			t.Fatal("client without a certificate connected")
		}
		if rec.Outcome != result.OutcomeTLS {
			t.Errorf("client without a certificate: outcome %q (%s), want %q", rec.Outcome, rec.Error, result.OutcomeTLS)
		}
		if !h.inUseIsBaseline() {
			t.Errorf("in use %v after unauthenticated peers, baseline %v", h.inUse(), h.baseline)
		}
		// A TLS 1.3 client reads the server's alert before the server has
		// counted its failure: wait for the count so the next phase starts
		// from settled stats.
		eventually.True(t, guard, "the server counted the failures", func() bool {
			st := h.srv.Stats()
			return st.Failures[result.OutcomeTLS] == 5 && st.Failures[result.OutcomeExchange] == 1
		})
	})

	t.Run("concurrent", func(t *testing.T) {
		start := h.srv.Stats()
		var mu sync.Mutex
		var errs []error
		report := func(name string, err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		}
		launch := func(wg *sync.WaitGroup, name string, run func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				report(name, run())
			}()
		}
		hs := hostiles(t)
		want := map[string]int{}

		// First the peers that stall, every kind twice, and a flood of
		// connections beyond MaxClients that never speak: held open
		// until the rest is done, so everyone else is served past them.
		release := make(chan struct{})
		var stalled sync.WaitGroup
		held := 0
		for _, x := range hs {
			if !x.stalls {
				continue
			}
			for i := 0; i < 2; i++ {
				launch(&stalled, x.name, func() error { return x.run(h, release) })
				want[x.class]++
				held++
			}
		}
		flood := 3 * maxClients
		for i := 0; i < flood; i++ {
			launch(&stalled, "flood", func() error { return expectDropped(h, nil, release) })
		}
		want[result.OutcomeTLS] += flood
		held += flood
		if !eventually.Within(guard, func() bool { return h.srv.Stats().Accepted-start.Accepted >= held }) {
			close(release)
			stalled.Wait()
			t.Fatalf("the server accepted %d of %d stalled peers (errors %v)", h.srv.Stats().Accepted-start.Accepted, held, errs)
		}

		// Then legitimate clients, all at once, every other hostile peer
		// twice, and a replayed hello: the original is accepted and kept,
		// the copy refused.
		var rest sync.WaitGroup
		var recs []result.ClientRecord
		var conns []*client.Conn
		rest.Add(1)
		go func() {
			defer rest.Done()
			recs, conns, _ = client.Run(ctx, h.dialer, client.Load{N: legit}, nil)
		}()
		for _, x := range hs {
			if x.stalls {
				continue
			}
			for i := 0; i < 2; i++ {
				launch(&rest, x.name, func() error { return x.run(h, nil) })
				want[x.class]++
			}
		}
		var original net.Conn
		launch(&rest, "replay", func() error {
			m := hello(0x5151, 0x2a)
			tc, err := dialTLS(h)
			if err != nil {
				return err
			}
			original = tc
			if err := exchange.Write(tc, m); err != nil {
				return err
			}
			if r, err := exchange.Read(tc); err != nil || r.Type != exchange.Accept {
				return fmt.Errorf("original hello: %+v, %v", r, err)
			}
			tc2, err := dialTLS(h)
			if err != nil {
				return err
			}
			defer tc2.Close()
			if err := exchange.Write(tc2, m); err != nil {
				return err
			}
			if r, err := exchange.Read(tc2); err != nil || r.Type != exchange.Refuse || r.Reason != exchange.ReasonReplayed {
				return fmt.Errorf("replayed hello: %+v, %v", r, err)
			}
			return nil
		})
		want[result.OutcomeExchange]++
		rest.Wait()
		close(release)
		stalled.Wait()
		for _, err := range errs {
			t.Error(err)
		}

		ok := 0
		for _, r := range recs {
			if r.Outcome == result.OutcomeOK {
				ok++
			} else {
				t.Errorf("legitimate client %d: %s: %s", r.ID, r.Outcome, r.Error)
			}
		}
		if ok != legit {
			t.Errorf("%d/%d legitimate clients ok", ok, legit)
		}
		client.CloseAll(conns)
		if original != nil {
			original.Close()
		}

		counted := func(st result.ServerStats) bool {
			for class, n := range want {
				if st.Failures[class]-start.Failures[class] != n {
					return false
				}
			}
			return true
		}
		eventually.True(t, guard, "every admitted client is released", func() bool {
			st := h.srv.Stats()
			return st.Released == st.Connected && h.inUseIsBaseline()
		})
		eventually.Within(guard, func() bool { return counted(h.srv.Stats()) })
		st := h.srv.Stats()
		for class, n := range want {
			if got := st.Failures[class] - start.Failures[class]; got != n {
				t.Errorf("server counted %d %s failures, want %d (failures %v)", got, class, n, st.Failures)
			}
		}
		if got := st.Connected - start.Connected; got != legit+1 {
			t.Errorf("server connected %d clients, want %d", got, legit+1)
		}
		if st.Refused != start.Refused {
			t.Errorf("server refused %d at capacity: hostile peers took slots", st.Refused-start.Refused)
		}
	})

	t.Run("still serves", func(t *testing.T) {
		recs, conns, _ := client.Run(ctx, h.dialer, client.Load{N: maxClients}, nil)
		if len(conns) != maxClients {
			t.Errorf("%d/%d clients connected after the hostile peers", len(conns), maxClients)
			for _, r := range recs {
				if r.Outcome != result.OutcomeOK {
					t.Errorf("client %d: %s: %s", r.ID, r.Outcome, r.Error)
				}
			}
		}
		// Client MaxClients+1 is refused at capacity, not failed.
		c, rec := h.dialer.Connect(ctx, maxClients, 0)
		if c != nil {
			c.Close()
			t.Error("client beyond MaxClients connected")
		} else if rec.Outcome != result.OutcomeRefused {
			t.Errorf("client beyond MaxClients: %s: %s", rec.Outcome, rec.Error)
		}
		client.CloseAll(conns)
		eventually.True(t, guard, "every client is released", func() bool {
			st := h.srv.Stats()
			return st.Released == st.Connected && h.inUseIsBaseline()
		})
	})

	h.stop()
	st := h.srv.Stats()
	if st.Released != st.Connected {
		t.Errorf("after shutdown released %d of %d connected", st.Released, st.Connected)
	}
	if got := h.inUse(); !reflect.DeepEqual(got, h.idle) {
		t.Errorf("after shutdown the device holds %v, want %v", got, h.idle)
	}
}

// A peer that stalls is dropped at the server's deadline, with no reply,
// nothing created and its class counted: one that stops during the TLS
// handshake at the handshake timeout (tls), one that stops before its
// hello is complete at the exchange timeout (exchange). Each server has
// that one deadline short and the other longer than the test waits, so
// which deadline drops a peer follows from what the peer did, never from
// how long this machine took over a handshake.
func TestStalledPeersTimeOut(t *testing.T) {
	for _, tt := range []struct {
		class               string
		handshake, exchange time.Duration
		deadline            string // what the server's error says
	}{
		{result.OutcomeTLS, stallTimeout, serverTimeout, context.DeadlineExceeded.Error()},
		{result.OutcomeExchange, serverTimeout, stallTimeout, "i/o timeout"},
	} {
		t.Run(tt.class, func(t *testing.T) {
			h := newHarnessWith(t, 4, tt.handshake, tt.exchange)
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			n := 0
			for _, x := range hostiles(t) {
				if !x.stalls || x.class != tt.class {
					continue
				}
				n++
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := x.run(h, nil); err != nil {
						errs <- fmt.Errorf("%s: %w", x.name, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if n < 2 {
				t.Fatalf("%d stalling %s peers, want several", n, tt.class)
			}
			eventually.True(t, guard, "the server counted every stalled peer", func() bool {
				return h.srv.Stats().Failures[tt.class] == n
			})
			st := h.srv.Stats()
			if total := sumValues(st.Failures); total != n {
				t.Errorf("failures %v, want %d %s only", st.Failures, n, tt.class)
			}
			for e, k := range st.Errors {
				if !strings.Contains(e, tt.deadline) {
					t.Errorf("a stalled peer dropped with %q (%d times), want the %s deadline (%q)", e, k, tt.class, tt.deadline)
				}
			}
			if !h.inUseIsBaseline() {
				t.Errorf("in use %v after stalled peers, baseline %v", h.inUse(), h.baseline)
			}
		})
	}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
