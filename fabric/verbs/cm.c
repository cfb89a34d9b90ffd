//go:build verbs && cgo

// See cm.h and cm.go.

#include "cm.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>

int rp_cm_channel(struct rdma_event_channel **out) {
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch) return -errno;
	// Non-blocking, so that rp_cm_next's poll bounds every wait.
	int fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;
		rdma_destroy_event_channel(ch);
		return -e;
	}
	*out = ch;
	return 0;
}

int rp_cm_start(struct rdma_event_channel *ch, uint64_t ctx, const char *host, const char *port, int timeout_ms,
		struct rdma_cm_id **out) {
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0) return -EINVAL;
	struct rdma_cm_id *id;
	if (rdma_create_id(ch, &id, (void *)(uintptr_t)ctx, RDMA_PS_TCP) != 0) {
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

int rp_cm_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		uint32_t swr, uint32_t rwr, uint32_t ssge, uint32_t rsge) {
	struct ibv_qp_init_attr attr = {
		.send_cq = scq,
		.recv_cq = rcq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = swr, .max_recv_wr = rwr, .max_send_sge = ssge, .max_recv_sge = rsge},
	};
	return rdma_create_qp(id, pd, &attr) ? -errno : 0;
}

// rp_cm_destroy_qp is rdma_destroy_qp, which returns nothing: the CQs
// are the caller's, so destroying the QP is all it would do.
int rp_cm_destroy_qp(struct rdma_cm_id *id) {
	int r = ibv_destroy_qp(id->qp);
	if (r == 0) id->qp = NULL;
	return -r;
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

int rp_cm_disconnect(struct rdma_cm_id *id) { return rdma_disconnect(id) ? -errno : 0; }

int rp_cm_destroy(struct rdma_cm_id *id) { return rdma_destroy_id(id) ? -errno : 0; }

int rp_cm_next(struct rdma_event_channel *ch, int timeout_ms, rp_cm_ev *ev) {
	struct rdma_cm_event *e;
	while (rdma_get_cm_event(ch, &e) != 0) {
		if (errno != EAGAIN) return -errno;
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};
		int r = poll(&p, 1, timeout_ms);
		if (r < 0) return errno == EINTR ? 0 : -errno;
		if (r == 0) return 0;
		timeout_ms = 0;
	}
	ev->id = e->id;
	ev->ctx = (uint64_t)(uintptr_t)e->id->context;
	ev->event = e->event;
	ev->status = e->status;
	ev->pdlen = e->param.conn.private_data_len;
	ev->qpn = e->param.conn.qp_num;
	rdma_ack_cm_event(e);
	return 1;
}
