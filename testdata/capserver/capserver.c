/*
 * capserver: a verbs echo server whose capacity is compiled in, the shape
 * of linjiw/rdma-multi-client's server (a fixed client table sized by
 * #define MAX_CLIENTS, one RC QP + 2 CQs + 2 MRs per client), written as
 * a test fixture for probing servers rdmaprobe did not write.
 *
 *   gcc -O2 -DMAX_CLIENTS=40 [-DBACKLOG=10 -DHANDSHAKE_MS=300] -o capserver capserver.c -libverbs
 *   capserver [-d DEVICE] [-g GID_INDEX] [-i IB_PORT] [-p TCP_PORT]
 *
 * Per client, over TCP (one line each way, see common.h):
 *   client: HELLO <qpn> <psn> <gid>
 *   server: OK <qpn> <psn> <gid>        the QP is at RTS, a receive posted
 *           FULL <MAX_CLIENTS>          client MAX_CLIENTS+1: refused
 *           ERR <what>: <text> (<ENAME>) a verbs call or accept failed
 * then every RC SEND the client makes is echoed back. A client leaves by
 * closing its TCP connection; its QP, CQs and MRs are destroyed then.
 *
 * One thread and one poll(2) loop: the listening socket, one completion
 * channel for every CQ, and each client's socket. When accept() fails
 * with EMFILE the server closes a reserved descriptor, accepts, tells the
 * client "ERR accept: ... (EMFILE)" and closes it, so a file limit shows
 * as a refusal that names the errno rather than a connection left
 * hanging in the backlog.
 *
 * Descriptors in use before the first client: stdin, stdout, stderr, the
 * listening socket, the reserved one, the device's command and async
 * fds, and the completion channel: 8. With RLIMIT_NOFILE = 8 + K the
 * server holds exactly K clients (each holds one socket).
 *
 * SIGTERM or SIGINT stops it: every client is released, a summary
 * printed, exit status 0.
 */
#include "common.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef MAX_CLIENTS
#define MAX_CLIENTS 10
#endif

/* The listen queue's length: a small one (the seed project's is 10)
 * overflows when clients dial faster than the one thread accepts. */
#ifndef BACKLOG
#define BACKLOG 4096
#endif

/* Time spent after each accept before the next, standing in for the TLS
 * handshake the seed project's one thread does there: with a small
 * BACKLOG it makes the queue overflow whatever the machine's speed. */
#ifndef HANDSHAKE_MS
#define HANDSHAKE_MS 0
#endif

enum { FREE, HELLO, CONNECTED };

struct client {
	int state;
	int fd;
	char line[LINE_MAX_LEN];
	size_t len;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *smr, *rmr;
	char *sbuf, *rbuf;
};

static struct client clients[MAX_CLIENTS];
static struct pollfd pfds[2 + MAX_CLIENTS];
static int slot[2 + MAX_CLIENTS]; /* pfds index → client */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_comp_channel *channel;
static int ib_port = 1, gid_index = 0;
static enum ibv_mtu mtu;
static union ibv_gid my_gid;
static int active, reserve_fd = -1;
static unsigned long served, refused, failed;
static volatile sig_atomic_t stop;

static void on_signal(int sig) { (void)sig; stop = 1; }

static void say(int fd, const char *s) { (void)!write(fd, s, strlen(s)); }

static void release(struct client *c)
{
	if (c->qp)
		ibv_destroy_qp(c->qp);
	if (c->smr)
		ibv_dereg_mr(c->smr);
	if (c->rmr)
		ibv_dereg_mr(c->rmr);
	if (c->scq)
		ibv_destroy_cq(c->scq);
	if (c->rcq)
		ibv_destroy_cq(c->rcq);
	free(c->sbuf);
	free(c->rbuf);
	if (c->fd >= 0)
		close(c->fd);
	memset(c, 0, sizeof *c);
	c->fd = -1;
	c->state = FREE;
	active--;
}

/* fail tells the client and the log which call failed, then drops it. */
static void fail(struct client *c, const char *what, int e)
{
	char msg[LINE_MAX_LEN];
	snprintf(msg, sizeof msg, "ERR %s: %s (%s)\n", what, strerror(e), errname(e));
	say(c->fd, msg);
	fprintf(stderr, "capserver: client %ld: %s", (long)(c - clients), msg + 4);
	failed++;
	release(c);
}

/* setup creates the client's verbs objects and answers its HELLO. */
static void setup(struct client *c, const struct peer *remote)
{
	long id = c - clients;
	if (!(c->scq = ibv_create_cq(ctx, 4, c, channel, 0)))
		return fail(c, "ibv_create_cq", errno);
	if (!(c->rcq = ibv_create_cq(ctx, 4, c, channel, 0)))
		return fail(c, "ibv_create_cq", errno);
	if (ibv_req_notify_cq(c->scq, 0) || ibv_req_notify_cq(c->rcq, 0))
		return fail(c, "ibv_req_notify_cq", errno);
	c->sbuf = calloc(1, MSG_SIZE);
	c->rbuf = calloc(1, MSG_SIZE);
	if (!c->sbuf || !c->rbuf)
		return fail(c, "calloc", ENOMEM);
	if (!(c->smr = ibv_reg_mr(pd, c->sbuf, MSG_SIZE, IBV_ACCESS_LOCAL_WRITE)))
		return fail(c, "ibv_reg_mr", errno);
	if (!(c->rmr = ibv_reg_mr(pd, c->rbuf, MSG_SIZE, IBV_ACCESS_LOCAL_WRITE)))
		return fail(c, "ibv_reg_mr", errno);
	struct ibv_qp_init_attr qa = {
		.send_cq = c->scq, .recv_cq = c->rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (!(c->qp = ibv_create_qp(pd, &qa)))
		return fail(c, "ibv_create_qp", errno);
	int r;
	if ((r = qp_to_init(c->qp, ib_port)))
		return fail(c, "modify QP to INIT", r);
	if ((r = post_recv(c->qp, c->rmr, c->rbuf, id)))
		return fail(c, "ibv_post_recv", r);
	if ((r = qp_to_rtr(c->qp, ib_port, gid_index, mtu, remote)))
		return fail(c, "modify QP to RTR", r);
	struct peer me = { .qpn = c->qp->qp_num, .psn = random_psn(), .gid = my_gid };
	if ((r = qp_to_rts(c->qp, me.psn)))
		return fail(c, "modify QP to RTS", r);
	char line[LINE_MAX_LEN];
	format_peer(line, sizeof line, "OK", &me);
	say(c->fd, line);
	c->state = CONNECTED;
	served++;
}

static void on_accept(int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if ((e == EMFILE || e == ENFILE) && reserve_fd >= 0) {
			close(reserve_fd);
			fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				char msg[LINE_MAX_LEN];
				snprintf(msg, sizeof msg, "ERR accept: %s (%s)\n", strerror(e), errname(e));
				say(fd, msg);
				close(fd);
				fprintf(stderr, "capserver: refused a client, %s", msg + 4);
				refused++;
			}
			reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		} else if (e != EAGAIN && e != EINTR && e != ECONNABORTED) {
			fprintf(stderr, "capserver: accept: %s (%s)\n", strerror(e), errname(e));
		}
		return;
	}
	if (active >= MAX_CLIENTS) {
		char msg[64];
		snprintf(msg, sizeof msg, "FULL %d\n", MAX_CLIENTS);
		say(fd, msg);
		close(fd);
		refused++;
		fprintf(stderr, "capserver: refused a client: at capacity (MAX_CLIENTS=%d)\n", MAX_CLIENTS);
		return;
	}
	for (int i = 0; i < MAX_CLIENTS; i++) {
		if (clients[i].state != FREE)
			continue;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		fcntl(fd, F_SETFL, O_NONBLOCK);
		if (HANDSHAKE_MS > 0)
			usleep(HANDSHAKE_MS * 1000);
		clients[i].fd = fd;
		clients[i].state = HELLO;
		clients[i].len = 0;
		active++;
		return;
	}
}

static void on_socket(struct client *c)
{
	char buf[LINE_MAX_LEN];
	ssize_t n = read(c->fd, buf, sizeof buf);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		release(c); /* the client left */
		return;
	}
	if (c->state != HELLO)
		return; /* nothing else is said over TCP */
	if (c->len + n >= sizeof c->line) {
		say(c->fd, "ERR exchange: line too long (EPROTO)\n");
		failed++;
		release(c);
		return;
	}
	memcpy(c->line + c->len, buf, n);
	c->len += n;
	c->line[c->len] = 0;
	char *nl = strchr(c->line, '\n');
	if (!nl)
		return;
	*nl = 0;
	struct peer remote;
	if (strncmp(c->line, "HELLO ", 6) != 0 || parse_peer(c->line + 6, &remote) != 0) {
		say(c->fd, "ERR exchange: malformed HELLO (EPROTO)\n");
		failed++;
		release(c);
		return;
	}
	setup(c, &remote);
}

/* on_completions echoes every message received back to its sender. */
static void on_completions(void)
{
	struct ibv_cq *cq;
	void *cq_ctx;
	while (ibv_get_cq_event(channel, &cq, &cq_ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		struct client *c = cq_ctx;
		ibv_req_notify_cq(cq, 0);
		struct ibv_wc wc;
		while (ibv_poll_cq(cq, 1, &wc) > 0) {
			if (wc.status != IBV_WC_SUCCESS) {
				fprintf(stderr, "capserver: client %ld: completion %s\n", (long)(c - clients), ibv_wc_status_str(wc.status));
				continue;
			}
			if (wc.opcode != IBV_WC_RECV || c->state != CONNECTED)
				continue;
			memcpy(c->sbuf, c->rbuf, wc.byte_len);
			int r = post_send(c->qp, c->smr, c->sbuf, wc.byte_len, wc.wr_id);
			if (!r)
				r = post_recv(c->qp, c->rmr, c->rbuf, wc.wr_id);
			if (r)
				fprintf(stderr, "capserver: client %ld: echo: %s (%s)\n", (long)(c - clients), strerror(r), errname(r));
		}
	}
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	int port = 4433, opt;
	while ((opt = getopt(argc, argv, "d:g:i:p:")) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 'i': ib_port = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-d device] [-g gid_index] [-i ib_port] [-p tcp_port]\n", argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < MAX_CLIENTS; i++)
		clients[i].fd = -1;

	if (!(ctx = open_device(dev)))
		return 1;
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, ib_port, &pa) || pa.state != IBV_PORT_ACTIVE) {
		fprintf(stderr, "capserver: port %d of %s is not active\n", ib_port, ibv_get_device_name(ctx->device));
		return 1;
	}
	mtu = pa.active_mtu;
	if (ibv_query_gid(ctx, ib_port, gid_index, &my_gid)) {
		fprintf(stderr, "capserver: GID index %d: %s\n", gid_index, strerror(errno));
		return 1;
	}
	if (!(pd = ibv_alloc_pd(ctx)) || !(channel = ibv_create_comp_channel(ctx))) {
		fprintf(stderr, "capserver: ibv_alloc_pd/ibv_create_comp_channel: %s (%s)\n", strerror(errno), errname(errno));
		return 1;
	}
	fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK);

	/* Listen last: a port that accepts means a server ready to serve. */
	int lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1, zero = 0;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
	struct sockaddr_in6 addr = { .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_any };
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) || listen(lfd, BACKLOG)) {
		fprintf(stderr, "capserver: listen on port %d: %s (%s)\n", port, strerror(errno), errname(errno));
		return 1;
	}
	reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	printf("capserver: listening on port %d (MAX_CLIENTS=%d, BACKLOG=%d, HANDSHAKE_MS=%d, device %s, GID index %d)\n",
	       port, MAX_CLIENTS, BACKLOG, HANDSHAKE_MS, ibv_get_device_name(ctx->device), gid_index);

	while (!stop) {
		/* Only the descriptors in use: poll(2) refuses more entries
		 * than RLIMIT_NOFILE (EINVAL), and the table is MAX_CLIENTS
		 * long whatever the limit. */
		int n = 0;
		pfds[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		pfds[n++] = (struct pollfd){ .fd = channel->fd, .events = POLLIN };
		for (int i = 0; i < MAX_CLIENTS; i++)
			if (clients[i].fd >= 0) {
				slot[n] = i;
				pfds[n++] = (struct pollfd){ .fd = clients[i].fd, .events = POLLIN };
			}
		if (poll(pfds, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "capserver: poll: %s (%s)\n", strerror(errno), errname(errno));
			break;
		}
		if (pfds[1].revents)
			on_completions();
		for (int k = 2; k < n; k++)
			if (pfds[k].revents && clients[slot[k]].fd == pfds[k].fd)
				on_socket(&clients[slot[k]]);
		if (pfds[0].revents)
			on_accept(lfd);
	}
	int held = active;
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (clients[i].state != FREE)
			release(&clients[i]);
	printf("capserver: stopped holding %d: served %lu, refused %lu, failed %lu\n", held, served, refused, failed);
	ibv_destroy_comp_channel(channel);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
