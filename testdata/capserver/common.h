/*
 * What capserver and capclient share: the exchange line, PSNs, and the
 * RC QP's INIT -> RTR -> RTS moves. No rdma_cm: the peers exchange
 * {QPN, PSN, GID} over their own TCP connection, as the server of
 * linjiw/rdma-multi-client does (over TLS there), so the pair runs on any rxe device and
 * GID index, rxe0 on lo (index 1) included.
 */
#ifndef CAP_COMMON_H
#define CAP_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <infiniband/verbs.h>

#define MSG_SIZE 64
#define LINE_MAX_LEN 256

struct peer {
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
};

/* errname is "ENOMEM" for ENOMEM: log lines carry both the name and the
 * text so a harness can find the errno in a client's or server's output. */
static inline const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

static inline uint32_t random_psn(void)
{
	uint32_t v = 0;
	if (getrandom(&v, sizeof v, 0) != sizeof v) {
		perror("getrandom");
		exit(5);
	}
	return v & 0xffffff;
}

/* format_peer writes "QPN PSN GID" with the GID as 32 hex digits. */
static inline void format_peer(char *buf, size_t n, const char *verb, const struct peer *p)
{
	int off = snprintf(buf, n, "%s %u %u ", verb, p->qpn, p->psn);
	for (int i = 0; i < 16 && off + 3 < (int)n; i++)
		off += snprintf(buf + off, n - off, "%02x", p->gid.raw[i]);
	snprintf(buf + off, n - off, "\n");
}

/* parse_peer reads what format_peer wrote after its verb. */
static inline int parse_peer(const char *s, struct peer *p)
{
	char hex[33];
	if (sscanf(s, "%" SCNu32 " %" SCNu32 " %32s", &p->qpn, &p->psn, hex) != 3 || strlen(hex) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		p->gid.raw[i] = (uint8_t)v;
	}
	p->psn &= 0xffffff;
	return 0;
}

static inline struct ibv_context *open_device(const char *name)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "ibv_get_device_list: %s (%s)\n", strerror(errno), errname(errno));
		return NULL;
	}
	struct ibv_context *ctx = NULL;
	for (int i = 0; i < n; i++) {
		if (name && strcmp(ibv_get_device_name(list[i]), name) != 0)
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			fprintf(stderr, "ibv_open_device %s: %s (%s)\n", ibv_get_device_name(list[i]), strerror(errno), errname(errno));
		break;
	}
	if (!ctx && n > 0 && name)
		fprintf(stderr, "no RDMA device named %s\n", name);
	if (n == 0)
		fprintf(stderr, "no RDMA device\n");
	ibv_free_device_list(list);
	return ctx;
}

static inline int qp_to_init(struct ibv_qp *qp, int port)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = port,
		.qp_access_flags = 0,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static inline int qp_to_rtr(struct ibv_qp *qp, int port, int gid_index, enum ibv_mtu mtu, const struct peer *r)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = r->qpn,
		.rq_psn = r->psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = { .dgid = r->gid, .sgid_index = gid_index, .hop_limit = 64 },
			.port_num = port,
		},
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static inline int qp_to_rts(struct ibv_qp *qp, uint32_t psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.sq_psn = psn,
		.max_rd_atomic = 1,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int post_recv(struct ibv_qp *qp, struct ibv_mr *mr, void *buf, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MSG_SIZE, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static inline int post_send(struct ibv_qp *qp, struct ibv_mr *mr, void *buf, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	return ibv_post_send(qp, &wr, &bad);
}

#endif
