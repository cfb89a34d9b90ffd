package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// Options shared by the measurements.
type Options struct {
	// Warmup operations run and are released before timing starts, so
	// one-time costs (first dial of a sim wire, page faults of a fresh
	// heap) do not land on the first timed operation.
	Warmup int
	// MsgSize is the MR size and full-connect payload, bytes.
	MsgSize int
	// Timeout bounds each operation.
	Timeout time.Duration
	// Device is opened by FullConnect for its server and its client.
	Device fabric.DeviceConfig
	// Certs (the server's) and ClientCerts are used by TLSHandshake and
	// FullConnect, with mutual TLS as rdmaprobe runs it; zero generates
	// self-signed pairs, as the probe commands do.
	Certs       certs.Pair
	ClientCerts certs.Pair
	// Kex is the handshake's key exchange (certs.KexHybrid, KexX25519;
	// empty = hybrid, Go's default).
	Kex string
	// Passes is how many times Suite takes each measurement, in turns;
	// the passes are pooled (0 or 1: once).
	Passes int
}

func (o Options) withDefaults() (Options, error) {
	if o.MsgSize <= 0 {
		o.MsgSize = 4096
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	if len(o.Certs.CertPEM) == 0 {
		p, err := certs.SelfSigned()
		if err != nil {
			return o, fmt.Errorf("generate certificate: %w", err)
		}
		o.Certs = p
	}
	if len(o.ClientCerts.CertPEM) == 0 {
		p, err := certs.SelfSignedClient()
		if err != nil {
			return o, fmt.Errorf("generate client certificate: %w", err)
		}
		o.ClientCerts = p
	}
	return o, nil
}

// tlsConfigs are the server's and the client's mutual-TLS configurations.
func (o Options) tlsConfigs() (*tls.Config, *tls.Config, error) {
	sconf, err := o.Certs.Server(o.ClientCerts.CertPEM)
	if err != nil {
		return nil, nil, err
	}
	cconf, err := certs.Client(o.Certs.CertPEM, o.ClientCerts)
	if err != nil {
		return nil, nil, err
	}
	if err := certs.SetKeyExchange(sconf, o.Kex); err != nil {
		return nil, nil, err
	}
	return sconf, cconf, certs.SetKeyExchange(cconf, o.Kex)
}

// op performs operation i and returns how to release what it holds.
// Warm-up operations have negative i.
type op func(ctx context.Context, i int) (release func(), phasesUS map[string]int64, err error)

// measure runs n operations with at most conc in flight and holds every
// completed one until all have finished.
func measure(ctx context.Context, name string, n, conc int, o Options, do op) Measurement {
	for i := 0; i < o.Warmup && ctx.Err() == nil; i++ {
		wctx, cancel := context.WithTimeout(ctx, o.Timeout)
		if rel, _, err := do(wctx, -1-i); err == nil {
			rel()
		}
		cancel()
	}
	if conc < 1 {
		conc = 1
	}
	if conc > n {
		conc = n
	}
	// A clean heap for every measurement, so one pass does not pay for
	// the garbage of the previous one.
	runtime.GC()

	type outcome struct {
		dur     time.Duration
		end     time.Time
		release func()
		phases  map[string]int64
		err     error
	}
	outs := make([]outcome, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := ctx.Err(); err != nil {
					outs[i].err = err
					continue
				}
				octx, cancel := context.WithTimeout(ctx, o.Timeout)
				t0 := time.Now()
				rel, ph, err := do(octx, i)
				t1 := time.Now()
				cancel()
				outs[i] = outcome{dur: t1.Sub(t0), end: t1, release: rel, phases: ph, err: err}
			}
		}()
	}
	wg.Wait()

	m := Measurement{Name: name, Concurrency: conc, Attempted: n, Passes: 1}
	var end time.Time
	m.phases = map[string][]float64{}
	for _, r := range outs {
		if r.err != nil {
			m.Failed++
			if m.FirstError == "" {
				m.FirstError = r.err.Error()
			}
			continue
		}
		m.OK++
		if r.end.After(end) {
			end = r.end
		}
		m.lat = append(m.lat, ms(r.dur))
		for k, us := range r.phases {
			m.phases[k] = append(m.phases[k], float64(us)/1e3)
		}
	}
	if m.OK > 0 {
		m.WallSec = end.Sub(start).Seconds()
	}
	m.summarise()
	for _, r := range outs {
		if r.release != nil {
			r.release()
		}
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// summarise derives the rates and percentiles from the counts, the wall
// time and the raw samples.
func (m *Measurement) summarise() {
	m.PerSec, m.CostMS, m.PerSideMS = 0, 0, 0
	if m.OK > 0 && m.WallSec > 0 {
		m.PerSec = float64(m.OK) / m.WallSec
		m.CostMS = m.WallSec * 1000 / float64(m.OK)
	}
	if m.Name == RawVerbsName {
		m.PerSideMS = m.CostMS / 2
	}
	m.LatencyMS = analysis.Percentiles(m.lat)
	m.PhasesMS = nil
	if len(m.phases) > 0 {
		m.PhasesMS = map[string]result.Percentiles{}
		for k, v := range m.phases {
			m.PhasesMS[k] = analysis.Percentiles(v)
		}
	}
}

// pool merges passes of one measurement: operations and wall time add
// up (the cost is total wall over total completed), samples are pooled.
func pool(passes []Measurement) Measurement {
	m := Measurement{Name: passes[0].Name, Concurrency: passes[0].Concurrency, phases: map[string][]float64{}}
	for _, p := range passes {
		m.Passes += p.Passes
		m.Attempted += p.Attempted
		m.OK += p.OK
		m.Failed += p.Failed
		if m.FirstError == "" {
			m.FirstError = p.FirstError
		}
		m.WallSec += p.WallSec
		m.PassPerSec = append(m.PassPerSec, p.PerSec)
		m.lat = append(m.lat, p.lat...)
		for k, v := range p.phases {
			m.phases[k] = append(m.phases[k], v...)
		}
	}
	if len(passes) == 1 {
		m.PassPerSec = nil
	}
	m.summarise()
	return m
}

// TLSHandshake measures n bare TLS 1.3 handshakes, conc at a time, both
// ends in this process over loopback TCP. An operation ends when both the
// client and the server have finished the handshake, as a full connect's
// server must before it reads the client's hello.
func TLSHandshake(ctx context.Context, n, conc int, o Options) (Measurement, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Measurement{}, err
	}
	sconf, cconf, err := o.tlsConfigs()
	if err != nil {
		return Measurement{}, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return Measurement{}, fmt.Errorf("listen: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	var done rendezvous
	var held []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, raw)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				hctx, hcancel := context.WithTimeout(sctx, o.Timeout)
				err := tls.Server(raw, sconf).HandshakeContext(hctx)
				hcancel()
				done.get(raw.RemoteAddr().String()) <- err
			}()
		}
	}()
	defer func() {
		cancel()
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()

	addr := ln.Addr().String()
	m := measure(ctx, TLSHandshakeName, n, conc, o, func(ctx context.Context, _ int) (func(), map[string]int64, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dial: %w", err)
		}
		key := raw.LocalAddr().String()
		srv := done.get(key)
		defer done.drop(key)
		tc := tls.Client(raw, cconf)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, nil, fmt.Errorf("client handshake: %w", err)
		}
		select {
		case err := <-srv:
			if err != nil {
				tc.Close()
				return nil, nil, fmt.Errorf("server handshake: %w", err)
			}
		case <-ctx.Done():
			tc.Close()
			return nil, nil, fmt.Errorf("server handshake: %w", ctx.Err())
		}
		return func() { tc.Close() }, nil, nil
	})
	return m, nil
}

// rendezvous pairs a client connection with the server goroutine that
// accepted it, keyed by the client's address; whichever side comes first
// creates the channel.
type rendezvous struct {
	mu sync.Mutex
	m  map[string]chan error
}

func (r *rendezvous) get(key string) chan error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]chan error{}
	}
	c := r.m[key]
	if c == nil {
		c = make(chan error, 1)
		r.m[key] = c
	}
	return c
}

func (r *rendezvous) drop(key string) {
	r.mu.Lock()
	delete(r.m, key)
	r.mu.Unlock()
}

// side is one end of a raw verbs pair: the resources the server gives a
// client (2 CQ + 2 MR + RC QP).
type side struct {
	sendCQ, recvCQ fabric.CQ
	sendMR, recvMR fabric.MR
	qp             fabric.QP
	psn            uint32
}

func (s *side) destroy() {
	if s.qp != nil {
		s.qp.Destroy()
	}
	for _, mr := range []fabric.MR{s.sendMR, s.recvMR} {
		if mr != nil {
			mr.Dereg()
		}
	}
	for _, cq := range []fabric.CQ{s.sendCQ, s.recvCQ} {
		if cq != nil {
			cq.Destroy()
		}
	}
}

// verbTimer adds each verb's duration to the operation's phases, so the
// raw verbs figure can be split by verb like the full connect by phase.
type verbTimer struct {
	us   map[string]int64
	last time.Time
}

func newVerbTimer() *verbTimer { return &verbTimer{us: map[string]int64{}, last: time.Now()} }

func (t *verbTimer) lap(verb string) {
	now := time.Now()
	t.us[verb] += now.Sub(t.last).Microseconds()
	t.last = now
}

// Verb names of the raw verbs phases.
const (
	VerbCreateCQ = "create_cq"
	VerbRegMR    = "reg_mr"
	VerbCreateQP = "create_qp"
	VerbInit     = "init"
	VerbPSN      = "psn"
	VerbRTR      = "rtr"
	VerbRTS      = "rts"
)

// Verbs lists the raw verbs phases in the order they run.
var Verbs = []string{VerbCreateCQ, VerbRegMR, VerbCreateQP, VerbInit, VerbPSN, VerbRTR, VerbRTS}

// create builds the side up to INIT with the server's queue sizes.
func (s *side) create(dev fabric.Device, pd fabric.PD, port fabric.PortInfo, msgSize int, t *verbTimer) error {
	var err error
	if s.sendCQ, err = dev.CreateCQ(server.QPMaxSendWR); err != nil {
		return err
	}
	if s.recvCQ, err = dev.CreateCQ(server.QPMaxRecvWR); err != nil {
		return err
	}
	t.lap(VerbCreateCQ)
	if s.sendMR, err = pd.RegMR(msgSize, fabric.AccessLocalWrite); err != nil {
		return err
	}
	if s.recvMR, err = pd.RegMR(msgSize, fabric.AccessLocalWrite); err != nil {
		return err
	}
	t.lap(VerbRegMR)
	if s.qp, err = pd.CreateQP(fabric.QPInitAttr{SendCQ: s.sendCQ, RecvCQ: s.recvCQ,
		MaxSendWR: server.QPMaxSendWR, MaxRecvWR: server.QPMaxRecvWR, MaxSendSGE: 1, MaxRecvSGE: 1}); err != nil {
		return err
	}
	t.lap(VerbCreateQP)
	if err := s.qp.ToInit(fabric.InitAttr{Port: port.Port, Access: fabric.AccessLocalWrite}); err != nil {
		return err
	}
	t.lap(VerbInit)
	s.psn, err = randPSN()
	t.lap(VerbPSN)
	return err
}

// connect moves the side to RTS towards peer with the attributes the
// server and client use.
func (s *side) connect(port fabric.PortInfo, peer *side, t *verbTimer) error {
	remote := exchange.Msg{QPN: peer.qp.QPN(), PSN: peer.psn, LID: port.LID, MTU: port.ActiveMTU, GID: port.GID}
	if err := s.qp.ToRTR(server.RTR(port, remote, port.ActiveMTU)); err != nil {
		return err
	}
	t.lap(VerbRTR)
	err := s.qp.ToRTS(server.RTS(s.psn))
	t.lap(VerbRTS)
	return err
}

func randPSN() (uint32, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("generate PSN: %w", err)
	}
	return binary.BigEndian.Uint32(b[:]) & 0xffffff, nil
}

// RawVerbs measures n connections' worth of verbs work on dev, conc at a
// time: per operation, two sides of 2 CQ + 2 MR + RC QP + INIT, then RTR
// and RTS on each towards the other. PerSideMS is the cost of one side;
// PhasesMS splits an operation by verb (keyed as Verbs, both sides summed).
func RawVerbs(ctx context.Context, dev fabric.Device, n, conc int, o Options) (Measurement, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Measurement{}, err
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return Measurement{}, err
	}
	port := dev.Port()
	m := measure(ctx, RawVerbsName, n, conc, o, func(ctx context.Context, _ int) (func(), map[string]int64, error) {
		a, b := &side{}, &side{}
		t := newVerbTimer()
		release := func() { a.destroy(); b.destroy() }
		err := a.create(dev, pd, port, o.MsgSize, t)
		if err == nil {
			err = b.create(dev, pd, port, o.MsgSize, t)
		}
		if err == nil {
			err = a.connect(port, b, t)
		}
		if err == nil {
			err = b.connect(port, a, t)
		}
		if err != nil {
			release()
			return nil, nil, err
		}
		return release, t.us, nil
	})
	if err := pd.Dealloc(); err != nil {
		return m, fmt.Errorf("raw verbs: %w", err)
	}
	return m, nil
}

// FullConnect measures n rdmaprobe client connects, conc at a time,
// against a server in this process; each client makes one verified round
// trip. Server and client open their own device contexts, as separate
// processes would.
func FullConnect(ctx context.Context, p fabric.Provider, n, conc int, o Options) (Measurement, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Measurement{}, err
	}
	sconf, cconf, err := o.tlsConfigs()
	if err != nil {
		return Measurement{}, err
	}
	srv, err := server.New(ctx, server.Config{
		Listen: "127.0.0.1:0", MaxClients: n + o.Warmup, TLS: sconf, Provider: p,
		Device: o.Device, MsgSize: o.MsgSize, HandshakeTimeout: o.Timeout, ExchangeTimeout: o.Timeout,
	})
	if err != nil {
		return Measurement{}, fmt.Errorf("start server: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	stop := func() error {
		cancel()
		return <-served
	}

	dev, err := p.Open(ctx, o.Device)
	if err != nil {
		stop()
		return Measurement{}, fmt.Errorf("open client device: %w", err)
	}
	d, err := client.NewDialer(dev, client.Config{Addr: srv.Addr().String(), TLS: cconf,
		Rounds: 1, MsgSize: o.MsgSize, Timeout: o.Timeout})
	if err != nil {
		dev.Close()
		stop()
		return Measurement{}, err
	}
	m := measure(ctx, FullConnectName, n, conc, o, func(ctx context.Context, i int) (func(), map[string]int64, error) {
		c, rec := d.Connect(ctx, i, 0)
		if rec.Outcome != result.OutcomeOK {
			return nil, nil, fmt.Errorf("%s: %s", rec.Outcome, rec.Error)
		}
		return c.Close, rec.PhasesUS, nil
	})
	errs := []error{d.Close(), dev.Close(), stop()}
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("full connect teardown: %w", err)
	}
	return m, nil
}

// Suite runs the three measurements serially and then at concurrency,
// in one process on p, and derives the comparisons. progress, if not nil,
// receives each measurement as soon as it is taken. On error the returned
// run holds what was measured before it.
func Suite(ctx context.Context, p fabric.Provider, n, concurrency int, o Options, progress func(Measurement)) (*Run, error) {
	if n < 1 {
		return nil, fmt.Errorf("n must be at least 1")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	run := &Run{
		SchemaVersion: SchemaVersion, Tool: Tool, Kind: Kind,
		StartedAt: time.Now().UTC(),
		Backend:   result.Backend{Name: p.Name(), Simulated: p.Simulated()},
		Config: Config{N: n, Concurrency: concurrency, Warmup: o.Warmup, PayloadBytes: o.MsgSize,
			Rounds: 1, Certificate: certs.Describe(o.Certs, o.Kex), TimeoutSec: o.Timeout.Seconds(),
			Passes: max(1, o.Passes)},
	}
	fail := func(err error) (*Run, error) {
		run.FinishedAt = time.Now().UTC()
		run.Error = err.Error()
		run.Summarise()
		return run, err
	}
	dev, err := p.Open(ctx, o.Device)
	if err != nil {
		return fail(fmt.Errorf("open device: %w", err))
	}
	defer dev.Close()
	run.Measured = Local(&result.DeviceInfo{Name: dev.Name(), Caps: dev.Caps(), Port: dev.Port()})

	levels := []int{1}
	if concurrency > 1 {
		levels = append(levels, concurrency)
	}
	passes := max(1, o.Passes)
	for _, c := range levels {
		steps := []struct {
			name string
			run  func() (Measurement, error)
		}{
			{TLSHandshakeName, func() (Measurement, error) { return TLSHandshake(ctx, n, c, o) }},
			{RawVerbsName, func() (Measurement, error) { return RawVerbs(ctx, dev, n, c, o) }},
			{FullConnectName, func() (Measurement, error) { return FullConnect(ctx, p, n, c, o) }},
		}
		// Passes take turns (a, b, c, a, b, c, ...), so a slow spell of
		// the machine falls on all three rather than on one of them.
		got := make([][]Measurement, len(steps))
		for pass := 0; pass < passes; pass++ {
			for i, s := range steps {
				m, err := s.run()
				if err != nil {
					return fail(fmt.Errorf("%s at concurrency %d, pass %d: %w", s.name, c, pass+1, err))
				}
				if err := ctx.Err(); err != nil {
					return fail(err)
				}
				got[i] = append(got[i], m)
			}
		}
		for i := range steps {
			m := pool(got[i])
			run.Measurements = append(run.Measurements, m)
			if progress != nil {
				progress(m)
			}
		}
	}
	run.FinishedAt = time.Now().UTC()
	run.Complete = true
	run.Summarise()
	return run, nil
}

// Local describes this machine.
func Local(dev *result.DeviceInfo) Environment {
	e := Environment{Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), Device: dev}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(b))
	}
	return e
}
