/*
 * capclient: one client of capserver, one process per client as the
 * scripts of linjiw/rdma-multi-client run them.
 *
 *   capclient -a ADDR [-p TCP_PORT] [-d DEVICE] [-g GID_INDEX] [-i IB_PORT] [-t SECONDS]
 *
 * It connects (TCP, HELLO/OK exchange, its RC QP to RTS), sends one
 * message over RDMA and checks the echo, then prints
 *   connected qpn <q> psn <p> server qpn <q> psn <p>
 * Then it reads commands on stdin, as linjiw/rdma-multi-client's client does:
 *   send <text>   RC SEND of text, prints "echo: <text>" once it is back
 *   quit          leave (so does end of input)
 *
 * Exit status: 0 done, 2 usage, 3 refused at capacity (FULL),
 * 4 the server reported an error (ERR ...), 5 a local verbs call failed,
 * 6 TCP connect or exchange failed, 7 timed out (-t, default 30 s, per
 * wait).
 */
#include "common.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct ibv_context *ctx;
static struct ibv_comp_channel *channel;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static char buf[2 * MSG_SIZE];
static int timeout_ms = 30000;

#define SBUF (buf)
#define RBUF (buf + MSG_SIZE)

static void die(int status, const char *what, int e)
{
	fprintf(stderr, "capclient: %s: %s (%s)\n", what, strerror(e), errname(e));
	exit(status);
}

/* await_echo waits, within the timeout, for the send's completion and the
 * echo's, in either order: the echo can be polled before the send's
 * acknowledgement has completed it. */
static void await_echo(void)
{
	int sent = 0, echoed = 0;
	while (!sent || !echoed) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die(5, "ibv_poll_cq", EIO);
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				fprintf(stderr, "capclient: completion: %s\n", ibv_wc_status_str(wc.status));
				exit(5);
			}
			if (wc.opcode == IBV_WC_SEND)
				sent = 1;
			else if (wc.opcode == IBV_WC_RECV)
				echoed = 1;
			continue;
		}
		struct pollfd p = { .fd = channel->fd, .events = POLLIN };
		int r = poll(&p, 1, timeout_ms);
		if (r == 0) {
			fprintf(stderr, "capclient: timed out after %d ms waiting for the %s completion\n",
				timeout_ms, sent ? "echo's" : echoed ? "send's" : "send's and the echo's");
			exit(7);
		}
		if (r < 0 && errno != EINTR)
			die(5, "poll", errno);
		struct ibv_cq *ev;
		void *ev_ctx;
		if (r > 0 && ibv_get_cq_event(channel, &ev, &ev_ctx) == 0) {
			ibv_ack_cq_events(ev, 1);
			ibv_req_notify_cq(cq, 0);
		}
	}
}

/* roundtrip sends text over the QP and checks the server echoed it. */
static void roundtrip(const char *text)
{
	size_t len = strlen(text) + 1;
	if (len > MSG_SIZE)
		len = MSG_SIZE;
	memcpy(SBUF, text, len);
	SBUF[len - 1] = 0;
	memset(RBUF, 0, MSG_SIZE);
	int r = post_send(qp, mr, SBUF, len, 1);
	if (r)
		die(5, "ibv_post_send", r);
	await_echo();
	if (memcmp(SBUF, RBUF, len) != 0) {
		fprintf(stderr, "capclient: echo differs: sent %s, got %.*s\n", SBUF, MSG_SIZE, RBUF);
		exit(4);
	}
	if ((r = post_recv(qp, mr, RBUF, 2)))
		die(5, "ibv_post_recv", r);
}

static int dial(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	int r = getaddrinfo(host, port, &hints, &res);
	if (r) {
		fprintf(stderr, "capclient: resolve %s: %s\n", host, gai_strerror(r));
		exit(6);
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen))
		die(errno == EINPROGRESS || errno == EAGAIN ? 7 : 6, "connect", errno);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	freeaddrinfo(res);
	return fd;
}

/* read_line reads the server's one-line answer. */
static void read_line(int fd, char *line, size_t n)
{
	size_t len = 0;
	while (len + 1 < n) {
		ssize_t r = read(fd, line + len, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die(errno == EAGAIN ? 7 : 6, "read the server's answer", errno);
		if (r == 0) {
			fprintf(stderr, "capclient: the server closed the connection without an answer\n");
			exit(6);
		}
		if (line[len] == '\n')
			break;
		len++;
	}
	line[len] = 0;
}

int main(int argc, char **argv)
{
	const char *host = NULL, *dev = NULL, *port = "4433";
	int gid_index = 0, ib_port = 1, opt;
	while ((opt = getopt(argc, argv, "a:p:d:g:i:t:")) != -1) {
		switch (opt) {
		case 'a': host = optarg; break;
		case 'p': port = optarg; break;
		case 'd': dev = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 'i': ib_port = atoi(optarg); break;
		case 't': timeout_ms = (int)(atof(optarg) * 1000); break;
		default: host = NULL; optind = argc; break;
		}
	}
	if (!host) {
		fprintf(stderr, "usage: %s -a addr [-p tcp_port] [-d device] [-g gid_index] [-i ib_port] [-t seconds]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (!(ctx = open_device(dev)))
		return 5;
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, ib_port, &pa))
		die(5, "ibv_query_port", errno);
	union ibv_gid gid;
	if (ibv_query_gid(ctx, ib_port, gid_index, &gid))
		die(5, "ibv_query_gid", errno);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die(5, "ibv_alloc_pd", errno);
	if (!(channel = ibv_create_comp_channel(ctx)))
		die(5, "ibv_create_comp_channel", errno);
	if (!(cq = ibv_create_cq(ctx, 8, NULL, channel, 0)))
		die(5, "ibv_create_cq", errno);
	if (ibv_req_notify_cq(cq, 0))
		die(5, "ibv_req_notify_cq", errno);
	if (!(mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE)))
		die(5, "ibv_reg_mr", errno);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (!(qp = ibv_create_qp(pd, &qa)))
		die(5, "ibv_create_qp", errno);
	int r;
	if ((r = qp_to_init(qp, ib_port)))
		die(5, "modify QP to INIT", r);
	if ((r = post_recv(qp, mr, RBUF, 2)))
		die(5, "ibv_post_recv", r);

	int fd = dial(host, port);
	struct peer me = { .qpn = qp->qp_num, .psn = random_psn(), .gid = gid }, remote;
	char line[LINE_MAX_LEN];
	format_peer(line, sizeof line, "HELLO", &me);
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		die(6, "send HELLO", errno);
	read_line(fd, line, sizeof line);
	if (strncmp(line, "FULL", 4) == 0) {
		fprintf(stderr, "capclient: refused: server at capacity (MAX_CLIENTS=%s)\n", line + 4 + (line[4] == ' '));
		return 3;
	}
	if (strncmp(line, "ERR ", 4) == 0) {
		fprintf(stderr, "capclient: server error: %s\n", line + 4);
		return 4;
	}
	if (strncmp(line, "OK ", 3) != 0 || parse_peer(line + 3, &remote) != 0) {
		fprintf(stderr, "capclient: malformed answer: %s\n", line);
		return 6;
	}
	if ((r = qp_to_rtr(qp, ib_port, gid_index, pa.active_mtu, &remote)))
		die(5, "modify QP to RTR", r);
	if ((r = qp_to_rts(qp, me.psn)))
		die(5, "modify QP to RTS", r);
	char hello[MSG_SIZE];
	snprintf(hello, sizeof hello, "hello from %d", (int)getpid());
	roundtrip(hello);
	printf("connected qpn %u psn %u server qpn %u psn %u\n", me.qpn, me.psn, remote.qpn, remote.psn);

	char cmd[LINE_MAX_LEN];
	while (fgets(cmd, sizeof cmd, stdin)) {
		cmd[strcspn(cmd, "\r\n")] = 0;
		if (strcmp(cmd, "quit") == 0)
			break;
		if (strncmp(cmd, "send ", 5) == 0) {
			roundtrip(cmd + 5);
			printf("echo: %s\n", cmd + 5);
		} else if (cmd[0]) {
			fprintf(stderr, "capclient: unknown command %s (send TEXT, quit)\n", cmd);
		}
	}
	close(fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(channel);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
