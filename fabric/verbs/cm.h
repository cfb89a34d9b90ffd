// librdmacm's part of package verbs (cm.go): what cgo cannot reach of
// an event (its unions) and of a connect (its parameters).

#ifndef RDMAPROBE_VERBS_CM_H
#define RDMAPROBE_VERBS_CM_H

#include <rdma/rdma_cma.h>
#include <stdint.h>

// rp_cm_ev is what Go needs of one event, copied out before the ack.
typedef struct {
	struct rdma_cm_id *id;
	uint64_t ctx; // the id's context, given to rp_cm_start
	int event;
	int status;
	int pdlen;    // the event's private data length
	uint32_t qpn; // the remote QP number (ESTABLISHED)
} rp_cm_ev;

// Each returns 0 or -errno.
int rp_cm_channel(struct rdma_event_channel **out);
int rp_cm_start(struct rdma_event_channel *ch, uint64_t ctx, const char *host, const char *port, int timeout_ms,
		struct rdma_cm_id **out);
int rp_cm_route(struct rdma_cm_id *id, int timeout_ms);
int rp_cm_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		uint32_t swr, uint32_t rwr, uint32_t ssge, uint32_t rsge);
int rp_cm_destroy_qp(struct rdma_cm_id *id);
int rp_cm_connect(struct rdma_cm_id *id, const void *pdata, int pdlen);
int rp_cm_disconnect(struct rdma_cm_id *id);
int rp_cm_destroy(struct rdma_cm_id *id);
// rp_cm_next waits up to timeout_ms for an event: 1 (ev filled), 0
// (none), or -errno.
int rp_cm_next(struct rdma_event_channel *ch, int timeout_ms, rp_cm_ev *ev);

#endif
