//go:build verbs && cgo

// Definitions of the helpers declared in shim.h; see there for why they
// exist. Built only with the verbs tag, like the Go files that call them.

#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Verbs that return an errno value on some rdma-core versions and -1 with
// errno on others are normalised to a positive errno.
static int rp_ret(int r) {
	if (r == 0) return 0;
	if (r < 0) return errno ? errno : EIO;
	return r;
}

// ibv_query_port is a macro; cgo cannot call it directly.
int rp_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
	return rp_ret(ibv_query_port(c, port, a));
}

// rp_query_gid returns 0 and fills gid/type, or an errno. ENODATA means an
// empty table slot; EOPNOTSUPP (or ENOSYS) means the kernel has no GID
// entry query and the caller falls back to sysfs.
int rp_query_gid(struct ibv_context *c, uint32_t port, uint32_t idx, rp_gid *gid, uint32_t *type) {
	struct ibv_gid_entry e;
	memset(&e, 0, sizeof e);
	int r = ibv_query_gid_ex(c, port, idx, &e, 0);
	if (r != 0) return rp_ret(r);
	memcpy(gid->raw, e.gid.raw, 16);
	*type = e.gid_type;
	return 0;
}

int rp_query_gid_raw(struct ibv_context *c, uint8_t port, int idx, rp_gid *gid) {
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
int rp_channel_fd(struct ibv_comp_channel *ch) {
	int fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
	return fcntl(ch->fd, F_DUPFD_CLOEXEC, 0);
}

// rp_drain_events reads up to n CQ events, acking each at once so that
// ibv_destroy_cq (which waits for every reported event to be acked) never
// waits on Go. It returns how many it read (fewer than n only once the
// channel is empty) or -errno.
int rp_drain_events(struct ibv_comp_channel *ch, uintptr_t *ids, int n) {
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
struct ibv_cq *rp_create_cq(struct ibv_context *c, int cqe, uintptr_t id, struct ibv_comp_channel *ch) {
	return ibv_create_cq(c, cqe, (void *)id, ch, 0);
}

void rp_wc_of(const struct ibv_wc *w, rp_wc *out) {
	out->wr_id = w->wr_id;
	out->status = w->status;
	out->opcode = w->opcode;
	out->byte_len = w->byte_len;
	out->qp_num = w->qp_num;
	out->src_qp = w->src_qp;
	out->wc_flags = w->wc_flags;
}

int rp_poll(struct ibv_cq *cq, rp_wc *out, int n) {
	struct ibv_wc wc[RP_POLL_MAX];
	if (n > RP_POLL_MAX) n = RP_POLL_MAX;
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) rp_wc_of(&wc[i], &out[i]);
	return got;
}

int64_t rp_clock(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

// rp_spin polls cq until it has completions or ns have passed: one cgo
// call for a stretch of empty polls. *idle is the time it polled in
// vain: from its start to the poll that found completions, or to its
// end.
int rp_spin(struct ibv_cq *cq, rp_wc *out, int n, int64_t ns, int64_t *idle) {
	int64_t start = rp_clock(), end = start + ns;
	for (;;) {
		int got = rp_poll(cq, out, n);
		if (got != 0) {
			*idle = rp_clock() - start;
			return got;
		}
		int64_t now = rp_clock();
		if (now >= end) {
			*idle = now - start;
			return 0;
		}
	}
}

int rp_req_notify(struct ibv_cq *cq) {
	return rp_ret(ibv_req_notify_cq(cq, 0));
}

// The buffer is C memory because the device keeps its address: Go memory
// could move or be freed while registered. Its address is mr->addr.
struct ibv_mr *rp_reg_mr(struct ibv_pd *pd, size_t size, int access) {
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

int rp_dereg_mr(struct ibv_mr *mr) {
	void *buf = mr->addr;
	int r = rp_ret(ibv_dereg_mr(mr));
	if (r == 0) free(buf);
	return r;
}

// With an SRQ the QP has no receive queue: its receive caps must be 0.
struct ibv_qp *rp_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		struct ibv_srq *srq, uint32_t swr, uint32_t rwr, uint32_t ssge, uint32_t rsge, int ud) {
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
	a.qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC;
	a.sq_sig_all = 0;
	return ibv_create_qp(pd, &a);
}

int rp_to_init(struct ibv_qp *qp, int pkey_index, int port, int access) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = pkey_index;
	a.port_num = port;
	a.qp_access_flags = access;
	return rp_ret(ibv_modify_qp(qp, &a,
		IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

int rp_to_rtr(struct ibv_qp *qp, int mtu, uint32_t dest_qpn, uint32_t rq_psn,
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

int rp_to_rts(struct ibv_qp *qp, uint32_t sq_psn, int timeout, int retry_cnt,
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

int rp_qp_state(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0) return -1;
	return a.qp_state;
}

// Work requests live on the C stack: posting allocates nothing. A send
// with an address handle is a datagram from a UD QP to qpn, carrying
// qkey; without one it goes to the connected peer.
int rp_post_send_ud(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey,
		struct ibv_ah *ah, uint32_t qpn, uint32_t qkey) {
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qpn;
		wr.wr.ud.remote_qkey = qkey;
	}
	return rp_ret(ibv_post_send(qp, &wr, &bad));
}

int rp_post_send(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey) {
	return rp_post_send_ud(qp, wr_id, addr, len, lkey, NULL, 0, 0);
}

// rp_post_rdma posts a signaled RDMA WRITE (read = 0) or READ of one
// local buffer to or from the peer's memory at raddr.
int rp_post_rdma(struct ibv_qp *qp, int read, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey,
		uint64_t raddr, uint32_t rkey) {
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return rp_ret(ibv_post_send(qp, &wr, &bad));
}

int rp_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return rp_ret(ibv_post_recv(qp, &wr, &bad));
}

struct ibv_srq *rp_create_srq(struct ibv_pd *pd, uint32_t max_wr, uint32_t max_sge) {
	struct ibv_srq_init_attr a;
	memset(&a, 0, sizeof a);
	a.attr.max_wr = max_wr;
	a.attr.max_sge = max_sge;
	a.attr.srq_limit = 0;
	return ibv_create_srq(pd, &a);
}

int rp_post_srq_recv(struct ibv_srq *srq, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return rp_ret(ibv_post_srq_recv(srq, &wr, &bad));
}

int rp_destroy_srq(struct ibv_srq *srq) {
	return rp_ret(ibv_destroy_srq(srq));
}
