package sim

import (
	"container/list"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// The simulated device's own counters, under rxe's names where rxe
// counts the same event (fabric.CounterReader): a responder that had no
// receive posted sends an RNR NAK (send_rnr_err), its requester receives
// it (rcvd_rnr_err); qp_cache_miss counts frames sent from a QP outside
// the QP context cache (Options.QPCache).
type counters struct {
	sendRNR, rcvdRNR, cacheMiss atomic.Uint64
}

var _ fabric.CounterReader = (*device)(nil)

// Counters are the device's simulated counters (fabric.CounterReader).
func (d *device) Counters() map[string]uint64 {
	m := map[string]uint64{
		"send_rnr_err": d.counts.sendRNR.Load(),
		"rcvd_rnr_err": d.counts.rcvdRNR.Load(),
	}
	if d.cache != nil {
		m["qp_cache_miss"] = d.counts.cacheMiss.Load()
	}
	return m
}

// QPCacheMiss is what a frame sent from a QP outside the QP context
// cache waits, in the device's transmit queue (delay.go), as a NIC
// fetching the context from host memory stalls its pipeline. It is set
// well above the time the sim itself takes to move a message, so a
// working set past the cache costs the device at least half its rate:
// misses wait one after another, so past the cache the device sends at
// most 4,000 frames a second, under half of what a 2-core host's sim
// moves at its peak even when it runs slow.
const QPCacheMiss = 250 * time.Microsecond

// qpCache is an LRU set of QP numbers: the QP contexts a NIC holds on
// chip. Guarded by the device's delayMu.
type qpCache struct {
	size  int
	order *list.List // front: most recently used
	at    map[uint32]*list.Element
}

func newQPCache(size int) *qpCache {
	return &qpCache{size: size, order: list.New(), at: map[uint32]*list.Element{}}
}

// touch marks qpn used and reports whether it was missing (a miss),
// evicting the least recently used context when the cache is full.
func (c *qpCache) touch(qpn uint32) bool {
	if e, ok := c.at[qpn]; ok {
		c.order.MoveToFront(e)
		return false
	}
	if c.order.Len() >= c.size {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.at, old.Value.(uint32))
	}
	c.at[qpn] = c.order.PushFront(qpn)
	return true
}
