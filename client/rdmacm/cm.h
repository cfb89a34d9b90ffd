// The rdma_cm load generator's C side: one event channel, a protection
// domain and a completion queue per device shared by every connection,
// and helpers for what cgo cannot reach (the event's unions, the
// connection parameters). cm.go drives the connections.

#ifndef RDMAPROBE_RDMACM_CM_H
#define RDMAPROBE_RDMACM_CM_H

#include <rdma/rdma_cma.h>
#include <stdint.h>

// RP_CM_DEVS bounds the devices one generator's connections reach.
#define RP_CM_DEVS 8

typedef struct {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_comp_channel *cc; // the CQ's, for the traffic phase's waits
	int armed;                   // a notification is requested on cq
} rp_cm_dev;

typedef struct {
	struct rdma_event_channel *ch;
	rp_cm_dev devs[RP_CM_DEVS];
	int ndevs;
	// depth sizes each QP's queues and cqe each device's CQ: 1 and a
	// small CQ with no traffic phase, since nothing is posted then.
	int depth, cqe;
} rp_cm_gen;

// rp_cm_wc is what Go needs of one work completion.
typedef struct {
	uint64_t wr_id;
	int status;
	uint32_t byte_len;
} rp_cm_wc;

// rp_cm_ev is what Go needs of one event, copied out before the ack.
typedef struct {
	struct rdma_cm_id *id;
	uint64_t idx; // the id's context: its connection's index
	int event;
	int status;
	int pdlen;     // the event's private data length
	uint32_t qpn;  // the remote QP number (ESTABLISHED)
} rp_cm_ev;

// Each returns 0 or -errno.
int rp_cm_open(rp_cm_gen **out, int depth, int cqe);
void rp_cm_free(rp_cm_gen *g);
int rp_cm_start(rp_cm_gen *g, uint64_t idx, const char *host, const char *port, int timeout_ms, struct rdma_cm_id **out);
int rp_cm_route(struct rdma_cm_id *id, int timeout_ms);
int rp_cm_qp(rp_cm_gen *g, struct rdma_cm_id *id, uint32_t *qpn);
int rp_cm_connect(struct rdma_cm_id *id, const void *pdata, int pdlen);
// rp_cm_next waits up to timeout_ms for an event: 1 (ev filled), 0
// (none), or -errno.
int rp_cm_next(rp_cm_gen *g, int timeout_ms, rp_cm_ev *ev);
void rp_cm_close(struct rdma_cm_id *id, int connected);

// The traffic phase (traffic.go): a registered buffer per connection,
// receives and SENDs on it, and the completions of every device's CQ.
int rp_cm_reg(rp_cm_gen *g, struct rdma_cm_id *id, void *buf, size_t len, struct ibv_mr **out);
int rp_cm_post_recv(struct rdma_cm_id *id, struct ibv_mr *mr, void *addr, uint32_t len, uint64_t wr_id);
int rp_cm_post_send(struct rdma_cm_id *id, struct ibv_mr *mr, void *addr, uint32_t len, uint64_t wr_id);
// rp_cm_poll waits up to timeout_ms for completions and returns how many
// it copied into out (at most max), or -errno.
int rp_cm_poll(rp_cm_gen *g, int timeout_ms, rp_cm_wc *out, int max);

#endif
