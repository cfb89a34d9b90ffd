package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// harness is an in-process mutual-TLS server on its own simulated device
// and a dialer of legitimate clients on another.
type harness struct {
	t   *testing.T
	srv *server.Server
	// started is when srv was created.
	started time.Time
	// inUse counts the fabric objects the test watches: the server's
	// simulated device, or the whole RDMA device under the verbs tag.
	inUse    func() map[string]int
	baseline map[string]int
	// idle is what inUse reads once the server has stopped (the clients'
	// PD may still be held on a shared device).
	idle map[string]int
	// clientHeld is what n connected clients hold on the counted device
	// (nothing when the clients have a device of their own).
	clientHeld func(n int) map[string]int
	rounds     int
	mode       string
	depth      int
	busy       time.Duration   // the server's and the dialer's BusyPoll
	mux        int             // the dialer's Config.Mux (mux mode)
	size       int             // the message size
	server     fabric.Provider // the server's device
	addr       string
	serverPair certs.Pair
	clientPair certs.Pair
	dialer     *client.Dialer
	cdev       fabric.Device // the legitimate clients' device
	cancel     context.CancelFunc
	served     chan error
}

var (
	// guard bounds every blocking wait of a test so that a bug fails the
	// test instead of hanging it. It never orders events and a passing
	// test never waits it out, so it is generous: on the loaded 2-core
	// CI host a cycle of 200 clients has outlasted the 5 s it once was.
	guard = 40 * time.Second
	// serverTimeout is the server's handshake and exchange timeout unless
	// a test sets its own: longer than any wait of a test, so no deadline
	// drops a peer while a test watches. A peer a test sees dropped was
	// dropped for what it sent, and an honest client is never dropped
	// because the machine was slow.
	serverTimeout = 2 * guard
	// stallTimeout is the short deadline TestStalledPeersTimeOut gives
	// the server; only peers that stall meet it.
	stallTimeout = 300 * time.Millisecond
)

func newHarness(t *testing.T, maxClients int) *harness {
	t.Helper()
	return newHarnessWith(t, maxClients, serverTimeout, serverTimeout)
}

// newHarnessWith sets the server's handshake and exchange timeouts.
func newHarnessWith(t *testing.T, maxClients int, handshake, exchange time.Duration) *harness {
	t.Helper()
	return newHarnessOpts(t, maxClients, harnessOpts{handshake: handshake, exchange: exchange})
}

// harnessOpts are the harness's settings beyond the capacity; zero fields
// take the defaults.
type harnessOpts struct {
	mode string
	// handshake and exchange are the server's timeouts (serverTimeout).
	handshake, exchange time.Duration
	// simCaps bound the server's device when the fabric is sim (a real
	// device has its own).
	simCaps fabric.Caps
	rounds  int // verified round trips per client (default 2)
	// srqDepth is the server's Config.SRQDepth (srq mode; 0 = default).
	srqDepth int
	// detach is the server's Config.Detach.
	detach bool
	// depth is the server's and the dialer's Config.Depth; remote the
	// server's Config.Remote.
	depth  int
	remote bool
	// simDelay and simDelayFrom are the server's simulated device's
	// service delay (sim.Options); a real device ignores them.
	simDelay     time.Duration
	simDelayFrom int
	// busy is the server's and the dialer's Config.BusyPoll.
	busy time.Duration
	// size is the message size (0: 256 bytes).
	size int
	// tickets lets clients resume TLS sessions (serve --tls-tickets,
	// ramp --tls-resume): a cheaper connect, for tests of many clients.
	tickets bool
	// mux is the server's and the dialer's Config.Mux (mux mode).
	mux int
}

func newHarnessOpts(t *testing.T, maxClients int, o harnessOpts) *harness {
	t.Helper()
	if o.handshake == 0 {
		o.handshake = serverTimeout
	}
	if o.exchange == 0 {
		o.exchange = serverTimeout
	}
	if o.rounds == 0 {
		o.rounds = 2
	}
	if o.size == 0 {
		o.size = 256
	}
	handshake, exchange := o.handshake, o.exchange
	fab := testFabric(t, sim.Options{Caps: o.simCaps, ServiceDelay: o.simDelay, ServiceDelayFrom: o.simDelayFrom})
	h := &harness{t: t, inUse: fab.inUse, served: make(chan error, 1), clientHeld: fab.clientHeld, rounds: o.rounds, mode: o.mode,
		depth: o.depth, busy: o.busy, size: o.size, server: fab.server}
	if o.mode == server.ModeMux {
		h.mux = max(o.mux, 1)
	}
	pre := h.inUse()
	var err error
	if h.serverPair, err = certs.SelfSigned(); err != nil {
		t.Fatal(err)
	}
	if h.clientPair, err = certs.SelfSignedClient(); err != nil {
		t.Fatal(err)
	}
	stls, err := h.serverPair.Server(h.clientPair.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	stls.SessionTicketsDisabled = !o.tickets
	setKex(t, stls)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.started = time.Now()
	h.srv, err = server.New(ctx, server.Config{Listen: "127.0.0.1:0", MaxClients: maxClients, Mode: o.mode,
		TLS: stls, Provider: fab.server, Device: fabric.DeviceConfig{GIDIndex: -1}, MsgSize: o.size,
		HandshakeTimeout: handshake, ExchangeTimeout: exchange, SRQDepth: o.srqDepth, Detach: o.detach,
		Depth: o.depth, Remote: o.remote, BusyPoll: o.busy, Mux: o.mux})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.addr = h.srv.Addr().String()
	go func() { h.served <- h.srv.Serve(ctx) }()

	cdev, err := fab.client.Open(ctx, fabric.DeviceConfig{GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	h.cdev = cdev
	ctls := h.clientTLS(true)
	if o.tickets {
		ctls.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	}
	h.dialer = h.newDialer(cdev, ctls)
	h.baseline = h.inUse()
	h.idle = map[string]int{}
	for k, v := range pre {
		h.idle[k] = v + fab.clientIdle[k]
	}
	t.Cleanup(func() {
		h.stop()
		h.dialer.Close()
		cdev.Close()
	})
	return h
}

func (h *harness) newDialer(dev fabric.Device, conf *tls.Config) *client.Dialer {
	h.t.Helper()
	d, err := client.NewDialer(dev, client.Config{Addr: h.addr, TLS: conf, Rounds: h.rounds, MsgSize: h.size, Timeout: guard, Depth: h.depth, BusyPoll: h.busy, Mux: h.mux,
		UD: h.mode == server.ModeUD})
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// clientTLS pins the server and, with withCert, presents the authorised
// client certificate.
func (h *harness) clientTLS(withCert bool) *tls.Config {
	h.t.Helper()
	var conf *tls.Config
	var err error
	if withCert {
		conf, err = certs.Client(h.serverPair.CertPEM, h.clientPair)
	} else {
		conf, err = certs.Client(h.serverPair.CertPEM)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	setKex(h.t, conf)
	return conf
}

// setKex gives conf the tool's default key exchange (app.DefaultTLSKex,
// X25519), as its server and generators have: Go's own default, the
// hybrid with ML-KEM768, cost a third of the CPU of the tests of many
// clients, and what the server keeps of a client does not depend on it.
func setKex(t *testing.T, conf *tls.Config) {
	t.Helper()
	if err := certs.SetKeyExchange(conf, certs.KexX25519); err != nil {
		t.Fatal(err)
	}
}

// stop ends the server and waits until Serve has released everything.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.served:
		if err != nil {
			h.t.Errorf("Serve: %v", err)
		}
	case <-time.After(guard):
		h.t.Error("server did not stop")
	}
}

// dialTLS completes a mutual-TLS handshake as an authorised client.
func (h *harness) dialTLS() *tls.Conn {
	h.t.Helper()
	raw, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	tc := tls.Client(raw, h.clientTLS(true))
	tc.SetDeadline(time.Now().Add(guard))
	if err := tc.Handshake(); err != nil {
		tc.Close()
		h.t.Fatalf("handshake: %v", err)
	}
	return tc
}

// hello is an endpoint a hostile peer might claim: valid fields and a
// non-zero LID, so the server takes it through RTS.
func hello(qpn, psn uint32) exchange.Msg {
	return exchange.Msg{Type: exchange.Hello, QPN: qpn, PSN: psn, LID: 1, MTU: fabric.MTU1024,
		GID: fabric.GID{10: 0xff, 11: 0xff, 12: 127, 15: 1}}
}

// sendHello sends m on a fresh authorised connection and returns the reply
// and the still-open connection.
func (h *harness) sendHello(m exchange.Msg) (exchange.Msg, *tls.Conn) {
	h.t.Helper()
	tc := h.dialTLS()
	if err := exchange.Write(tc, m); err != nil {
		h.t.Fatalf("write hello: %v", err)
	}
	reply, err := exchange.Read(tc)
	if err != nil {
		h.t.Fatalf("read reply: %v", err)
	}
	return reply, tc
}

// awaitClose reads from c until the server closes it; a reply (any byte)
// is an error unless allowed, for peers that must get none.
func awaitClose(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(guard))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return b, errors.New("server kept the connection open")
	}
	return b, nil
}

// handlersRunning counts the connection handlers still running: the
// goroutines Serve starts, one per accepted connection (it starts no
// others), found in a dump of every goroutine's stack.
func handlersRunning() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return bytes.Count(buf, []byte("created by github.com/rdmaprobe/rdmaprobe/server.(*Server).Serve in goroutine "))
}

func (h *harness) inUseIsBaseline() bool {
	return reflect.DeepEqual(h.inUse(), h.baseline)
}

// connectOK runs one legitimate client and fails the test unless it is ok.
func (h *harness) connectOK(ctx context.Context, id int) *client.Conn {
	h.t.Helper()
	c, rec := h.dialer.Connect(ctx, id, 0)
	if c == nil {
		h.t.Fatalf("legitimate client %d: %s: %s", id, rec.Outcome, rec.Error)
	}
	return c
}

// fabricUnderTest is where the harness's server and clients get their
// devices, and how the objects in use are counted.
type fabricUnderTest struct {
	server, client fabric.Provider
	inUse          func() map[string]int
	clientIdle     map[string]int
	clientHeld     func(n int) map[string]int
}
