//go:build verbs && cgo

package verbs

/*
#cgo LDFLAGS: -libverbs
#include <infiniband/verbs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// rp_wc is the part of struct ibv_wc the fabric reports; Poll copies it out
// of a per-CQ C buffer, so polling allocates nothing on the Go side.
typedef struct {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t qp_num;
} rp_wc;

// rp_gid is passed by value so a GID crosses into C without a Go pointer.
typedef struct { uint8_t raw[16]; } rp_gid;

#define RP_POLL_MAX 16

// Verbs that return an errno value on some rdma-core versions and -1 with
// errno on others are normalised to a positive errno.
static int rp_ret(int r) {
	if (r == 0) return 0;
	if (r < 0) return errno ? errno : EIO;
	return r;
}

// ibv_query_port is a macro; cgo cannot call it directly.
static int rp_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
	return rp_ret(ibv_query_port(c, port, a));
}

// rp_query_gid returns 0 and fills gid/type, or an errno. ENODATA means an
// empty table slot; EOPNOTSUPP (or ENOSYS) means the kernel has no GID
// entry query and the caller falls back to sysfs.
static int rp_query_gid(struct ibv_context *c, uint32_t port, uint32_t idx, rp_gid *gid, uint32_t *type) {
	struct ibv_gid_entry e;
	memset(&e, 0, sizeof e);
	int r = ibv_query_gid_ex(c, port, idx, &e, 0);
	if (r != 0) return rp_ret(r);
	memcpy(gid->raw, e.gid.raw, 16);
	*type = e.gid_type;
	return 0;
}

static int rp_query_gid_raw(struct ibv_context *c, uint8_t port, int idx, rp_gid *gid) {
	union ibv_gid g;
	int r = ibv_query_gid(c, port, idx, &g);
	if (r != 0) return rp_ret(r);
	memcpy(gid->raw, g.raw, 16);
	return 0;
}

// The comp channel fd is made non-blocking so Go's netpoller can wait on it
// and ibv_get_cq_event returns EAGAIN instead of parking an OS thread. The
// dup is what Go owns and closes; ibv_destroy_comp_channel closes the
// original, so neither is closed twice.
static int rp_channel_fd(struct ibv_comp_channel *ch) {
	int fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
	return fcntl(ch->fd, F_DUPFD_CLOEXEC, 0);
}

// rp_drain_events reads up to n CQ events, acking each at once so that
// ibv_destroy_cq (which waits for every reported event to be acked) never
// waits on Go. It returns how many it read (fewer than n only once the
// channel is empty) or -errno.
static int rp_drain_events(struct ibv_comp_channel *ch, uintptr_t *ids, int n) {
	int k = 0;
	while (k < n) {
		struct ibv_cq *cq;
		void *ctx;
		if (ibv_get_cq_event(ch, &cq, &ctx) != 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) return k;
			return k > 0 ? k : -(errno ? errno : EIO);
		}
		ibv_ack_cq_events(cq, 1);
		ids[k++] = (uintptr_t)ctx;
	}
	return k;
}

// cq_context holds a numeric id, never a Go pointer.
static struct ibv_cq *rp_create_cq(struct ibv_context *c, int cqe, uintptr_t id, struct ibv_comp_channel *ch) {
	return ibv_create_cq(c, cqe, (void *)id, ch, 0);
}

static int rp_poll(struct ibv_cq *cq, rp_wc *out, int n) {
	struct ibv_wc wc[RP_POLL_MAX];
	if (n > RP_POLL_MAX) n = RP_POLL_MAX;
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) {
		out[i].wr_id = wc[i].wr_id;
		out[i].status = wc[i].status;
		out[i].opcode = wc[i].opcode;
		out[i].byte_len = wc[i].byte_len;
		out[i].qp_num = wc[i].qp_num;
	}
	return got;
}

static int rp_req_notify(struct ibv_cq *cq) {
	return rp_ret(ibv_req_notify_cq(cq, 0));
}

// The buffer is C memory because the device keeps its address: Go memory
// could move or be freed while registered. Its address is mr->addr.
static struct ibv_mr *rp_reg_mr(struct ibv_pd *pd, size_t size, int access) {
	void *buf = NULL;
	int r = posix_memalign(&buf, (size_t)sysconf(_SC_PAGESIZE), size);
	if (r != 0) {
		errno = r;
		return NULL;
	}
	memset(buf, 0, size);
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, size, access);
	if (mr == NULL) {
		int e = errno;
		free(buf);
		errno = e;
	}
	return mr;
}

static int rp_dereg_mr(struct ibv_mr *mr) {
	void *buf = mr->addr;
	int r = rp_ret(ibv_dereg_mr(mr));
	if (r == 0) free(buf);
	return r;
}

// With an SRQ the QP has no receive queue: its receive caps must be 0.
static struct ibv_qp *rp_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		struct ibv_srq *srq, uint32_t swr, uint32_t rwr, uint32_t ssge, uint32_t rsge) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.srq = srq;
	if (srq != NULL) {
		rwr = 0;
		rsge = 0;
	}
	a.cap.max_send_wr = swr;
	a.cap.max_recv_wr = rwr;
	a.cap.max_send_sge = ssge;
	a.cap.max_recv_sge = rsge;
	a.cap.max_inline_data = 0;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	return ibv_create_qp(pd, &a);
}

static int rp_to_init(struct ibv_qp *qp, int pkey_index, int port, int access) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = pkey_index;
	a.port_num = port;
	a.qp_access_flags = access;
	return rp_ret(ibv_modify_qp(qp, &a,
		IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

static int rp_to_rtr(struct ibv_qp *qp, int mtu, uint32_t dest_qpn, uint32_t rq_psn,
		int max_dest_rd_atomic, int min_rnr_timer, uint16_t dlid, rp_gid dgid,
		int sgid_index, int hop_limit, int port) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = max_dest_rd_atomic;
	a.min_rnr_timer = min_rnr_timer;
	a.ah_attr.dlid = dlid;
	a.ah_attr.sl = 0;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = port;
	if (sgid_index >= 0) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, dgid.raw, 16);
		a.ah_attr.grh.sgid_index = sgid_index;
		a.ah_attr.grh.hop_limit = hop_limit;
	}
	return rp_ret(ibv_modify_qp(qp, &a,
		IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
}

static int rp_to_rts(struct ibv_qp *qp, uint32_t sq_psn, int timeout, int retry_cnt,
		int rnr_retry, int max_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = max_rd_atomic;
	return rp_ret(ibv_modify_qp(qp, &a,
		IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

static int rp_qp_state(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0) return -1;
	return a.qp_state;
}

// Work requests live on the C stack: posting allocates nothing.
static int rp_post_send(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	return rp_ret(ibv_post_send(qp, &wr, &bad));
}

static int rp_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return rp_ret(ibv_post_recv(qp, &wr, &bad));
}

static struct ibv_srq *rp_create_srq(struct ibv_pd *pd, uint32_t max_wr, uint32_t max_sge) {
	struct ibv_srq_init_attr a;
	memset(&a, 0, sizeof a);
	a.attr.max_wr = max_wr;
	a.attr.max_sge = max_sge;
	a.attr.srq_limit = 0;
	return ibv_create_srq(pd, &a);
}

static int rp_post_srq_recv(struct ibv_srq *srq, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return rp_ret(ibv_post_srq_recv(srq, &wr, &bad));
}

static int rp_destroy_srq(struct ibv_srq *srq) {
	return rp_ret(ibv_destroy_srq(srq));
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// Provider opens libibverbs devices.
type Provider struct{}

var _ fabric.Provider = (*Provider)(nil)

// New returns the libibverbs provider.
func New() fabric.Provider { return &Provider{} }

// Supported reports whether this binary was built with libibverbs.
func Supported() bool { return true }

// Name is the backend name recorded in results.
func (*Provider) Name() string { return "verbs" }

// Simulated is false: these are real verbs on a real (or Soft-RoCE) device.
func (*Provider) Simulated() bool { return false }

// Devices lists the devices libibverbs sees (ibv_get_device_list).
func (*Provider) Devices() ([]string, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, verr("ibv_get_device_list", errnoOf(err, syscall.ENODEV), "")
	}
	defer C.ibv_free_device_list(list)
	names := make([]string, 0, int(n))
	for _, d := range unsafe.Slice(list, int(n)) {
		names = append(names, C.GoString(C.ibv_get_device_name(d)))
	}
	return names, nil
}

// Open opens the device context, checks that the port is ACTIVE, resolves
// the GID index, reads the caps and starts the device's event goroutine.
func (p *Provider) Open(ctx context.Context, cfg fabric.DeviceConfig) (fabric.Device, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	port := cfg.Port
	if port == 0 {
		port = 1
	}
	if port < 1 || port > 255 {
		return nil, verr("ibv_query_port", syscall.EINVAL, fmt.Sprintf("port %d", port))
	}
	vctx, name, err := openByName(cfg.Name)
	if err != nil {
		return nil, err
	}
	d := &device{
		slots:   make(chan struct{}, 2*runtime.GOMAXPROCS(0)),
		name:    name,
		ctx:     vctx,
		portNum: port,
		cqs:     make(map[uintptr]*cq),
		pds:     make(map[*pd]struct{}),
		done:    make(chan struct{}),
	}
	fail := func(err error) (fabric.Device, error) {
		if d.ch != nil {
			C.ibv_destroy_comp_channel(d.ch)
		}
		C.ibv_close_device(vctx)
		return nil, err
	}

	var attr C.struct_ibv_device_attr
	if r := C.ibv_query_device(vctx, &attr); r != 0 {
		return fail(verr("ibv_query_device", syscall.Errno(r), name))
	}
	d.caps = capsOf(&attr)
	if port > int(attr.phys_port_cnt) {
		return fail(verr("ibv_query_port", syscall.EINVAL,
			fmt.Sprintf("%s has %d port(s), asked for port %d", name, int(attr.phys_port_cnt), port)))
	}

	var pa C.struct_ibv_port_attr
	if r := C.rp_query_port(vctx, C.uint8_t(port), &pa); r != 0 {
		return fail(verr("ibv_query_port", syscall.Errno(r), fmt.Sprintf("%s port %d", name, port)))
	}
	state := portState(int(pa.state))
	if pa.state != C.IBV_PORT_ACTIVE {
		return fail(fmt.Errorf("%s port %d is %s, not ACTIVE: the link is not up (see `rdma link show`)", name, port, state))
	}
	d.port = fabric.PortInfo{
		Port:      port,
		State:     state,
		LID:       uint16(pa.lid),
		ActiveMTU: fabric.MTU(pa.active_mtu),
		LinkLayer: linkLayer(int(pa.link_layer)),
	}
	idx, gid, err := d.resolveGID(cfg.GIDIndex, int(pa.gid_tbl_len))
	if err != nil {
		return fail(err)
	}
	d.port.GIDIndex, d.port.GID = idx, gid

	ch, err := C.ibv_create_comp_channel(vctx)
	if ch == nil {
		return fail(verr("ibv_create_comp_channel", errnoOf(err, syscall.EIO), name))
	}
	d.ch = ch
	fd, err := C.rp_channel_fd(ch)
	if fd < 0 {
		return fail(verr("fcntl(comp channel)", errnoOf(err, syscall.EIO), name))
	}
	// A non-blocking fd makes os.NewFile register it with the netpoller.
	d.evf = os.NewFile(uintptr(fd), "ibv_comp_channel:"+name)
	rc, err := d.evf.SyscallConn()
	if err != nil {
		d.evf.Close()
		return fail(fmt.Errorf("%s: completion channel: %w", name, err))
	}
	d.evIDs = (*C.uintptr_t)(C.malloc(C.size_t(evBatch) * C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
	go d.events(rc)
	return d, nil
}

func openByName(want string) (*C.struct_ibv_context, string, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, "", verr("ibv_get_device_list", errnoOf(err, syscall.ENODEV), "")
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))
	var have []string
	for _, dev := range devs {
		name := C.GoString(C.ibv_get_device_name(dev))
		have = append(have, name)
		if want != "" && name != want {
			continue
		}
		vctx, err := C.ibv_open_device(dev)
		if vctx == nil {
			return nil, "", verr("ibv_open_device", errnoOf(err, syscall.EIO), name)
		}
		return vctx, name, nil
	}
	if len(have) == 0 {
		return nil, "", verr("ibv_get_device_list", syscall.ENODEV, "no RDMA devices (is a driver such as rdma_rxe loaded and a link added?)")
	}
	return nil, "", verr("ibv_open_device", syscall.ENODEV, fmt.Sprintf("no device %q (have %s)", want, strings.Join(have, ", ")))
}

func capsOf(a *C.struct_ibv_device_attr) fabric.Caps {
	return fabric.Caps{
		MaxQP:      int(a.max_qp),
		MaxQPWR:    int(a.max_qp_wr),
		MaxSGE:     int(a.max_sge),
		MaxCQ:      int(a.max_cq),
		MaxCQE:     int(a.max_cqe),
		MaxMR:      int(a.max_mr),
		MaxMRSize:  uint64(a.max_mr_size),
		MaxPD:      int(a.max_pd),
		MaxSRQ:     int(a.max_srq),
		MaxSRQWR:   int(a.max_srq_wr),
		FWVersion:  C.GoString(&a.fw_ver[0]),
		VendorID:   uint32(a.vendor_id),
		VendorPart: uint32(a.vendor_part_id),
	}
}

// gidTypeRoCEv2 is IBV_GID_TYPE_ROCE_V2.
const gidTypeRoCEv2 = C.IBV_GID_TYPE_ROCE_V2

// resolveGID returns the configured GID, or for index -1 the first RoCE v2
// GID that is IPv4-mapped: on rxe the link-local fe80:: entry at index 0
// is RoCE v1 and fails at RTR, while ::ffff:a.b.c.d routes over UDP/IPv4.
// Without such an entry (InfiniBand, IPv6-only) it falls back to index 0.
func (d *device) resolveGID(want, tblLen int) (int, fabric.GID, error) {
	if want >= 0 {
		if want >= tblLen {
			return 0, fabric.GID{}, verr("ibv_query_gid", syscall.EINVAL,
				fmt.Sprintf("GID index %d: %s port %d has %d entries", want, d.name, d.portNum, tblLen))
		}
		var g C.rp_gid
		if r := C.rp_query_gid_raw(d.ctx, C.uint8_t(d.portNum), C.int(want), &g); r != 0 {
			return 0, fabric.GID{}, verr("ibv_query_gid", syscall.Errno(r), fmt.Sprintf("GID index %d", want))
		}
		return want, gidOf(g), nil
	}
	for i := 0; i < tblLen; i++ {
		var g C.rp_gid
		var typ C.uint32_t
		r := C.rp_query_gid(d.ctx, C.uint32_t(d.portNum), C.uint32_t(i), &g, &typ)
		var gid fabric.GID
		var v2 bool
		switch syscall.Errno(r) {
		case 0:
			gid, v2 = gidOf(g), typ == gidTypeRoCEv2
		case syscall.EOPNOTSUPP, syscall.ENOSYS:
			var ok bool
			if gid, v2, ok = sysfsGID(d.name, d.portNum, i); !ok {
				continue
			}
		default:
			continue // an empty slot (ENODATA) or one we cannot read
		}
		if v2 && isIPv4Mapped(gid) {
			return i, gid, nil
		}
	}
	var g C.rp_gid
	if r := C.rp_query_gid_raw(d.ctx, C.uint8_t(d.portNum), 0, &g); r != 0 {
		return 0, fabric.GID{}, verr("ibv_query_gid", syscall.Errno(r), "GID index 0")
	}
	return 0, gidOf(g), nil
}

func gidOf(g C.rp_gid) fabric.GID {
	var out fabric.GID
	for i := range out {
		out[i] = byte(g.raw[i])
	}
	return out
}

// sysfsGID reads one GID table entry the way rdma-core did before the
// GID-entry ioctl existed.
func sysfsGID(dev string, port, idx int) (fabric.GID, bool, bool) {
	base := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/", dev, port)
	typ, err := os.ReadFile(base + "gid_attrs/types/" + strconv.Itoa(idx))
	if err != nil {
		return fabric.GID{}, false, false
	}
	raw, err := os.ReadFile(base + "gids/" + strconv.Itoa(idx))
	if err != nil {
		return fabric.GID{}, false, false
	}
	gid, ok := parseSysfsGID(string(raw))
	return gid, strings.TrimSpace(string(typ)) == "RoCE v2", ok
}

const evBatch = 64

// device is an open context with one completion channel shared by all its
// CQs and one goroutine that turns channel events into CQ wake-ups.
type device struct {
	name    string
	ctx     *C.struct_ibv_context
	ch      *C.struct_ibv_comp_channel
	portNum int
	caps    fabric.Caps
	port    fabric.PortInfo

	evf   *os.File
	evIDs *C.uintptr_t // C buffer, only touched by the event goroutine
	done  chan struct{}

	cqMu   sync.RWMutex
	cqs    map[uintptr]*cq
	nextID uintptr

	// life lets creators run concurrently while Close waits them out: a
	// resource created after Close collected its leftovers would leak and
	// keep the completion channel busy.
	life   sync.RWMutex
	closed bool

	mu  sync.Mutex
	pds map[*pd]struct{}

	slots chan struct{} // see enter
}

var _ fabric.Device = (*device)(nil)

func (d *device) Name() string          { return d.name }
func (d *device) Caps() fabric.Caps     { return d.caps }
func (d *device) Port() fabric.PortInfo { return d.port }

// events drains the completion channel whenever the netpoller says it is
// readable. It ends when Close closes the file.
func (d *device) events(rc syscall.RawConn) {
	defer close(d.done)
	ids := unsafe.Slice((*uintptr)(unsafe.Pointer(d.evIDs)), evBatch)
	var fatal syscall.Errno
	err := rc.Read(func(uintptr) bool {
		for {
			n := int(C.rp_drain_events(d.ch, d.evIDs, evBatch))
			if n < 0 {
				fatal = syscall.Errno(-n)
				return true
			}
			d.cqMu.RLock()
			for _, id := range ids[:n] {
				if c := d.cqs[id]; c != nil {
					c.signal()
				}
			}
			d.cqMu.RUnlock()
			if n < evBatch {
				return false // drained to EAGAIN: wait for the next edge
			}
		}
	})
	if fatal != 0 || (err != nil && !errors.Is(err, os.ErrClosed)) {
		// The channel is unusable: fail every waiter with the errno rather
		// than let it hang until its context ends.
		d.cqMu.Lock()
		for _, c := range d.cqs {
			c.broken(fatal)
		}
		d.cqMu.Unlock()
	}
}

// enter admits a creating call unless the device is closed; exit ends it.
// enter admits one resource-creating verb. At most len(d.slots) run at
// once: each blocks an OS thread inside the kernel, and thousands of
// clients creating QPs together would otherwise spawn thousands of
// threads that only contend for the same CPUs and device locks.
func (d *device) enter(verb string) error {
	d.life.RLock()
	if d.closed {
		d.life.RUnlock()
		return verr(verb, syscall.EINVAL, "device closed")
	}
	d.slots <- struct{}{}
	return nil
}

func (d *device) exit() {
	<-d.slots
	d.life.RUnlock()
}

func (d *device) AllocPD() (fabric.PD, error) {
	if err := d.enter("ibv_alloc_pd"); err != nil {
		return nil, err
	}
	defer d.exit()
	p, err := C.ibv_alloc_pd(d.ctx)
	if p == nil {
		return nil, verr("ibv_alloc_pd", errnoOf(err, syscall.ENOMEM), "")
	}
	x := &pd{dev: d, pd: p, qps: make(map[*qp]struct{}), mrs: make(map[*mr]struct{}), srqs: make(map[*srq]struct{})}
	d.mu.Lock()
	d.pds[x] = struct{}{}
	d.mu.Unlock()
	return x, nil
}

func (d *device) CreateCQ(cqe int) (fabric.CQ, error) {
	if cqe < 1 {
		return nil, verr("ibv_create_cq", syscall.EINVAL, fmt.Sprintf("cqe %d", cqe))
	}
	if err := d.enter("ibv_create_cq"); err != nil {
		return nil, err
	}
	defer d.exit()
	c := &cq{dev: d, ev: make(chan struct{})}
	// Registered before ibv_create_cq so the id the kernel will hand back
	// in cq_context is always one the event goroutine can resolve.
	d.cqMu.Lock()
	d.nextID++
	c.id = d.nextID
	d.cqs[c.id] = c
	d.cqMu.Unlock()
	p, err := C.rp_create_cq(d.ctx, C.int(cqe), C.uintptr_t(c.id), d.ch)
	if p == nil {
		d.cqMu.Lock()
		delete(d.cqs, c.id)
		d.cqMu.Unlock()
		return nil, verr("ibv_create_cq", errnoOf(err, syscall.ENOMEM), fmt.Sprintf("cqe %d", cqe))
	}
	c.cq = p
	c.buf = (*C.rp_wc)(C.malloc(C.size_t(C.RP_POLL_MAX) * C.size_t(unsafe.Sizeof(C.rp_wc{}))))
	return c, nil
}

// Close destroys what the caller left (QPs, SRQs, MRs, CQs, PDs, in the
// order verbs requires), stops the event goroutine and closes the context.
func (d *device) Close() error {
	d.life.Lock()
	if d.closed {
		d.life.Unlock()
		return nil
	}
	d.closed = true
	d.life.Unlock()
	d.mu.Lock()
	pds := make([]*pd, 0, len(d.pds))
	for x := range d.pds {
		pds = append(pds, x)
	}
	d.mu.Unlock()

	var errs []error
	var qps []*qp
	var srqs []*srq
	var mrs []*mr
	for _, x := range pds {
		x.mu.Lock()
		for q := range x.qps {
			qps = append(qps, q)
		}
		for s := range x.srqs {
			srqs = append(srqs, s)
		}
		for m := range x.mrs {
			mrs = append(mrs, m)
		}
		x.mu.Unlock()
	}
	// QPs first: an SRQ (of any PD) is busy while a QP uses it.
	for _, q := range qps {
		errs = append(errs, q.Destroy())
	}
	for _, s := range srqs {
		errs = append(errs, s.Destroy())
	}
	for _, m := range mrs {
		errs = append(errs, m.Dereg())
	}
	d.cqMu.RLock()
	cqs := make([]*cq, 0, len(d.cqs))
	for _, c := range d.cqs {
		cqs = append(cqs, c)
	}
	d.cqMu.RUnlock()
	for _, c := range cqs {
		errs = append(errs, c.Destroy())
	}
	for _, x := range pds {
		errs = append(errs, x.Dealloc())
	}

	d.evf.Close()
	<-d.done
	C.free(unsafe.Pointer(d.evIDs))
	if r := C.ibv_destroy_comp_channel(d.ch); r != 0 {
		errs = append(errs, verr("ibv_destroy_comp_channel", syscall.Errno(r), d.name))
	}
	if r, err := C.ibv_close_device(d.ctx); r != 0 {
		errs = append(errs, verr("ibv_close_device", errnoOf(err, syscall.EIO), d.name))
	}
	return errors.Join(errs...)
}

// pd is a protection domain; it tracks its QPs and MRs so Device.Close can
// release them in order.
type pd struct {
	dev *device
	pd  *C.struct_ibv_pd

	// life is held shared across the C calls that use the PD, so clients
	// register MRs and create QPs in parallel, and exclusively by Dealloc.
	life sync.RWMutex
	dead bool

	mu   sync.Mutex
	qps  map[*qp]struct{}
	mrs  map[*mr]struct{}
	srqs map[*srq]struct{}
}

var _ fabric.PD = (*pd)(nil)

func (x *pd) RegMR(size int, access fabric.Access) (fabric.MR, error) {
	if size <= 0 {
		return nil, verr("ibv_reg_mr", syscall.EINVAL, fmt.Sprintf("size %d", size))
	}
	if err := x.dev.enter("ibv_reg_mr"); err != nil {
		return nil, err
	}
	defer x.dev.exit()
	x.life.RLock()
	defer x.life.RUnlock()
	if x.dead {
		return nil, verr("ibv_reg_mr", syscall.EINVAL, "PD deallocated")
	}
	p, err := C.rp_reg_mr(x.pd, C.size_t(size), C.int(access))
	if p == nil {
		return nil, verr("ibv_reg_mr", errnoOf(err, syscall.ENOMEM), fmt.Sprintf("%d bytes", size))
	}
	m := &mr{
		pd:   x,
		mr:   p,
		addr: uintptr(p.addr),
		size: size,
		lkey: uint32(p.lkey),
		rkey: uint32(p.rkey),
	}
	m.buf = unsafe.Slice((*byte)(p.addr), size)
	x.mu.Lock()
	x.mrs[m] = struct{}{}
	x.mu.Unlock()
	return m, nil
}

func (x *pd) CreateQP(a fabric.QPInitAttr) (fabric.QP, error) {
	scq, ok1 := a.SendCQ.(*cq)
	rcq, ok2 := a.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq == nil || rcq == nil {
		return nil, verr("ibv_create_qp", syscall.EINVAL, "send and receive CQs must be verbs CQs")
	}
	var sq *srq
	if a.SRQ != nil {
		var ok bool
		if sq, ok = a.SRQ.(*srq); !ok || sq == nil {
			return nil, verr("ibv_create_qp", syscall.EINVAL, "the SRQ must be a verbs SRQ")
		}
	}
	if err := x.dev.enter("ibv_create_qp"); err != nil {
		return nil, err
	}
	defer x.dev.exit()
	x.life.RLock()
	defer x.life.RUnlock()
	if x.dead {
		return nil, verr("ibv_create_qp", syscall.EINVAL, "PD deallocated")
	}
	// The CQs are held across the call so neither is destroyed under it;
	// afterwards the kernel itself refuses (EBUSY) while the QP lives.
	unlock, err := holdCQs(scq, rcq)
	if err != nil {
		return nil, err
	}
	// The SRQ likewise: the kernel refuses to destroy it (EBUSY) once the
	// QP exists, but not while the QP is being created.
	var csrq *C.struct_ibv_srq
	if sq != nil {
		sq.life.RLock()
		if sq.dead {
			sq.life.RUnlock()
			unlock()
			return nil, verr("ibv_create_qp", syscall.EINVAL, "SRQ destroyed")
		}
		csrq = sq.srq
	}
	p, cerr := C.rp_create_qp(x.pd, scq.cq, rcq.cq, csrq, C.uint32_t(a.MaxSendWR), C.uint32_t(a.MaxRecvWR),
		C.uint32_t(a.MaxSendSGE), C.uint32_t(a.MaxRecvSGE))
	if sq != nil {
		sq.life.RUnlock()
	}
	unlock()
	if p == nil {
		return nil, verr("ibv_create_qp", errnoOf(cerr, syscall.ENOMEM), "")
	}
	q := &qp{pd: x, qp: p, qpn: uint32(p.qp_num), srq: sq}
	x.mu.Lock()
	x.qps[q] = struct{}{}
	x.mu.Unlock()
	return q, nil
}

// holdCQs read-locks the lifetimes of one or two CQs in id order, so QPs
// created over the same CQs in swapped roles while one is being destroyed
// cannot deadlock.
func holdCQs(a, b *cq) (func(), error) {
	if a.id > b.id {
		a, b = b, a
	}
	a.life.RLock()
	if b != a {
		b.life.RLock()
	}
	unlock := func() {
		if b != a {
			b.life.RUnlock()
		}
		a.life.RUnlock()
	}
	if a.dead || b.dead {
		unlock()
		return nil, verr("ibv_create_qp", syscall.EINVAL, "CQ destroyed")
	}
	return unlock, nil
}

func (x *pd) Dealloc() error {
	x.life.Lock()
	defer x.life.Unlock()
	if x.dead {
		return verr("ibv_dealloc_pd", syscall.EINVAL, "already deallocated")
	}
	x.mu.Lock()
	nq, nm, ns := len(x.qps), len(x.mrs), len(x.srqs)
	x.mu.Unlock()
	if nq > 0 || nm > 0 || ns > 0 {
		return verr("ibv_dealloc_pd", syscall.EBUSY, fmt.Sprintf("%d QPs, %d MRs and %d SRQs still use it", nq, nm, ns))
	}
	if r := C.ibv_dealloc_pd(x.pd); r != 0 {
		return verr("ibv_dealloc_pd", syscall.Errno(r), "")
	}
	x.dead = true
	d := x.dev
	d.mu.Lock()
	delete(d.pds, x)
	d.mu.Unlock()
	return nil
}

// mr is a registered C buffer.
type mr struct {
	pd   *pd
	mr   *C.struct_ibv_mr
	addr uintptr // C memory: never moved or collected
	size int
	buf  []byte
	lkey uint32
	rkey uint32
	mu   sync.Mutex // serialises Dereg
	dead atomic.Bool
}

var _ fabric.MR = (*mr)(nil)

func (m *mr) Buf() []byte  { return m.buf }
func (m *mr) LKey() uint32 { return m.lkey }
func (m *mr) RKey() uint32 { return m.rkey }

func (m *mr) Dereg() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead.Load() {
		return verr("ibv_dereg_mr", syscall.EINVAL, "already deregistered")
	}
	if r := C.rp_dereg_mr(m.mr); r != 0 {
		return verr("ibv_dereg_mr", syscall.Errno(r), "")
	}
	m.dead.Store(true)
	m.buf = nil
	x := m.pd
	x.mu.Lock()
	delete(x.mrs, m)
	x.mu.Unlock()
	return nil
}

// CreateSRQ creates a shared receive queue (ibv_create_srq). The device
// checks max_wr and max_sge against max_srq_wr and its max_srq_sge (rxe:
// EINVAL); the queue it maps may be deeper than asked.
func (x *pd) CreateSRQ(maxWR, maxSGE int) (fabric.SRQ, error) {
	const verb = "ibv_create_srq"
	if maxWR < 0 || maxSGE < 0 || maxWR > math.MaxUint32 || maxSGE > math.MaxUint32 {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_wr %d, max_sge %d", maxWR, maxSGE))
	}
	if err := x.dev.enter(verb); err != nil {
		return nil, err
	}
	defer x.dev.exit()
	x.life.RLock()
	defer x.life.RUnlock()
	if x.dead {
		return nil, verr(verb, syscall.EINVAL, "PD deallocated")
	}
	p, err := C.rp_create_srq(x.pd, C.uint32_t(maxWR), C.uint32_t(maxSGE))
	if p == nil {
		return nil, verr(verb, errnoOf(err, syscall.ENOMEM), fmt.Sprintf("max_wr %d, max_sge %d", maxWR, maxSGE))
	}
	s := &srq{pd: x, srq: p}
	x.mu.Lock()
	x.srqs[s] = struct{}{}
	x.mu.Unlock()
	return s, nil
}

// srq is a shared receive queue. life keeps Destroy from freeing it under
// a concurrent post or a QP being created on it.
type srq struct {
	pd   *pd
	life sync.RWMutex
	srq  *C.struct_ibv_srq
	dead bool
}

var _ fabric.SRQ = (*srq)(nil)

// PostRecv posts one receive (ibv_post_srq_recv, thread-safe in
// rdma-core's providers).
func (s *srq) PostRecv(wrID uint64, m fabric.MR, off, length int) error {
	const verb = "ibv_post_srq_recv"
	x, err := sgeMR(verb, m, off, length)
	if err != nil {
		return err
	}
	s.life.RLock()
	defer s.life.RUnlock()
	if s.dead {
		return verr(verb, syscall.EINVAL, "SRQ destroyed")
	}
	r := C.rp_post_srq_recv(s.srq, C.uint64_t(wrID), C.uint64_t(x.addr+uintptr(off)), C.uint32_t(length), C.uint32_t(x.lkey))
	if r != 0 {
		return verr(verb, syscall.Errno(r), "")
	}
	return nil
}

// Destroy releases the SRQ (ibv_destroy_srq). While a QP uses it the
// kernel refuses with EBUSY and the SRQ stays usable.
func (s *srq) Destroy() error {
	const verb = "ibv_destroy_srq"
	s.life.Lock()
	defer s.life.Unlock()
	if s.dead {
		return verr(verb, syscall.EINVAL, "already destroyed")
	}
	if r := C.rp_destroy_srq(s.srq); r != 0 {
		return verr(verb, syscall.Errno(r), "")
	}
	s.dead = true
	x := s.pd
	x.mu.Lock()
	delete(x.srqs, s)
	x.mu.Unlock()
	return nil
}

// cq is a completion queue on the device's shared completion channel.
type cq struct {
	dev *device
	id  uintptr // cq_context: how the event goroutine finds this CQ

	// life is held shared by every C call on the CQ (and by QP creation
	// over it) and exclusively by Destroy; pollMu guards buf, the C array
	// Poll copies completions through.
	life   sync.RWMutex
	cq     *C.struct_ibv_cq
	dead   bool
	pollMu sync.Mutex
	buf    *C.rp_wc

	// An event closes ev, waking every waiter of a shared CQ; pending keeps
	// an event that fired between Arm and Wait from being lost.
	evMu    sync.Mutex
	ev      chan struct{}
	pending bool
	gone    bool
	err     syscall.Errno
}

var _ fabric.CQ = (*cq)(nil)

func (c *cq) signal() {
	c.evMu.Lock()
	if !c.gone {
		c.pending = true
		close(c.ev)
		c.ev = make(chan struct{})
	}
	c.evMu.Unlock()
}

func (c *cq) broken(errno syscall.Errno) {
	if errno == 0 {
		errno = syscall.EIO
	}
	c.evMu.Lock()
	if !c.gone {
		c.gone = true
		c.err = errno
		close(c.ev)
	}
	c.evMu.Unlock()
}

func (c *cq) Poll(wc []fabric.WC) (int, error) {
	if len(wc) == 0 {
		return 0, nil
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.dead {
		return 0, verr("ibv_poll_cq", syscall.EINVAL, "CQ destroyed")
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	n := int(C.rp_poll(c.cq, c.buf, C.int(min(len(wc), C.RP_POLL_MAX))))
	if n < 0 {
		return 0, verr("ibv_poll_cq", syscall.EIO, fmt.Sprintf("returned %d", n))
	}
	for i, w := range unsafe.Slice(c.buf, n) {
		op := fabric.WCSend
		// For an error completion the opcode is not defined by the spec;
		// rxe reports the work request's kind, which is the best we have.
		if w.opcode&C.IBV_WC_RECV != 0 {
			op = fabric.WCRecv
		}
		wc[i] = fabric.WC{
			WRID:    uint64(w.wr_id),
			Status:  fabric.WCStatus(w.status),
			Opcode:  op,
			ByteLen: int(w.byte_len),
			QPN:     uint32(w.qp_num),
		}
	}
	return n, nil
}

func (c *cq) Arm() error {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.dead {
		return verr("ibv_req_notify_cq", syscall.EINVAL, "CQ destroyed")
	}
	if r := C.rp_req_notify(c.cq); r != 0 {
		return verr("ibv_req_notify_cq", syscall.Errno(r), "")
	}
	return nil
}

func (c *cq) Wait(ctx context.Context) error {
	c.evMu.Lock()
	if c.pending {
		c.pending = false
		c.evMu.Unlock()
		return nil
	}
	if c.gone {
		err := c.err
		c.evMu.Unlock()
		return verr("ibv_get_cq_event", err, "completion channel closed")
	}
	ev := c.ev
	c.evMu.Unlock()
	select {
	case <-ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *cq) Destroy() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.dead {
		return verr("ibv_destroy_cq", syscall.EINVAL, "already destroyed")
	}
	// Blocks until every event the kernel reported for this CQ is acked;
	// the event goroutine acks in C before it touches any Go lock.
	if r := C.ibv_destroy_cq(c.cq); r != 0 {
		return verr("ibv_destroy_cq", syscall.Errno(r), "")
	}
	c.dead = true
	C.free(unsafe.Pointer(c.buf))
	c.buf = nil
	d := c.dev
	d.cqMu.Lock()
	delete(d.cqs, c.id)
	d.cqMu.Unlock()
	c.broken(syscall.EINVAL) // waiters wake and find the CQ gone
	return nil
}

// qp is an RC queue pair. life keeps Destroy from freeing the QP under a
// concurrent post or modify.
type qp struct {
	pd   *pd
	qpn  uint32
	srq  *srq // nil: the QP has its own receive queue
	life sync.RWMutex
	qp   *C.struct_ibv_qp
	dead bool
	last atomic.Int32 // state after the last successful modify
}

var _ fabric.QP = (*qp)(nil)

func (q *qp) QPN() uint32 { return q.qpn }

// State asks the device, since a transport error moves an RTS QP to ERR
// without any call on our side.
func (q *qp) State() fabric.QPState {
	q.life.RLock()
	defer q.life.RUnlock()
	if q.dead {
		return fabric.QPSReset
	}
	if s := C.rp_qp_state(q.qp); s >= 0 {
		return fabric.QPState(s)
	}
	return fabric.QPState(q.last.Load())
}

func (q *qp) modify(verb string, to fabric.QPState, f func() C.int) error {
	q.life.RLock()
	defer q.life.RUnlock()
	if q.dead {
		return verr(verb, syscall.EINVAL, "QP destroyed")
	}
	if r := f(); r != 0 {
		return verr(verb, syscall.Errno(r), fmt.Sprintf("QP %d", q.qpn))
	}
	q.last.Store(int32(to))
	return nil
}

func (q *qp) ToInit(a fabric.InitAttr) error {
	port := a.Port
	if port == 0 {
		port = q.pd.dev.portNum
	}
	return q.modify("ibv_modify_qp(INIT)", fabric.QPSInit, func() C.int {
		return C.rp_to_init(q.qp, C.int(a.PKeyIndex), C.int(port), C.int(a.Access))
	})
}

func (q *qp) ToRTR(a fabric.RTRAttr) error {
	port := a.Port
	if port == 0 {
		port = q.pd.dev.portNum
	}
	var g C.rp_gid
	for i, b := range a.DGID {
		g.raw[i] = C.uint8_t(b)
	}
	hop := a.HopLimit
	if hop == 0 {
		hop = 64 // 0 would drop the packet at the first router
	}
	return q.modify("ibv_modify_qp(RTR)", fabric.QPSRTR, func() C.int {
		return C.rp_to_rtr(q.qp, C.int(a.PathMTU), C.uint32_t(a.DestQPN), C.uint32_t(a.RQPSN),
			C.int(a.MaxDestRdAtomic), C.int(a.MinRNRTimer), C.uint16_t(a.DLID), g,
			C.int(a.GIDIndex), C.int(hop), C.int(port))
	})
}

func (q *qp) ToRTS(a fabric.RTSAttr) error {
	return q.modify("ibv_modify_qp(RTS)", fabric.QPSRTS, func() C.int {
		return C.rp_to_rts(q.qp, C.uint32_t(a.SQPSN), C.int(a.Timeout), C.int(a.RetryCnt),
			C.int(a.RNRRetry), C.int(a.MaxRdAtomic))
	})
}

func (q *qp) PostSend(wrID uint64, m fabric.MR, off, length int) error {
	return q.post("ibv_post_send", wrID, m, off, length, false)
}

func (q *qp) PostRecv(wrID uint64, m fabric.MR, off, length int) error {
	return q.post("ibv_post_recv", wrID, m, off, length, true)
}

func (q *qp) post(verb string, wrID uint64, m fabric.MR, off, length int, recv bool) error {
	if recv && q.srq != nil {
		// librxe answers EINVAL itself (the QP's rq.queue is NULL), but
		// providers differ (mlx5 reports a full queue, ENOMEM): say it
		// the same way everywhere.
		return verr(verb, syscall.EINVAL, "QP takes its receives from an SRQ: it has no receive queue")
	}
	return q.postRaw(verb, wrID, m, off, length, recv)
}

// postRaw posts without the fabric's own SRQ check, so tests can see what
// the provider itself answers.
func (q *qp) postRaw(verb string, wrID uint64, m fabric.MR, off, length int, recv bool) error {
	x, err := sgeMR(verb, m, off, length)
	if err != nil {
		return err
	}
	q.life.RLock()
	defer q.life.RUnlock()
	if q.dead {
		return verr(verb, syscall.EINVAL, "QP destroyed")
	}
	addr := C.uint64_t(x.addr + uintptr(off))
	var r C.int
	if recv {
		r = C.rp_post_recv(q.qp, C.uint64_t(wrID), addr, C.uint32_t(length), C.uint32_t(x.lkey))
	} else {
		r = C.rp_post_send(q.qp, C.uint64_t(wrID), addr, C.uint32_t(length), C.uint32_t(x.lkey))
	}
	if r != 0 {
		return verr(verb, syscall.Errno(r), "")
	}
	return nil
}

// sgeMR checks that [off, off+length) lies in a live verbs MR.
func sgeMR(verb string, m fabric.MR, off, length int) (*mr, error) {
	x, ok := m.(*mr)
	if !ok || x == nil {
		return nil, verr(verb, syscall.EINVAL, "not a verbs MR")
	}
	if off < 0 || length < 0 || off+length > x.size {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("[%d:%d] outside the %d-byte MR", off, off+length, x.size))
	}
	if x.dead.Load() {
		return nil, verr(verb, syscall.EINVAL, "MR deregistered")
	}
	return x, nil
}

func (q *qp) Destroy() error {
	q.life.Lock()
	defer q.life.Unlock()
	if q.dead {
		return verr("ibv_destroy_qp", syscall.EINVAL, "already destroyed")
	}
	if r := C.ibv_destroy_qp(q.qp); r != 0 {
		return verr("ibv_destroy_qp", syscall.Errno(r), fmt.Sprintf("QP %d", q.qpn))
	}
	q.dead = true
	x := q.pd
	x.mu.Lock()
	delete(x.qps, q)
	x.mu.Unlock()
	return nil
}

// errnoOf is the errno a cgo call left, or def when the call failed without
// setting one.
func errnoOf(err error, def syscall.Errno) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	return def
}

func verr(verb string, errno syscall.Errno, detail string) error {
	return &fabric.VerbError{Verb: verb, Errno: errno, Detail: detail}
}
