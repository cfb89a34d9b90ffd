//go:build verbs && cgo

// The load generator's one busy-polled client as one C call per stretch
// of messages: see fabric.Pinger and ping.go.

#include "ping.h"
#include "payload.h"

#include <errno.h>

// rp_ping_write writes the next message into the send buffer (p->next).
static void rp_ping_write(rp_ping_loop *p) {
	p->next = ++p->last;
	rp_payload_fill((uint8_t *)(uintptr_t)p->saddr, p->next, p->size);
}

// rp_ping_post sends the message written in the send buffer (p->next,
// or a new one written now) at now, if the window is open; else the
// slot is free.
static int rp_ping_post(rp_ping_loop *p, int64_t now) {
	if (now >= p->end) {
		p->seq = 0;
		return 0;
	}
	if (p->next == 0) rp_ping_write(p);
	int e = rp_post_send(p->qp, p->swrid, p->saddr, (uint32_t)p->size, p->lkey);
	if (e != 0) {
		p->seq = 0;
		p->post_err = e;
		p->post_recv = 0;
		return RP_PING_POST;
	}
	p->seq = p->next;
	p->next = 0;
	p->posted = now;
	p->sent = p->echoed = 0;
	p->posts++;
	return 0;
}

int rp_ping(rp_ping_loop *p, int64_t idle_ns, int64_t slice_ns) {
	int64_t now = rp_clock();
	int64_t idle_end = now + idle_ns, slice_end = now + slice_ns;
	// The vain wait runs from waited to the last empty poll (seen).
	int64_t waited = now, seen = now;
	p->nlat = 0;
	p->counted = p->posts = p->idle = 0;
	p->bad = -1;
	if (p->seq == 0) {
		if (now >= p->end) return RP_PING_DONE;
		int r = rp_ping_post(p, now);
		if (r != 0) return r;
	}
	struct ibv_wc wc;
	for (;;) {
		int n = ibv_poll_cq(p->cq, 1, &wc);
		if (n < 0) return -EIO;
		if (n == 0) {
			seen = rp_clock();
			if (seen >= idle_end || seen >= slice_end) {
				p->idle += seen - waited;
				return seen >= idle_end ? RP_PING_IDLE : RP_PING_SLICE;
			}
			continue;
		}
		// The clock of the poll that found it: the echo's arrival and
		// the next message's post.
		now = rp_clock();
		p->idle += seen - waited;
		int rc = 0;
		if (wc.status != IBV_WC_SUCCESS || wc.qp_num != p->qp->qp_num || p->seq == 0) {
			rp_wc_of(&wc, &p->wc);
			return RP_PING_WC;
		}
		if (wc.opcode & IBV_WC_RECV) {
			int r = wc.wr_id == p->rwrid[0] || wc.wr_id == 0 ? 0 : wc.wr_id == p->rwrid[1] ? 1 : -1;
			uint8_t *in = r < 0 ? NULL : (uint8_t *)(uintptr_t)p->raddr[r];
			if (r < 0 || p->echoed || wc.byte_len != (uint32_t)p->size || p->size < RP_PAYLOAD_HEADER ||
					rp_load_be64(in) != p->seq) {
				rp_wc_of(&wc, &p->wc);
				return RP_PING_WC;
			}
			int64_t lat = now - p->posted;
			if (p->sent) {
				rc = rp_ping_post(p, now); // the slot is done: the next goes out
			} else {
				p->echoed = 1; // the next goes out with the send's completion
			}
			// Checked and given back while the next message goes out.
			uint64_t seq;
			if (rp_payload_check(in, p->size, &seq) != 0) {
				p->bad = r;
				return rc != 0 ? rc : RP_PING_BADECHO;
			}
			p->lat[p->nlat++] = lat;
			if (now < p->end) p->counted++;
			int e = rp_post_recv(p->qp, wc.wr_id == 0 ? p->rwrid[0] : wc.wr_id, (uintptr_t)in, (uint32_t)p->size, p->lkey);
			if (rc != 0) return rc;
			if (e != 0) {
				p->post_err = e;
				p->post_recv = 1;
				return RP_PING_POST;
			}
		} else {
			if (wc.opcode != IBV_WC_SEND || wc.wr_id != p->swrid || p->sent) {
				rp_wc_of(&wc, &p->wc);
				return RP_PING_WC;
			}
			p->sent = 1;
			if (p->echoed) {
				rc = rp_ping_post(p, now); // the echo came first: the slot is done
				if (rc != 0) return rc;
			} else if (p->next == 0 && now < p->end) {
				rp_ping_write(p);
			}
		}
		waited = seen = rp_clock();
		idle_end = waited + idle_ns;
		if (p->seq == 0) return RP_PING_DONE;
		if (p->nlat == RP_PING_LAT || waited >= slice_end) return RP_PING_SLICE;
	}
}
