// The C half of package verbs: thin wrappers over libibverbs calls that cgo
// cannot make directly (macros, inline functions, structs built in C) or
// that should not allocate on the Go side. Every cgo file of the package
// includes this header; the definitions are in shim.c.

#ifndef RDMAPROBE_VERBS_SHIM_H
#define RDMAPROBE_VERBS_SHIM_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdlib.h>

// rp_wc is the part of struct ibv_wc the fabric reports; Poll copies it out
// of a per-CQ C buffer, so polling allocates nothing on the Go side.
typedef struct {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
} rp_wc;

// rp_gid is passed by value so a GID crosses into C without a Go pointer.
typedef struct { uint8_t raw[16]; } rp_gid;

#define RP_POLL_MAX 16

// rp_clock is CLOCK_MONOTONIC in nanoseconds (Go's runtime.nanotime).
int64_t rp_clock(void);
// rp_wc_of copies what the fabric reports of a completion.
void rp_wc_of(const struct ibv_wc *w, rp_wc *out);

// Device and GID table.
int rp_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a);
int rp_query_gid(struct ibv_context *c, uint32_t port, uint32_t idx, rp_gid *gid, uint32_t *type);
int rp_query_gid_raw(struct ibv_context *c, uint8_t port, int idx, rp_gid *gid);

// Completion channel and its events.
int rp_channel_fd(struct ibv_comp_channel *ch);
int rp_drain_events(struct ibv_comp_channel *ch, uintptr_t *ids, int n);

// CQ.
struct ibv_cq *rp_create_cq(struct ibv_context *c, int cqe, uintptr_t id, struct ibv_comp_channel *ch);
int rp_poll(struct ibv_cq *cq, rp_wc *out, int n);
int rp_req_notify(struct ibv_cq *cq);

int rp_spin(struct ibv_cq *cq, rp_wc *out, int n, int64_t ns, int64_t *idle);

// MR.
struct ibv_mr *rp_reg_mr(struct ibv_pd *pd, size_t size, int access);
int rp_dereg_mr(struct ibv_mr *mr);

// QP.
struct ibv_qp *rp_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		struct ibv_srq *srq, uint32_t swr, uint32_t rwr, uint32_t ssge, uint32_t rsge, int ud);
int rp_to_init(struct ibv_qp *qp, int pkey_index, int port, int access);
int rp_to_rtr(struct ibv_qp *qp, int mtu, uint32_t dest_qpn, uint32_t rq_psn,
		int max_dest_rd_atomic, int min_rnr_timer, uint16_t dlid, rp_gid dgid,
		int sgid_index, int hop_limit, int port);
int rp_to_rts(struct ibv_qp *qp, uint32_t sq_psn, int timeout, int retry_cnt,
		int rnr_retry, int max_rd_atomic);
int rp_qp_state(struct ibv_qp *qp);
int rp_post_send(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey);
int rp_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey);
int rp_post_rdma(struct ibv_qp *qp, int read, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey,
		uint64_t raddr, uint32_t rkey);

// UD QP and address handles (ud.c; the send in shim.c).
int rp_to_init_ud(struct ibv_qp *qp, int pkey_index, int port, uint32_t qkey);
int rp_to_rtr_ud(struct ibv_qp *qp);
int rp_to_rts_ud(struct ibv_qp *qp, uint32_t sq_psn);
struct ibv_ah *rp_create_ah(struct ibv_pd *pd, uint16_t dlid, rp_gid dgid, int sgid_index, int hop_limit, int port);
int rp_post_send_ud(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey,
		struct ibv_ah *ah, uint32_t qpn, uint32_t qkey);

// SRQ.
struct ibv_srq *rp_create_srq(struct ibv_pd *pd, uint32_t max_wr, uint32_t max_sge);
int rp_post_srq_recv(struct ibv_srq *srq, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey);
int rp_destroy_srq(struct ibv_srq *srq);

#endif
