//go:build verbs && cgo

// See cm.h and cm.go.

#include "cm.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

int rp_cm_open(rp_cm_gen **out, int depth, int cqe) {
	rp_cm_gen *g = calloc(1, sizeof(*g));
	if (!g) return -ENOMEM;
	g->depth = depth;
	g->cqe = cqe;
	g->ch = rdma_create_event_channel();
	if (!g->ch) {
		int e = errno;
		free(g);
		return -e;
	}
	// Non-blocking, so that rp_cm_next's poll bounds every wait.
	int fl = fcntl(g->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(g->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;
		rdma_destroy_event_channel(g->ch);
		free(g);
		return -e;
	}
	*out = g;
	return 0;
}

void rp_cm_free(rp_cm_gen *g) {
	for (int i = 0; i < g->ndevs; i++) {
		ibv_destroy_cq(g->devs[i].cq);
		ibv_destroy_comp_channel(g->devs[i].cc);
		ibv_dealloc_pd(g->devs[i].pd);
	}
	rdma_destroy_event_channel(g->ch);
	free(g);
}

int rp_cm_start(rp_cm_gen *g, uint64_t idx, const char *host, const char *port, int timeout_ms, struct rdma_cm_id **out) {
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0) return -EINVAL;
	struct rdma_cm_id *id;
	if (rdma_create_id(g->ch, &id, (void *)(uintptr_t)idx, RDMA_PS_TCP) != 0) {
		freeaddrinfo(ai);
		return -errno;
	}
	int r = rdma_resolve_addr(id, NULL, ai->ai_addr, timeout_ms);
	int e = errno;
	freeaddrinfo(ai);
	if (r != 0) {
		rdma_destroy_id(id);
		return -e;
	}
	*out = id;
	return 0;
}

int rp_cm_route(struct rdma_cm_id *id, int timeout_ms) {
	return rdma_resolve_route(id, timeout_ms) ? -errno : 0;
}

// rp_cm_dev_of returns the PD and CQ of id's device, made on first use.
static rp_cm_dev *rp_cm_dev_of(rp_cm_gen *g, struct ibv_context *verbs, int *err) {
	for (int i = 0; i < g->ndevs; i++)
		if (g->devs[i].verbs == verbs) return &g->devs[i];
	if (g->ndevs == RP_CM_DEVS) {
		*err = -ENOSPC;
		return NULL;
	}
	rp_cm_dev *d = &g->devs[g->ndevs];
	d->verbs = verbs;
	d->pd = ibv_alloc_pd(verbs);
	if (!d->pd) {
		*err = -errno;
		return NULL;
	}
	d->cc = ibv_create_comp_channel(verbs);
	if (!d->cc) {
		*err = -errno;
		ibv_dealloc_pd(d->pd);
		return NULL;
	}
	// Non-blocking, so that rp_cm_poll's poll bounds every wait.
	int fl = fcntl(d->cc->fd, F_GETFL);
	// A CQ as large as asked, or as the device allows.
	int cqe = g->cqe;
	struct ibv_device_attr a;
	if (ibv_query_device(verbs, &a) == 0 && cqe > a.max_cqe) cqe = a.max_cqe;
	d->cq = fl < 0 || fcntl(d->cc->fd, F_SETFL, fl | O_NONBLOCK) < 0 ? NULL : ibv_create_cq(verbs, cqe, NULL, d->cc, 0);
	if (!d->cq) {
		*err = -errno;
		ibv_destroy_comp_channel(d->cc);
		ibv_dealloc_pd(d->pd);
		return NULL;
	}
	g->ndevs++;
	return d;
}

int rp_cm_qp(rp_cm_gen *g, struct rdma_cm_id *id, uint32_t *qpn) {
	int err = 0;
	rp_cm_dev *d = rp_cm_dev_of(g, id->verbs, &err);
	if (!d) return err;
	struct ibv_qp_init_attr attr = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4 * g->depth, .max_recv_wr = g->depth, .max_send_sge = 1, .max_recv_sge = 1},
	};
	if (rdma_create_qp(id, d->pd, &attr) != 0) return -errno;
	*qpn = id->qp->qp_num;
	return 0;
}

int rp_cm_connect(struct rdma_cm_id *id, const void *pdata, int pdlen) {
	struct rdma_conn_param p = {
		.private_data = pdlen ? pdata : NULL,
		.private_data_len = (uint8_t)pdlen,
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	return rdma_connect(id, &p) ? -errno : 0;
}

int rp_cm_next(rp_cm_gen *g, int timeout_ms, rp_cm_ev *ev) {
	struct rdma_cm_event *e;
	while (rdma_get_cm_event(g->ch, &e) != 0) {
		if (errno != EAGAIN) return -errno;
		struct pollfd p = {.fd = g->ch->fd, .events = POLLIN};
		int r = poll(&p, 1, timeout_ms);
		if (r < 0) return errno == EINTR ? 0 : -errno;
		if (r == 0) return 0;
		timeout_ms = 0;
	}
	ev->id = e->id;
	ev->idx = (uint64_t)(uintptr_t)e->id->context;
	ev->event = e->event;
	ev->status = e->status;
	ev->pdlen = e->param.conn.private_data_len;
	ev->qpn = e->param.conn.qp_num;
	rdma_ack_cm_event(e);
	return 1;
}

void rp_cm_close(struct rdma_cm_id *id, int connected) {
	if (connected) rdma_disconnect(id);
	if (id->qp) rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

int rp_cm_reg(rp_cm_gen *g, struct rdma_cm_id *id, void *buf, size_t len, struct ibv_mr **out) {
	int err = 0;
	rp_cm_dev *d = rp_cm_dev_of(g, id->verbs, &err);
	if (!d) return err;
	*out = ibv_reg_mr(d->pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	return *out ? 0 : -errno;
}

int rp_cm_post_recv(struct rdma_cm_id *id, struct ibv_mr *mr, void *addr, uint32_t len, uint64_t wr_id) {
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
	return -ibv_post_recv(id->qp, &wr, &bad);
}

int rp_cm_post_send(struct rdma_cm_id *id, struct ibv_mr *mr, void *addr, uint32_t len, uint64_t wr_id) {
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED}, *bad;
	return -ibv_post_send(id->qp, &wr, &bad);
}

// rp_cm_drain copies what the CQs hold into out.
static int rp_cm_drain(rp_cm_gen *g, rp_cm_wc *out, int max) {
	struct ibv_wc wc[32];
	int got = 0;
	for (int i = 0; i < g->ndevs && got < max; i++) {
		int n = ibv_poll_cq(g->devs[i].cq, max - got < 32 ? max - got : 32, wc);
		if (n < 0) return -EIO;
		for (int j = 0; j < n; j++)
			out[got++] = (rp_cm_wc){.wr_id = wc[j].wr_id, .status = wc[j].status, .byte_len = wc[j].byte_len};
	}
	return got;
}

int rp_cm_poll(rp_cm_gen *g, int timeout_ms, rp_cm_wc *out, int max) {
	int got = rp_cm_drain(g, out, max);
	if (got != 0) return got;
	// Nothing: ask for a notification, look once more (a completion
	// that came before the request raises none), then wait for one.
	struct pollfd fds[RP_CM_DEVS];
	for (int i = 0; i < g->ndevs; i++) {
		rp_cm_dev *d = &g->devs[i];
		if (!d->armed) {
			if (ibv_req_notify_cq(d->cq, 0)) return -errno;
			d->armed = 1;
		}
		fds[i] = (struct pollfd){.fd = d->cc->fd, .events = POLLIN};
	}
	if ((got = rp_cm_drain(g, out, max)) != 0) return got;
	int r = poll(fds, g->ndevs, timeout_ms);
	if (r < 0) return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < g->ndevs; i++) {
		struct ibv_cq *cq;
		void *ctx;
		if (fds[i].revents && ibv_get_cq_event(g->devs[i].cc, &cq, &ctx) == 0) {
			ibv_ack_cq_events(cq, 1);
			g->devs[i].armed = 0;
		}
	}
	return rp_cm_drain(g, out, max);
}
