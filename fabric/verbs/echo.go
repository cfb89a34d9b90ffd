//go:build verbs && cgo

package verbs

/*
#include "echo.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

var _ fabric.Echoer = (*qp)(nil)

// fabric.BufState's values are echo.c's RP_BUF_*: each pair of array
// lengths is non-negative only if they are equal.
var (
	_ [int(fabric.BufFree) - C.RP_BUF_FREE]struct{}
	_ [C.RP_BUF_FREE - int(fabric.BufFree)]struct{}
	_ [int(fabric.BufPosted) - C.RP_BUF_POSTED]struct{}
	_ [C.RP_BUF_POSTED - int(fabric.BufPosted)]struct{}
	_ [int(fabric.BufSending) - C.RP_BUF_SENDING]struct{}
	_ [C.RP_BUF_SENDING - int(fabric.BufSending)]struct{}
)

// EchoSpin runs l's echo in C (echo.c) until it is idle for idle, slice
// passes, or a completion needs the caller; see fabric.Echoer.
func (q *qp) EchoSpin(l *fabric.EchoLoop, idle, slice time.Duration) (fabric.WC, bool, error) {
	const verb = "echo"
	rcq, ok1 := l.RecvCQ.(*cq)
	scq, ok2 := l.SendCQ.(*cq)
	if !ok1 || !ok2 || rcq == nil || scq == nil {
		return fabric.WC{}, false, verr(verb, syscall.EINVAL, "not verbs CQs")
	}
	if l.Depth < 1 || l.Size < 1 || len(l.Bufs) != 2*l.Depth || l.Inflight < 0 || l.Inflight > l.Depth {
		return fabric.WC{}, false, verr(verb, syscall.EINVAL, fmt.Sprintf("depth %d, size %d, %d buffers, %d in flight", l.Depth, l.Size, len(l.Bufs), l.Inflight))
	}
	rm, err := sgeMR(verb, l.RecvMR, l.RecvOff, l.Depth*l.Size)
	if err != nil {
		return fabric.WC{}, false, err
	}
	sm, err := sgeMR(verb, l.SendMR, l.SendOff, l.Depth*l.Size)
	if err != nil {
		return fabric.WC{}, false, err
	}
	q.life.RLock()
	defer q.life.RUnlock()
	for _, c := range []*cq{rcq, scq} {
		c.life.RLock()
		defer c.life.RUnlock()
		if c.dead {
			return fabric.WC{}, false, verr("ibv_poll_cq", syscall.EINVAL, "CQ destroyed")
		}
	}
	if q.dead {
		return fabric.WC{}, false, verr("ibv_post_send", syscall.EINVAL, "QP destroyed")
	}
	state := unsafe.Slice((*C.uint8_t)(unsafe.Pointer(&l.Bufs[0])), len(l.Bufs)) // fabric.BufState is a byte
	inflight := C.int(l.Inflight)
	var out C.rp_wc
	var failed C.int
	var vain C.int64_t
	l.Idle = false
	r := C.rp_echo(q.qp, rcq.cq, scq.cq,
		C.uint64_t(rm.addr+uintptr(l.RecvOff)), C.uint32_t(rm.lkey),
		C.uint64_t(sm.addr+uintptr(l.SendOff)), C.uint32_t(sm.lkey),
		C.int(l.Size), C.int(l.Depth), &state[0], &inflight,
		C.int64_t(idle), C.int64_t(slice), &out, &failed, &vain)
	l.Inflight = int(inflight)
	rcq.spun.Add(int64(vain))
	switch {
	case r == C.RP_ECHO_IDLE:
		l.Idle = true
		return fabric.WC{}, false, nil
	case r == C.RP_ECHO_SLICE:
		return fabric.WC{}, false, nil
	case r == C.RP_ECHO_RECV:
		return wcOf(out), true, nil
	case r == C.RP_ECHO_SENDERR:
		w := wcOf(out)
		return fabric.WC{}, false, &fabric.WCError{Op: "send", Status: w.Status}
	}
	name := map[C.int]string{C.RP_VERB_POLL_RECV: "ibv_poll_cq", C.RP_VERB_POLL_SEND: "ibv_poll_cq",
		C.RP_VERB_POST_RECV: "ibv_post_recv", C.RP_VERB_POST_SEND: "ibv_post_send"}[failed]
	return fabric.WC{}, false, verr(name, syscall.Errno(-r), "in the echo loop")
}
