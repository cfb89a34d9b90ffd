// An rdma_cm server that holds at most -c connections and rejects every
// request above them (rdma_reject with 4 bytes of private data), the way
// a service with a fixed connection table answers: the capacity a probe
// of it must find exactly. Usage: cmcapserver -a ADDR -p PORT -c CAP.
// It runs until killed.

#include <rdma/rdma_cma.h>

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what) {
	perror(what);
	exit(1);
}

int main(int argc, char **argv) {
	const char *addr = NULL, *port = NULL;
	int cap = 0, opt;
	while ((opt = getopt(argc, argv, "a:p:c:")) != -1) {
		switch (opt) {
		case 'a': addr = optarg; break;
		case 'p': port = optarg; break;
		case 'c': cap = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (!addr || !port || cap < 1) {
	usage:
		fprintf(stderr, "usage: %s -a ADDR -p PORT -c CAP\n", argv[0]);
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
	printf("listening on %s:%s, capped at %d\n", addr, port, cap);
	fflush(stdout);

	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	int held = 0;
	for (;;) {
		struct rdma_cm_event *e;
		if (rdma_get_cm_event(ch, &e)) die("rdma_get_cm_event");
		struct rdma_cm_id *id = e->id;
		enum rdma_cm_event_type type = e->event;
		rdma_ack_cm_event(e);
		switch (type) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (held >= cap) {
				static const char full[4] = "full";
				rdma_reject(id, full, sizeof(full));
				rdma_destroy_id(id);
				break;
			}
			if (!pd) {
				pd = ibv_alloc_pd(id->verbs);
				cq = pd ? ibv_create_cq(id->verbs, 64, NULL, NULL, 0) : NULL;
				if (!cq) die("ibv_alloc_pd/ibv_create_cq");
			}
			struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				.cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
			if (rdma_create_qp(id, pd, &qa)) die("rdma_create_qp");
			struct rdma_conn_param cp = {.responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7};
			if (rdma_accept(id, &cp)) die("rdma_accept");
			held++;
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			rdma_disconnect(id);
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			held--;
			break;
		default:
			break;
		}
	}
}
