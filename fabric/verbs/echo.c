//go:build verbs && cgo

// The server's per-client echo loop (server/echoloop.go) as one C call per
// stretch of messages: see fabric.Echoer and echo.go.

#include "echo.h"
#include "payload.h"

#include <errno.h>

// rp_poll1 takes one completion of cq into *wc: 1 if it did, 0 if cq is
// empty and there is time left, RP_POLL_OVER once idle_end or slice_end
// has passed, -EIO (with *verb = which) if polling failed. An empty poll
// sets *seen to the clock it read.
#define RP_POLL_OVER 2
static int rp_poll1(struct ibv_cq *cq, struct ibv_wc *wc, int which, int64_t idle_end, int64_t slice_end,
		int *verb, int64_t *seen) {
	int n = ibv_poll_cq(cq, 1, wc);
	if (n < 0) {
		*verb = which;
		return -EIO;
	}
	if (n > 0) return 1;
	int64_t now = rp_clock();
	*seen = now;
	return now >= idle_end || now >= slice_end ? RP_POLL_OVER : 0;
}

// rp_buf is buffer b of the loop (fabric.EchoLoop): the first depth in the
// receive MR, the next depth in the send MR.
static uint8_t *rp_buf(uint8_t *rbuf, uint8_t *sbuf, int b, int size, int depth, uint32_t rlkey,
		uint32_t slkey, uint32_t *lkey) {
	if (b < depth) {
		*lkey = rlkey;
		return rbuf + (uint64_t)b * size;
	}
	*lkey = slkey;
	return sbuf + (uint64_t)(b - depth) * size;
}

int rp_echo(struct ibv_qp *qp, struct ibv_cq *rcq, struct ibv_cq *scq,
		uint64_t raddr, uint32_t rlkey, uint64_t saddr, uint32_t slkey, int size, int depth,
		uint8_t *state, int *inflight, int64_t idle_ns, int64_t slice_ns, rp_wc *out, int *verb,
		int64_t *idle) {
	uint8_t *rbuf = (uint8_t *)(uintptr_t)raddr, *sbuf = (uint8_t *)(uintptr_t)saddr;
	int64_t now = rp_clock();
	int64_t idle_end = now + idle_ns, slice_end = now + slice_ns;
	// The wait for each message runs from waited to the poll that found
	// it, which is counted as at the last empty poll's clock (seen): no
	// clock read is added to the round trip.
	int64_t waited = now, seen = now, sent_seen;
	*idle = 0;
	struct ibv_wc wc, sw;
	for (;;) {
		int p = rp_poll1(rcq, &wc, RP_VERB_POLL_RECV, idle_end, slice_end, verb, &seen);
		if (p == 0) continue;
		*idle += seen - waited;
		if (p < 0) return p;
		if (p == RP_POLL_OVER) return seen >= idle_end ? RP_ECHO_IDLE : RP_ECHO_SLICE;
		// Anything but a full-size message goes to Go unechoed, which says
		// what is wrong with it (or ends the client on a goodbye).
		int b = wc.wr_id < (uint64_t)(2 * depth) ? (int)wc.wr_id : 2 * depth - 1;
		uint32_t lkey;
		uint8_t *in = rp_buf(rbuf, sbuf, b, size, depth, rlkey, slkey, &lkey);
		if (wc.status != IBV_WC_SUCCESS || wc.byte_len != (uint32_t)size ||
				size < RP_PAYLOAD_HEADER || rp_load_be64(in) == RP_PAYLOAD_BYE) {
			rp_wc_of(&wc, out);
			return RP_ECHO_RECV;
		}
		// A free buffer takes its place as a receive: with all depth not
		// posted in flight, await a send (as the Go loop does); if none
		// comes in time, the message goes to Go, which waits longer.
		while (*inflight >= depth) {
			int q = rp_poll1(scq, &sw, RP_VERB_POLL_SEND, slice_end, slice_end, verb, &sent_seen);
			if (q < 0) return q;
			if (q == RP_POLL_OVER) {
				rp_wc_of(&wc, out);
				return RP_ECHO_RECV;
			}
			if (q == 0) continue;
			if (sw.status != IBV_WC_SUCCESS) {
				rp_wc_of(&sw, out);
				return RP_ECHO_SENDERR;
			}
			uint64_t k = sw.wr_id - 1;
			if (sw.wr_id >= 1 && k < (uint64_t)(2 * depth) && state[k] == RP_BUF_SENDING) {
				state[k] = RP_BUF_FREE;
				(*inflight)--;
			}
		}
		int f = 0;
		while (f < 2 * depth && state[f] != RP_BUF_FREE) f++;
		if (f == 2 * depth) { // the states do not add up: Go says so
			rp_wc_of(&wc, out);
			return RP_ECHO_RECV;
		}
		uint32_t flkey;
		uint8_t *fb = rp_buf(rbuf, sbuf, f, size, depth, rlkey, slkey, &flkey);
		int e = rp_post_recv(qp, (uint64_t)f, (uintptr_t)fb, size, flkey);
		if (e != 0) {
			*verb = RP_VERB_POST_RECV;
			return -e;
		}
		state[f] = RP_BUF_POSTED;
		e = rp_post_send(qp, (uint64_t)b + 1, (uintptr_t)in, size, lkey);
		if (e != 0) {
			*verb = RP_VERB_POST_SEND;
			return -e;
		}
		state[b] = RP_BUF_SENDING;
		(*inflight)++;
		// Verified while it goes out: one that fails was echoed as it came
		// (the client's check fails it too) and goes to Go to be reported.
		uint64_t seq;
		if (rp_payload_check(in, size, &seq) != 0) {
			rp_wc_of(&wc, out);
			return RP_ECHO_RECV;
		}
		waited = seen = rp_clock();
		idle_end = waited + idle_ns;
	}
}
