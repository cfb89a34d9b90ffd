//go:build verbs && cgo

// The server's per-client echo loop (server/echoloop.go) as one C call per
// stretch of messages: see fabric.Echoer and echo.go.

#include "echo.h"
#include "payload.h"

#include <errno.h>

// rp_poll1 takes one completion of cq into *wc: 1 if it did, 0 if cq is
// empty and there is time left, RP_POLL_OVER once idle_end or slice_end
// has passed, -EIO (with *verb = which) if polling failed.
#define RP_POLL_OVER 2
static int rp_poll1(struct ibv_cq *cq, struct ibv_wc *wc, int which, int64_t idle_end, int64_t slice_end, int *verb) {
	int n = ibv_poll_cq(cq, 1, wc);
	if (n < 0) {
		*verb = which;
		return -EIO;
	}
	if (n > 0) return 1;
	int64_t now = rp_clock();
	return now >= idle_end || now >= slice_end ? RP_POLL_OVER : 0;
}

int rp_echo(struct ibv_qp *qp, struct ibv_cq *rcq, struct ibv_cq *scq,
		uint64_t raddr, uint32_t rlkey, uint64_t saddr, uint32_t slkey, int size, int depth,
		uint8_t *busy, int *inflight, int64_t idle_ns, int64_t slice_ns, rp_wc *out, int *verb) {
	uint8_t *rbuf = (uint8_t *)(uintptr_t)raddr, *sbuf = (uint8_t *)(uintptr_t)saddr;
	int64_t now = rp_clock();
	int64_t idle_end = now + idle_ns, slice_end = now + slice_ns;
	struct ibv_wc wc;
	for (;;) {
		// All send buffers in flight: await one, as the Go loop does.
		while (*inflight >= depth) {
			int p = rp_poll1(scq, &wc, RP_VERB_POLL_SEND, idle_end, slice_end, verb);
			if (p < 0) return p;
			if (p == RP_POLL_OVER) return RP_ECHO_IDLE;
			if (p == 0) continue;
			if (wc.status != IBV_WC_SUCCESS) {
				rp_wc_of(&wc, out);
				return RP_ECHO_SENDERR;
			}
			uint64_t k = wc.wr_id - 1;
			if (wc.wr_id >= 1 && k < (uint64_t)depth && busy[k]) {
				busy[k] = 0;
				(*inflight)--;
			}
		}
		int p = rp_poll1(rcq, &wc, RP_VERB_POLL_RECV, idle_end, slice_end, verb);
		if (p < 0) return p;
		if (p == RP_POLL_OVER) return RP_ECHO_IDLE;
		if (p == 0) continue;
		// Anything but a full-size message that verifies goes to Go, which
		// says what is wrong with it (or ends the client on a goodbye).
		uint64_t r = wc.wr_id < (uint64_t)depth ? wc.wr_id : (uint64_t)depth - 1;
		uint8_t *in = rbuf + r * (uint64_t)size;
		uint64_t seq;
		if (wc.status != IBV_WC_SUCCESS || wc.byte_len != (uint32_t)size ||
				rp_payload_check(in, size, &seq) != 0 || seq == RP_PAYLOAD_BYE) {
			rp_wc_of(&wc, out);
			return RP_ECHO_RECV;
		}
		int j = 0;
		while (busy[j]) j++;
		uint8_t *s = sbuf + j * (uint64_t)size;
		memcpy(s, in, size);
		int e = rp_post_recv(qp, r, (uintptr_t)in, size, rlkey);
		if (e != 0) {
			*verb = RP_VERB_POST_RECV;
			return -e;
		}
		e = rp_post_send(qp, (uint64_t)j + 1, (uintptr_t)s, size, slkey);
		if (e != 0) {
			*verb = RP_VERB_POST_SEND;
			return -e;
		}
		busy[j] = 1;
		(*inflight)++;
		idle_end = rp_clock() + idle_ns;
	}
}
