package sim

import (
	"time"
)

// The service delay (Options.ServiceDelay) makes a simulated device
// slow on purpose, so tests can plant a known capacity: while at least
// Options.ServiceDelayFrom QPs exist on the device, every frame it
// transmits (SENDs, acknowledgements, READ responses) waits its turn in
// one queue that lets a frame leave ServiceDelay after the previous one,
// like a device that serves one frame at a time. Messages then queue
// behind each other exactly as on an overloaded responder: with N
// clients each keeping one message outstanding, a round trip takes about
// 2·N·ServiceDelay (the echo and the acknowledgement of each client's
// message). Below the threshold frames leave at once. Frames keep their
// order, so the RC transport above is unaffected.

// delayed is a frame waiting its turn.
type delayed struct {
	l   *link
	h   header
	buf []byte // the frame's body, copied
	due time.Time
}

// delayLine is the device's transmit queue while the delay applies.
type delayLine struct {
	every time.Duration
	from  int
	q     chan delayed
	// Guarded by the device's delayMu: when the last queued frame is due,
	// and how many frames are queued and not yet sent.
	last   time.Time
	queued int
}

// delayQueue bounds the frames waiting; a sender finding it full waits.
const delayQueue = 1 << 16

// send transmits a frame on l: at once, or through the delay line while
// the service delay applies, the frame's QP missed the QP context cache
// (Options.QPCache), or frames queued before are still waiting, which
// must leave first.
func (d *device) send(l *link, h header, ext, payload []byte) {
	dl := d.delay
	if dl == nil {
		l.send(h, ext, payload)
		return
	}
	d.delayMu.Lock()
	active := dl.every > 0 && int(d.prov.qpCount.Load()) >= dl.from
	miss := d.cache != nil && h.srcQPN != 0 && d.cache.touch(h.srcQPN)
	if !active && !miss && dl.queued == 0 {
		l.send(h, ext, payload) // under delayMu: nothing queued can overtake it
		d.delayMu.Unlock()
		return
	}
	due := dl.last
	if now := time.Now(); due.Before(now) {
		due = now
	}
	if active {
		due = due.Add(dl.every)
	}
	if miss {
		d.counts.cacheMiss.Add(1)
		due = due.Add(QPCacheMiss)
	}
	dl.last = due
	dl.queued++
	d.delayMu.Unlock()
	body := make([]byte, 0, len(ext)+len(payload))
	body = append(append(body, ext...), payload...)
	select {
	case dl.q <- delayed{l: l, h: h, buf: body, due: due}:
	case <-d.ctx.Done():
	}
}

// runDelay lets the queued frames leave at their due times, until the
// device closes.
func (d *device) runDelay() {
	defer d.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var f delayed
		select {
		case f = <-d.delay.q:
		case <-d.ctx.Done():
			return
		}
		if wait := time.Until(f.due); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-d.ctx.Done():
				return
			}
		}
		d.delayMu.Lock()
		f.l.send(f.h, nil, f.buf)
		d.delay.queued--
		d.delayMu.Unlock()
	}
}
