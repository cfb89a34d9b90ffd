package sim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// device is an open context: resources plus its wire.
type device struct {
	prov *Provider
	port fabric.PortInfo
	ln   net.Listener
	addr netip.Addr      // the wire's address, the GID's
	ctx  context.Context // ends at Close; bounds dials
	stop context.CancelFunc

	mu     sync.Mutex
	closed bool
	out    map[netip.AddrPort]*link // connections we dialed, by peer address and LID
	in     map[*link]struct{}
	pds    map[*pd]struct{}
	cqs    map[*cq]struct{}
	wg     sync.WaitGroup // acceptor, readers, writers, delay line

	// delay is the transmit queue of Options.ServiceDelay, nil without.
	delay   *delayLine
	delayMu sync.Mutex
	// cache is the QP context cache of Options.QPCache (nil without);
	// its misses wait in the delay line.
	cache  *qpCache
	counts counters
}

var _ fabric.Device = (*device)(nil)

// mappedGID is addr as a RoCE v2 IPv4-mapped GID (for 127.0.0.1 the
// ::ffff:127.0.0.1 rxe on lo puts at index 1). The sim reports it at
// whatever index was asked for: routing is by the GID's address and the
// LID, so rxe's failure of RTR with GID index 0 (fe80::) is not
// reproduced.
func mappedGID(addr netip.Addr) fabric.GID { return fabric.GID(addr.As16()) }

// loopback is the default address, 127.0.0.1.
var loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

var loopbackGID = mappedGID(loopback)

func newDevice(p *Provider, ln net.Listener, gidx int, addr netip.Addr) *device {
	ctx, stop := context.WithCancel(context.Background())
	return &device{
		prov: p,
		port: fabric.PortInfo{
			Port:      portNum,
			State:     "ACTIVE",
			LID:       uint16(ln.Addr().(*net.TCPAddr).Port),
			ActiveMTU: fabric.MTU4096,
			GIDIndex:  gidx,
			GID:       mappedGID(addr),
			LinkLayer: "simulated",
		},
		ln:   ln,
		ctx:  ctx,
		stop: stop,
		addr: addr,
		out:  make(map[netip.AddrPort]*link),
		in:   make(map[*link]struct{}),
		pds:  make(map[*pd]struct{}),
		cqs:  make(map[*cq]struct{}),
	}
}

func (d *device) Name() string          { return d.prov.name }
func (d *device) Caps() fabric.Caps     { return d.prov.caps }
func (d *device) Port() fabric.PortInfo { return d.port }

func (d *device) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// Close destroys whatever the caller left (as the kernel does when a
// context goes away, returning the counts to the pools), then stops the
// wire and waits for all its goroutines.
func (d *device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	links := make([]*link, 0, len(d.out)+len(d.in))
	for _, l := range d.out {
		links = append(links, l)
	}
	for l := range d.in {
		links = append(links, l)
	}
	d.mu.Unlock()

	p := d.prov
	p.mu.Lock()
	var qps []*qp
	var srqs []*srq
	var mrs []*mr
	var ahs []*ah
	for pd := range d.pds {
		for h := range pd.ahs {
			ahs = append(ahs, h)
		}
		for q := range pd.qps {
			qps = append(qps, q)
		}
		for s := range pd.srqs {
			srqs = append(srqs, s)
		}
		for m := range pd.mrs {
			mrs = append(mrs, m)
		}
	}
	cqs := make([]*cq, 0, len(d.cqs))
	for c := range d.cqs {
		cqs = append(cqs, c)
	}
	pds := make([]*pd, 0, len(d.pds))
	for x := range d.pds {
		pds = append(pds, x)
	}
	p.mu.Unlock()
	for _, q := range qps {
		_ = q.Destroy()
	}
	for _, s := range srqs {
		_ = s.Destroy()
	}
	for _, h := range ahs {
		_ = h.Destroy()
	}
	for _, m := range mrs {
		_ = m.Dereg()
	}
	for _, c := range cqs {
		_ = c.Destroy()
	}
	for _, x := range pds {
		_ = x.Dealloc()
	}

	d.stop()
	err := d.ln.Close()
	for _, l := range links {
		l.fail()
	}
	d.wg.Wait()
	return err
}

func (d *device) AllocPD() (fabric.PD, error) {
	if d.isClosed() {
		return nil, verr("ibv_alloc_pd", syscall.ENODEV, "device closed")
	}
	p := d.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nPD >= p.caps.MaxPD {
		// rxe_alloc_pd → rxe_add_to_pool: -EINVAL when the pool is full (6.1).
		return nil, verr("ibv_alloc_pd", syscall.EINVAL, fmt.Sprintf("max_pd %d reached", p.caps.MaxPD))
	}
	p.nPD++
	x := &pd{dev: d, mrs: make(map[*mr]struct{}), qps: make(map[*qp]struct{}), srqs: make(map[*srq]struct{}), ahs: make(map[*ah]struct{})}
	d.pds[x] = struct{}{}
	return x, nil
}

func (d *device) CreateCQ(cqe int) (fabric.CQ, error) {
	if d.isClosed() {
		return nil, verr("ibv_create_cq", syscall.ENODEV, "device closed")
	}
	p := d.prov
	// rxe_cq_chk_attr: cqe <= 0 or > max_cqe is -EINVAL.
	if cqe <= 0 || cqe > p.caps.MaxCQE {
		return nil, verr("ibv_create_cq", syscall.EINVAL, fmt.Sprintf("cqe %d outside 1..max_cqe %d", cqe, p.caps.MaxCQE))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nCQ >= p.caps.MaxCQ {
		// rxe_create_cq → rxe_add_to_pool: -EINVAL (6.1).
		return nil, verr("ibv_create_cq", syscall.EINVAL, fmt.Sprintf("max_cq %d reached", p.caps.MaxCQ))
	}
	p.nCQ++
	c := &cq{dev: d, size: roundQueue(cqe), ev: make(chan struct{})}
	d.cqs[c] = struct{}{}
	return c, nil
}

// pd is a protection domain. Its fields are guarded by Provider.mu.
type pd struct {
	dev  *device
	dead bool
	mrs  map[*mr]struct{}
	qps  map[*qp]struct{}
	srqs map[*srq]struct{}
	ahs  map[*ah]struct{}
}

func (x *pd) Dealloc() error {
	p := x.dev.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	if x.dead {
		return verr("ibv_dealloc_pd", syscall.EINVAL, "already deallocated")
	}
	if len(x.mrs)+len(x.qps)+len(x.srqs)+len(x.ahs) > 0 {
		return verr("ibv_dealloc_pd", syscall.EBUSY, fmt.Sprintf("%d MRs, %d QPs, %d SRQs and %d AHs still use it", len(x.mrs), len(x.qps), len(x.srqs), len(x.ahs)))
	}
	x.dead = true
	p.nPD--
	delete(x.dev.pds, x)
	return nil
}

func (x *pd) RegMR(size int, access fabric.Access) (fabric.MR, error) {
	if x.dev.isClosed() {
		return nil, verr("ibv_reg_mr", syscall.ENODEV, "device closed")
	}
	p := x.dev.prov
	if size <= 0 || uint64(size) > p.caps.MaxMRSize {
		return nil, verr("ibv_reg_mr", syscall.EINVAL, fmt.Sprintf("size %d", size))
	}
	p.mu.Lock()
	if x.dead {
		p.mu.Unlock()
		return nil, verr("ibv_reg_mr", syscall.EINVAL, "PD deallocated")
	}
	if p.nMR >= p.caps.MaxMR {
		p.mu.Unlock()
		// 6.1 allocates MRs with rxe_alloc(), which returns NULL on a full
		// pool, and rxe_reg_user_mr turns that into -ENOMEM (other
		// objects go through rxe_add_to_pool and get -EINVAL).
		return nil, verr("ibv_reg_mr", syscall.ENOMEM, fmt.Sprintf("max_mr %d reached", p.caps.MaxMR))
	}
	p.nMR++
	idx := p.nextMR
	p.nextMR++
	if p.nextMR >= 1<<24 {
		p.nextMR = 1
	}
	// rxe: lkey = index << 8 | 8-bit key; rkey = lkey only with remote
	// access. The region's address is the sim's own: the index shifted
	// past any region's length, so a peer names it with its rkey.
	m := &mr{pd: x, access: access, addr: uint64(idx) << 40, buf: make([]byte, size)}
	m.lkey = idx<<8 | (idx*0x9d)&0xff
	if access&(fabric.AccessRemoteRead|fabric.AccessRemoteWrite) != 0 {
		m.rkey = m.lkey
		p.remoteMu.Lock()
		p.remote[m.rkey] = m
		p.remoteMu.Unlock()
	}
	x.mrs[m] = struct{}{}
	p.mu.Unlock()
	return m, nil
}

// mr is a registered region; buf is fixed at registration, so readers
// need no lock.
type mr struct {
	pd         *pd
	buf        []byte
	addr       uint64
	access     fabric.Access
	lkey, rkey uint32
	dead       bool // guarded by Provider.mu
}

func (m *mr) Buf() []byte  { return m.buf }
func (m *mr) Addr() uint64 { return m.addr }
func (m *mr) LKey() uint32 { return m.lkey }
func (m *mr) RKey() uint32 { return m.rkey }

func (m *mr) Dereg() error {
	p := m.pd.dev.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.dead {
		return verr("ibv_dereg_mr", syscall.EINVAL, "already deregistered")
	}
	m.dead = true
	p.nMR--
	delete(m.pd.mrs, m)
	if m.rkey != 0 {
		p.remoteMu.Lock()
		delete(p.remote, m.rkey)
		p.remoteMu.Unlock()
	}
	return nil
}

// cq is a completion queue. An event is a close of ev: every goroutine
// blocked in Wait wakes and polls, so several waiters on a shared CQ do
// not strand each other; pending keeps an event that fired between Arm and
// Wait from being lost.
type cq struct {
	dev  *device
	size int
	// spun is the time busy-polling loops polled it in vain
	// (fabric.SpinCounter), ns.
	spun atomic.Int64

	mu       sync.Mutex
	q        ring[fabric.WC]
	overflow bool
	armed    bool
	pending  bool
	ev       chan struct{}
	dead     bool
	refs     int // QPs attached; guarded by Provider.mu
}

var _ fabric.CQ = (*cq)(nil)

var _ fabric.SpinCounter = (*cq)(nil)

// Spun is the time spent polling this CQ in vain (fabric.SpinCounter),
// as the loops that polled it counted (AddSpun).
func (c *cq) Spun() time.Duration { return time.Duration(c.spun.Load()) }

// AddSpun adds a polling loop's vain time (fabric.SpinCounter).
func (c *cq) AddSpun(d time.Duration) { c.spun.Add(int64(d)) }

// push adds a completion. Called with the owning QP's lock held; the CQ
// lock is always taken after a QP lock, never before.
func (c *cq) push(wc fabric.WC) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.overflow {
		return
	}
	if c.q.n >= c.size {
		c.overflow = true
	} else {
		c.q.push(wc)
	}
	if c.armed {
		c.armed = false
		c.pending = true
		close(c.ev)
		c.ev = make(chan struct{})
	}
}

// Poll reaps completions. A CQ that overran is unusable, as in verbs where
// rxe raises IB_EVENT_CQ_ERR and the CQ's contents are lost: the sim
// reports it here, on the next poll, as EOVERFLOW ("more completions than
// the CQ holds"), since the fabric interface has no async events.
func (c *cq) Poll(wc []fabric.WC) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return 0, verr("ibv_poll_cq", syscall.EINVAL, "CQ destroyed")
	}
	if c.overflow {
		return 0, verr("ibv_poll_cq", syscall.EOVERFLOW, fmt.Sprintf("CQ overrun: more than %d completions outstanding", c.size))
	}
	n := 0
	for n < len(wc) && c.q.n > 0 {
		wc[n] = c.q.pop()
		n++
	}
	return n, nil
}

func (c *cq) Arm() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return verr("ibv_req_notify_cq", syscall.EINVAL, "CQ destroyed")
	}
	c.armed = true
	return nil
}

func (c *cq) Wait(ctx context.Context) error {
	c.mu.Lock()
	if c.pending {
		c.pending = false
		c.mu.Unlock()
		return nil
	}
	if c.dead {
		c.mu.Unlock()
		return verr("ibv_get_cq_event", syscall.EINVAL, "CQ destroyed")
	}
	ev := c.ev
	c.mu.Unlock()
	select {
	case <-ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *cq) Destroy() error {
	p := c.dev.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return verr("ibv_destroy_cq", syscall.EINVAL, "already destroyed")
	}
	if c.refs > 0 {
		return verr("ibv_destroy_cq", syscall.EBUSY, "QPs still use it")
	}
	c.dead = true
	close(c.ev) // waiters wake and find the CQ gone
	p.nCQ--
	delete(c.dev.cqs, c)
	return nil
}
