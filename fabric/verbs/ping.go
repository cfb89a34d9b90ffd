//go:build verbs && cgo

package verbs

/*
#include "ping.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

var _ fabric.Pinger = (*qp)(nil)

// fabric.PingStop's values are ping.h's RP_PING_*.
var (
	_ [int(fabric.PingSlice) - C.RP_PING_SLICE]struct{}
	_ [C.RP_PING_SLICE - int(fabric.PingSlice)]struct{}
	_ [int(fabric.PingIdle) - C.RP_PING_IDLE]struct{}
	_ [C.RP_PING_IDLE - int(fabric.PingIdle)]struct{}
	_ [int(fabric.PingWC) - C.RP_PING_WC]struct{}
	_ [C.RP_PING_WC - int(fabric.PingWC)]struct{}
	_ [int(fabric.PingBadEcho) - C.RP_PING_BADECHO]struct{}
	_ [C.RP_PING_BADECHO - int(fabric.PingBadEcho)]struct{}
	_ [int(fabric.PingDone) - C.RP_PING_DONE]struct{}
	_ [C.RP_PING_DONE - int(fabric.PingDone)]struct{}
	_ [int(fabric.PingPost) - C.RP_PING_POST]struct{}
	_ [C.RP_PING_POST - int(fabric.PingPost)]struct{}
)

// PingSpin runs l in C (ping.c) until it is idle for idle, slice passes,
// or it stops for the caller; see fabric.Pinger.
func (q *qp) PingSpin(l *fabric.PingLoop, idle, slice time.Duration) (fabric.PingStop, error) {
	const verb = "ping"
	c, ok := l.CQ.(*cq)
	if !ok || c == nil {
		return fabric.PingPost, verr(verb, syscall.EINVAL, "not a verbs CQ")
	}
	if l.Size < 1 {
		return fabric.PingPost, verr(verb, syscall.EINVAL, fmt.Sprintf("size %d", l.Size))
	}
	m, err := sgeMR("ibv_post_send", l.MR, l.SendOff, l.Size)
	if err != nil {
		return fabric.PingPost, err
	}
	for _, off := range l.RecvOff {
		if _, err := sgeMR("ibv_post_recv", l.MR, off, l.Size); err != nil {
			return fabric.PingPost, err
		}
	}
	if q.srq != nil {
		return fabric.PingPost, verr("ibv_post_recv", syscall.EINVAL, "the QP takes its receives from an SRQ")
	}
	q.life.RLock()
	defer q.life.RUnlock()
	if q.dead {
		return fabric.PingPost, verr("ibv_post_send", syscall.EINVAL, "QP destroyed")
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.dead {
		return fabric.PingIdle, verr("ibv_poll_cq", syscall.EINVAL, "CQ destroyed")
	}
	// Go's clock in C's: runtime.nanotime is CLOCK_MONOTONIC.
	now, ns := time.Now(), nanotime()
	cl := C.rp_ping_loop{qp: q.qp, cq: c.cq, saddr: C.uint64_t(m.addr + uintptr(l.SendOff)),
		lkey: C.uint32_t(m.lkey), size: C.int(l.Size), swrid: C.uint64_t(l.SendWRID),
		end: C.int64_t(ns + int64(l.End.Sub(now))),
		seq: C.uint64_t(l.Seq), posted: C.int64_t(ns + int64(l.Posted.Sub(now))),
		next: C.uint64_t(l.Next), last: C.uint64_t(l.Last)}
	for r := range 2 {
		cl.raddr[r] = C.uint64_t(m.addr + uintptr(l.RecvOff[r]))
		cl.rwrid[r] = C.uint64_t(l.RecvWRID[r])
	}
	if l.Sent {
		cl.sent = 1
	}
	if l.Echoed {
		cl.echoed = 1
	}
	r := C.rp_ping(&cl, C.int64_t(idle), C.int64_t(slice))
	c.spun.Add(int64(cl.idle))
	at := func(t C.int64_t) time.Time { return now.Add(time.Duration(int64(t) - ns)) }
	l.Seq, l.Posted, l.Sent, l.Echoed = uint64(cl.seq), at(cl.posted), cl.sent != 0, cl.echoed != 0
	l.Next, l.Last = uint64(cl.next), uint64(cl.last)
	l.Lat = l.Lat[:0]
	for _, d := range cl.lat[:cl.nlat] {
		l.Lat = append(l.Lat, time.Duration(d))
	}
	l.Counted, l.Posts, l.Bad = int64(cl.counted), int64(cl.posts), int(cl.bad)
	switch {
	case r < 0:
		return fabric.PingIdle, verr("ibv_poll_cq", syscall.Errno(-r), "in the ping loop")
	case r == C.RP_PING_WC:
		l.WC = wcOf(cl.wc)
	case r == C.RP_PING_POST:
		if cl.post_recv != 0 {
			return fabric.PingPost, verr("ibv_post_recv", syscall.Errno(cl.post_err), "in the ping loop")
		}
		return fabric.PingPost, verr("ibv_post_send", syscall.Errno(cl.post_err), "in the ping loop")
	}
	return fabric.PingStop(r), nil
}
