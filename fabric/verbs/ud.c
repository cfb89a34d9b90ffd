//go:build verbs && cgo

// Unreliable datagrams: the QP's INIT with a Q_Key and address handles
// (their send is shim.c's rp_post_send_ud). Declared in shim.h.

#include "shim.h"

#include <errno.h>
#include <string.h>

int rp_to_init_ud(struct ibv_qp *qp, int pkey_index, int port, uint32_t qkey) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = pkey_index;
	a.port_num = port;
	a.qkey = qkey;
	int r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	return r < 0 ? (errno ? errno : EIO) : r;
}

// A UD QP's RTR is the state alone; its RTS adds the send PSN.
int rp_to_rtr_ud(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	int r = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	return r < 0 ? (errno ? errno : EIO) : r;
}

int rp_to_rts_ud(struct ibv_qp *qp, uint32_t sq_psn) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	int r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	return r < 0 ? (errno ? errno : EIO) : r;
}

struct ibv_ah *rp_create_ah(struct ibv_pd *pd, uint16_t dlid, rp_gid dgid, int sgid_index, int hop_limit, int port) {
	struct ibv_ah_attr a;
	memset(&a, 0, sizeof a);
	a.dlid = dlid;
	a.port_num = port;
	if (sgid_index >= 0) {
		a.is_global = 1;
		memcpy(a.grh.dgid.raw, dgid.raw, 16);
		a.grh.sgid_index = sgid_index;
		a.grh.hop_limit = hop_limit;
	}
	return ibv_create_ah(pd, &a);
}
