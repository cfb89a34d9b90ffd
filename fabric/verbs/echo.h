// The server's busy-polled echo loop in C (echo.c); see fabric.Echoer.

#ifndef RDMAPROBE_VERBS_ECHO_H
#define RDMAPROBE_VERBS_ECHO_H

#include "shim.h"

// What rp_echo returns besides -errno (*verb names the verb that failed).
#define RP_ECHO_IDLE 0    // idle passed without a message; nothing left over
#define RP_ECHO_RECV 1    // *out is a receive completion for Go: not echoed, or echoed and failing its check
#define RP_ECHO_SENDERR 2 // *out is a send completion that failed
#define RP_ECHO_SLICE 3   // the slice passed while messages kept coming; nothing left over

// The states of a buffer (fabric.BufState).
#define RP_BUF_FREE 0
#define RP_BUF_POSTED 1
#define RP_BUF_SENDING 2

#define RP_VERB_POLL_RECV 1
#define RP_VERB_POLL_SEND 2
#define RP_VERB_POST_RECV 3
#define RP_VERB_POST_SEND 4

int rp_echo(struct ibv_qp *qp, struct ibv_cq *rcq, struct ibv_cq *scq,
		uint64_t raddr, uint32_t rlkey, uint64_t saddr, uint32_t slkey, int size, int depth,
		uint8_t *state, int *inflight, int64_t idle_ns, int64_t slice_ns, rp_wc *out, int *verb,
		int64_t *idle);

#endif
