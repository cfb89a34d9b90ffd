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
} rp_cm_dev;

typedef struct {
	struct rdma_event_channel *ch;
	rp_cm_dev devs[RP_CM_DEVS];
	int ndevs;
} rp_cm_gen;

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
int rp_cm_open(rp_cm_gen **out);
void rp_cm_free(rp_cm_gen *g);
int rp_cm_start(rp_cm_gen *g, uint64_t idx, const char *host, const char *port, int timeout_ms, struct rdma_cm_id **out);
int rp_cm_route(struct rdma_cm_id *id, int timeout_ms);
int rp_cm_qp(rp_cm_gen *g, struct rdma_cm_id *id, uint32_t *qpn);
int rp_cm_connect(struct rdma_cm_id *id, const void *pdata, int pdlen);
// rp_cm_next waits up to timeout_ms for an event: 1 (ev filled), 0
// (none), or -errno.
int rp_cm_next(rp_cm_gen *g, int timeout_ms, rp_cm_ev *ev);
void rp_cm_close(struct rdma_cm_id *id, int connected);

#endif
