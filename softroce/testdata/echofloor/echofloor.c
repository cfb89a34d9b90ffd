// echofloor: the floor under rdmaprobe's 1-client echo, in plain C.
//
//	echofloor bare|verified SIZE N
//
// One process, two threads, two RC QPs on the first verbs device (port 1,
// GID index 1: rxe0 in the Soft-RoCE guest), busy-polled. The client
// sends N SEND messages of SIZE bytes, one at a time; the server sends
// each back from the buffer it arrived in. This is the echo rdmaprobe's
// traffic phase runs (fabric/verbs' ping.c and echo.c), with nothing of
// rdmaprobe around it, and each side in the order that puts least on the
// round trip: the server echoes before it reposts its receive, and the
// client posts the next message (written beforehand) as soon as the echo
// lands, then checks the echo. "verified" adds what rdmaprobe does to
// every message (fabric/verbs/payload.h: the client writes each message, both
// ends check every byte); "bare" checks nothing, like perftest.
//
// A message's round trip runs from its post to the poll that finds its
// echo, as rdmaprobe measures it. It prints one line:
//
//	echofloor mode=verified size=4096 n=20000 p50_us=59.5 p90_us=... p99_us=... min_us=...
//
// BenchmarkEchoFloor (softroce/floor_linux_test.go, `make floor`) builds it on the host and
// runs it in the guest in turns with perftest's ib_send_lat.

#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "payload.h"

#define GID_INDEX 1
#define RECVS 2 // receive buffers per side

struct end {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf; // RECVS receive buffers, then 2 send buffers
	uint32_t psn;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static enum ibv_mtu mtu;
static int size, n, verified;
static struct end cli, srv;

static void die(const char *what) {
	fprintf(stderr, "echofloor: %s\n", what);
	exit(1);
}

static uint8_t *at(struct end *e, int b) { return e->buf + (size_t)b * size; }

static void post_recv(struct end *e, int b) {
	struct ibv_sge s = {(uintptr_t)at(e, b), (uint32_t)size, e->mr->lkey};
	struct ibv_recv_wr w = {.wr_id = (uint64_t)b, .sg_list = &s, .num_sge = 1}, *bad;
	if (ibv_post_recv(e->qp, &w, &bad)) die("ibv_post_recv");
}

static void post_send(struct end *e, int b) {
	struct ibv_sge s = {(uintptr_t)at(e, b), (uint32_t)size, e->mr->lkey};
	struct ibv_send_wr w = {.wr_id = (uint64_t)b, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED}, *bad;
	if (ibv_post_send(e->qp, &w, &bad)) die("ibv_post_send");
}

// poll1 busy-polls cq for one successful completion.
static void poll1(struct ibv_cq *cq, struct ibv_wc *wc) {
	for (;;) {
		int k = ibv_poll_cq(cq, 1, wc);
		if (k < 0) die("ibv_poll_cq");
		if (k == 0) continue;
		if (wc->status != IBV_WC_SUCCESS) {
			fprintf(stderr, "echofloor: completion: %s\n", ibv_wc_status_str(wc->status));
			exit(1);
		}
		return;
	}
}

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void make_end(struct end *e) {
	size_t len = (size_t)(RECVS + 2) * size;
	if (posix_memalign((void **)&e->buf, 4096, len)) die("posix_memalign");
	memset(e->buf, 0, len);
	e->mr = ibv_reg_mr(pd, e->buf, len, IBV_ACCESS_LOCAL_WRITE);
	e->scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	e->rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!e->mr || !e->scq || !e->rcq) die("ibv_reg_mr/ibv_create_cq");
	struct ibv_qp_init_attr a = {.send_cq = e->scq, .recv_cq = e->rcq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4, .max_recv_wr = RECVS, .max_send_sge = 1, .max_recv_sge = 1}};
	e->qp = ibv_create_qp(pd, &a);
	if (!e->qp) die("ibv_create_qp");
	e->psn = (uint32_t)rand() & 0xffffff;
	struct ibv_qp_attr x = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	if (ibv_modify_qp(e->qp, &x, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
}

static void connect_end(struct end *e, struct end *peer) {
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = peer->qp->qp_num,
		.rq_psn = peer->psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = {.is_global = 1, .port_num = 1,
			.grh = {.dgid = gid, .sgid_index = GID_INDEX, .hop_limit = 64}}};
	if (ibv_modify_qp(e->qp, &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .sq_psn = e->psn, .timeout = 14, .retry_cnt = 7,
		.rnr_retry = 7, .max_rd_atomic = 1};
	if (ibv_modify_qp(e->qp, &s, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

// server echoes n messages: the echo first, then the receive goes back,
// then (verified) the check, while the client is still on its way.
static void *server(void *arg) {
	(void)arg;
	struct ibv_wc wc;
	for (int i = 0; i < n; i++) {
		poll1(srv.rcq, &wc);
		int b = (int)wc.wr_id;
		if (wc.byte_len != (uint32_t)size) die("server: short message");
		post_send(&srv, b);
		poll1(srv.scq, &wc);
		post_recv(&srv, b);
		uint64_t seq;
		if (verified && rp_payload_check(at(&srv, b), size, &seq) != 0) die("server: bad message");
	}
	return NULL;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
	if (argc != 4 || (strcmp(argv[1], "bare") && strcmp(argv[1], "verified")))
		die("usage: echofloor bare|verified SIZE N");
	verified = strcmp(argv[1], "verified") == 0;
	size = atoi(argv[2]);
	n = atoi(argv[3]);
	if (size < RP_PAYLOAD_HEADER || n < 1) die("SIZE must be >= 12 and N >= 1");
	srand((unsigned)time(NULL));
	int nd;
	struct ibv_device **list = ibv_get_device_list(&nd);
	if (!list || nd == 0) die("no verbs device");
	ctx = ibv_open_device(list[0]);
	if (!ctx) die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	struct ibv_port_attr pa;
	if (!pd || ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, GID_INDEX, &gid)) die("port 1");
	mtu = pa.active_mtu;
	make_end(&cli);
	make_end(&srv);
	connect_end(&cli, &srv);
	connect_end(&srv, &cli);
	for (int b = 0; b < RECVS; b++) {
		post_recv(&srv, b);
		post_recv(&cli, b);
	}
	pthread_t t;
	if (pthread_create(&t, NULL, server, NULL)) die("pthread_create");

	double *lat = malloc(sizeof(double) * n);
	if (!lat) die("malloc");
	// Send buffers RECVS and RECVS+1 take turns: the one not in flight is
	// written while the echo is on its way.
	rp_payload_fill(at(&cli, RECVS), 1, size);
	rp_payload_fill(at(&cli, RECVS + 1), 2, size);
	struct ibv_wc wc;
	int sb = 0;
	double t0 = now_us();
	post_send(&cli, RECVS);
	for (int i = 0; i < n; i++) {
		poll1(cli.rcq, &wc);
		double t1 = now_us();
		lat[i] = t1 - t0;
		int rb = (int)wc.wr_id;
		poll1(cli.scq, &wc); // message i's own completion
		sb ^= 1;
		t0 = t1;
		if (i + 1 < n) post_send(&cli, RECVS + sb);
		uint64_t seq;
		if (verified && (rp_payload_check(at(&cli, rb), size, &seq) != 0 || seq != (uint64_t)i + 1))
			die("client: bad echo");
		post_recv(&cli, rb);
		if (verified) rp_payload_fill(at(&cli, RECVS + (sb ^ 1)), (uint64_t)i + 3, size);
	}
	pthread_join(t, NULL);
	qsort(lat, n, sizeof(double), cmp);
	printf("echofloor mode=%s size=%d n=%d p50_us=%.2f p90_us=%.2f p99_us=%.2f min_us=%.2f\n", argv[1], size, n,
		lat[n / 2], lat[(long)n * 9 / 10], lat[(long)n * 99 / 100], lat[0]);
	return 0;
}
