// A load generator's one busy-polled client in C (ping.c); see
// fabric.Pinger.

#ifndef RDMAPROBE_VERBS_PING_H
#define RDMAPROBE_VERBS_PING_H

#include "shim.h"

// What rp_ping returns besides -errno (fabric.PingStop's values).
#define RP_PING_SLICE 0
#define RP_PING_IDLE 1
#define RP_PING_WC 2
#define RP_PING_BADECHO 3
#define RP_PING_DONE 4
#define RP_PING_POST 5

// The latencies one call can hand back: it returns when they are full.
#define RP_PING_LAT 256

// rp_ping_loop is fabric.PingLoop in C: no Go pointers, so Go passes
// its own copy.
typedef struct {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint64_t saddr, raddr[2];
	uint32_t lkey;
	int size;
	uint64_t swrid, rwrid[2];
	int64_t end; // CLOCK_MONOTONIC ns

	uint64_t seq;
	int64_t posted;
	int sent, echoed;
	uint64_t next, last;

	// out
	int64_t lat[RP_PING_LAT];
	int nlat;
	int64_t counted, posts, idle;
	int bad;
	rp_wc wc;
	int post_err;  // with RP_PING_POST: the errno
	int post_recv; // with RP_PING_POST: 1 if the receive's post failed
} rp_ping_loop;

int rp_ping(rp_ping_loop *p, int64_t idle_ns, int64_t slice_ns);

#endif
