//go:build verbs && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// evBatch is how many CQ events one C call drains.
const evBatch = 64

// events drains the completion channel whenever the netpoller says it is
// readable. It ends when Close closes the file.
func (d *device) events(rc syscall.RawConn) {
	defer close(d.done)
	ids := unsafe.Slice((*uintptr)(unsafe.Pointer(d.evIDs)), evBatch)
	var fatal syscall.Errno
	err := rc.Read(func(uintptr) bool {
		for {
			n := int(C.rp_drain_events(d.ch, d.evIDs, evBatch))
			if n < 0 {
				fatal = syscall.Errno(-n)
				return true
			}
			d.cqMu.RLock()
			for _, id := range ids[:n] {
				if c := d.cqs[id]; c != nil {
					c.signal()
				}
			}
			d.cqMu.RUnlock()
			if n < evBatch {
				return false // drained to EAGAIN: wait for the next edge
			}
		}
	})
	if fatal != 0 || (err != nil && !errors.Is(err, os.ErrClosed)) {
		// The channel is unusable: fail every waiter with the errno rather
		// than let it hang until its context ends.
		d.cqMu.Lock()
		for _, c := range d.cqs {
			c.broken(fatal)
		}
		d.cqMu.Unlock()
	}
}
