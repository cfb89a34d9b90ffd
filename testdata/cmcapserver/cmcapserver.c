// An rdma_cm server that holds at most -c connections and rejects every
// request above them (rdma_reject with 4 bytes of private data), the way
// a service with a fixed connection table answers: the capacity a probe
// of it must find exactly. With -e SIZE it also echoes: each connection
// keeps twice -d DEPTH (default 1) receives of SIZE bytes posted, for a
// client with DEPTH messages outstanding, and sends every message it
// receives back as it came. With -D MS it disconnects
// every connection it holds MS milliseconds after it first holds CAP,
// as a server that drops its clients does. Usage: cmcapserver -a ADDR
// -p PORT -c CAP [-e SIZE [-d DEPTH]] [-D MS]. It runs until killed.

#include <rdma/rdma_cma.h>

#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what) {
	perror(what);
	exit(1);
}

// conn is one held connection's echo buffers: 2·depth slots, each
// holding a receive posted, or a message received and being sent back.
struct conn {
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	char *buf;
};

static int size, depth = 1;

// A work request's id: connection slot, kind (0 receive, 1 send), buffer.
#define WRID(c, kind, j) (((uint64_t)(c) << 32) | ((uint64_t)(kind) << 31) | (uint64_t)(j))

static void post_recv(struct conn *c, int ci, int j) {
	struct ibv_sge sge = {.addr = (uintptr_t)(c->buf + (size_t)j * size), .length = size, .lkey = c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = WRID(ci, 0, j), .sg_list = &sge, .num_sge = 1}, *bad;
	if (ibv_post_recv(c->id->qp, &wr, &bad)) die("ibv_post_recv");
}

// echo sends slot j back as it came; its receive is posted again once
// the SEND completes. The client keeps at most depth messages
// outstanding, but a SEND's completion may trail its echo's arrival,
// so twice depth slots keep a receive posted for the next message (and
// if not, the client's RNR retries wait for one).
static void echo(struct conn *c, int ci, int j, uint32_t len) {
	struct ibv_sge sge = {.addr = (uintptr_t)(c->buf + (size_t)j * size), .length = len, .lkey = c->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = WRID(ci, 1, j), .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
	if (ibv_post_send(c->id->qp, &wr, &bad)) die("ibv_post_send");
}

int main(int argc, char **argv) {
	const char *addr = NULL, *port = NULL;
	int cap = 0, drop = -1, opt;
	while ((opt = getopt(argc, argv, "a:p:c:e:d:D:")) != -1) {
		switch (opt) {
		case 'a': addr = optarg; break;
		case 'p': port = optarg; break;
		case 'c': cap = atoi(optarg); break;
		case 'e': size = atoi(optarg); break;
		case 'd': depth = atoi(optarg); break;
		case 'D': drop = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (!addr || !port || cap < 1 || size < 0 || depth < 1) {
	usage:
		fprintf(stderr, "usage: %s -a ADDR -p PORT -c CAP [-e SIZE [-d DEPTH]] [-D MS]\n", argv[0]);
		return 2;
	}
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai;
	if (getaddrinfo(addr, port, &hints, &ai)) {
		fprintf(stderr, "bad address %s:%s\n", addr, port);
		return 2;
	}
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch) die("rdma_create_event_channel");
	struct rdma_cm_id *listen;
	if (rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP)) die("rdma_create_id");
	if (rdma_bind_addr(listen, ai->ai_addr)) die("rdma_bind_addr");
	if (rdma_listen(listen, 1024)) die("rdma_listen");
	printf("listening on %s:%s, capped at %d%s\n", addr, port, cap, size ? ", echoing" : "");
	fflush(stdout);

	struct conn *conns = calloc(cap, sizeof(*conns));
	if (!conns) die("calloc");
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct ibv_comp_channel *cc = NULL;
	int held = 0;
	struct timespec full = {0}; // when it first held cap, for -D
	for (;;) {
		int wait = -1;
		if (drop >= 0 && full.tv_sec) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			long ms = (now.tv_sec - full.tv_sec) * 1000 + (now.tv_nsec - full.tv_nsec) / 1000000;
			if (ms >= drop) {
				for (int i = 0; i < cap; i++)
					if (conns[i].id) rdma_disconnect(conns[i].id);
				printf("dropped %d connections\n", held);
				fflush(stdout);
				drop = -1;
			} else {
				wait = drop - ms;
			}
		}
		struct pollfd fds[2] = {{.fd = ch->fd, .events = POLLIN}, {.fd = cc ? cc->fd : -1, .events = POLLIN}};
		if (poll(fds, 2, wait) < 0) die("poll");
		if (fds[1].revents) {
			struct ibv_cq *ecq;
			void *ctx;
			if (ibv_get_cq_event(cc, &ecq, &ctx)) die("ibv_get_cq_event");
			ibv_ack_cq_events(ecq, 1);
			if (ibv_req_notify_cq(cq, 0)) die("ibv_req_notify_cq");
			struct ibv_wc wc[16];
			int n;
			while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
				for (int i = 0; i < n; i++) {
					int ci = wc[i].wr_id >> 32, send = (wc[i].wr_id >> 31) & 1, j = wc[i].wr_id & 0x7fffffff;
					struct conn *c = &conns[ci];
					if (wc[i].status != IBV_WC_SUCCESS || !c->id)
						continue; // a connection that went: its flushed requests
					if (send)
						post_recv(c, ci, j);
					else
						echo(c, ci, j, wc[i].byte_len);
				}
			}
			if (n < 0) die("ibv_poll_cq");
		}
		if (!fds[0].revents) continue;
		struct rdma_cm_event *e;
		if (rdma_get_cm_event(ch, &e)) die("rdma_get_cm_event");
		struct rdma_cm_id *id = e->id;
		enum rdma_cm_event_type type = e->event;
		rdma_ack_cm_event(e);
		switch (type) {
		case RDMA_CM_EVENT_CONNECT_REQUEST: {
			if (held >= cap) {
				static const char full[4] = "full";
				rdma_reject(id, full, sizeof(full));
				rdma_destroy_id(id);
				break;
			}
			if (!pd) {
				pd = ibv_alloc_pd(id->verbs);
				cc = pd ? ibv_create_comp_channel(id->verbs) : NULL;
				// Every connection's receives and sends fit.
				cq = cc ? ibv_create_cq(id->verbs, 64 + cap * 4 * depth, NULL, cc, 0) : NULL;
				if (!cq || ibv_req_notify_cq(cq, 0)) die("ibv_alloc_pd/ibv_create_cq");
			}
			int ci = 0;
			while (conns[ci].id) ci++;
			struct conn *c = &conns[ci];
			struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				.cap = {.max_send_wr = 2 * depth, .max_recv_wr = 2 * depth, .max_send_sge = 1, .max_recv_sge = 1}};
			if (rdma_create_qp(id, pd, &qa)) die("rdma_create_qp");
			id->context = c;
			c->id = id;
			if (size) {
				c->buf = calloc(2 * depth, size);
				if (!c->buf) die("calloc");
				c->mr = ibv_reg_mr(pd, c->buf, (size_t)2 * depth * size, IBV_ACCESS_LOCAL_WRITE);
				if (!c->mr) die("ibv_reg_mr");
				for (int j = 0; j < 2 * depth; j++) post_recv(c, ci, j);
			}
			struct rdma_conn_param cp = {.responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7};
			if (rdma_accept(id, &cp)) die("rdma_accept");
			if (++held == cap && !full.tv_sec) clock_gettime(CLOCK_MONOTONIC, &full);
			break;
		}
		case RDMA_CM_EVENT_DISCONNECTED: {
			struct conn *c = id->context;
			rdma_disconnect(id);
			rdma_destroy_qp(id);
			if (c->mr) ibv_dereg_mr(c->mr);
			free(c->buf);
			rdma_destroy_id(id);
			memset(c, 0, sizeof(*c));
			held--;
			break;
		}
		default:
			break;
		}
	}
}
