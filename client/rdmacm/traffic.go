//go:build verbs && cgo

package rdmacm

/*
#include <stdlib.h>
#include "cm.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/hist"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// cmFlow is one held connection's traffic: depth receive buffers and
// depth send buffers in one registered region, and its messages
// outstanding in the order they were sent (RC echoes come back in it).
type cmFlow struct {
	i     int // the connection's index in Conns
	buf   []byte
	out   []sent
	seq   uint64
	count int64 // echoes verified inside the window
	lost  int64 // messages outstanding when it failed
	fail  string
	why   string
}

type sent struct {
	slot int
	seq  uint64
	at   time.Time
}

// A work request's id: connection index, kind, buffer.
func cmWRID(i int, recv bool, slot int) C.uint64_t {
	k := uint64(0)
	if recv {
		k = 1
	}
	return C.uint64_t(uint64(i)<<32 | k<<31 | uint64(slot))
}

// Traffic runs the traffic phase on every held connection, for a server
// that posts receives and echoes each message back as it came (the
// operator says so with --cm-server-echoes): closed loop, cfg.Depth
// SENDs of size bytes outstanding per connection, each counted once its
// echo arrived inside the window and verified (payload.Check, and the
// sequence sent). The window is client.TrafficConfig's: at least
// Duration, extended until every connection completed one message (up
// to MaxDuration), ended with the other generators' when Shared. ctx
// ending stops it; the report says so.
func (h *Conns) Traffic(ctx context.Context, cfg client.TrafficConfig, size int) result.Traffic {
	depth := max(cfg.Depth, 1)
	if cfg.Timeout <= 0 {
		cfg.Timeout = client.DefaultMsgTimeout
	}
	cfg.MaxDuration = max(cfg.MaxDuration, cfg.Duration)
	rep := result.Traffic{Op: result.OpSend, MsgBytes: size, Depth: depth, LatencyHist: hist.Latency(),
		ClientHist: hist.Counts(), GeneratorCores: runtime.GOMAXPROCS(0), MinDurationSec: cfg.Duration.Seconds()}
	var flows []*cmFlow
	byConn := map[int]*cmFlow{}
	for i := range h.conns {
		if h.conns[i].step == stepHeld && h.conns[i].id != nil {
			f := &cmFlow{i: i}
			flows = append(flows, f)
			byConn[i] = f
		}
	}
	rep.Clients = len(flows)
	if len(flows) == 0 || cfg.Duration <= 0 {
		return rep
	}
	if depth > h.depth {
		rep.Error = fmt.Sprintf("depth %d is more than the %d the connections were made for", depth, h.depth)
		return rep
	}
	pending := -1 // flows not measured and not failed, once counted
	var measured func()
	failf := func(f *cmFlow, class string, err error) {
		if f.fail != "" {
			return
		}
		f.fail, f.why, f.lost = class, err.Error(), int64(max(len(f.out), 1))
		f.out = nil
		if pending > 0 && f.count < client.MinMessages {
			if pending--; pending == 0 {
				measured()
			}
		}
	}
	post := func(f *cmFlow, recv bool, slot int) error {
		c := &h.conns[f.i]
		addr := unsafe.Pointer(&f.buf[slot*size])
		var e C.int
		if recv {
			e = C.rp_cm_post_recv(c.id, c.mr, addr, C.uint32_t(size), cmWRID(f.i, true, slot))
		} else {
			e = C.rp_cm_post_send(c.id, c.mr, addr, C.uint32_t(size), cmWRID(f.i, false, slot))
		}
		if e != 0 {
			return syscall.Errno(-e)
		}
		return nil
	}
	// send fills send buffer slot with the flow's next message and posts
	// it.
	send := func(f *cmFlow, slot int, now time.Time) {
		f.seq++
		payload.Fill(f.buf[(depth+slot)*size:], f.seq, size)
		if err := post(f, false, depth+slot); err != nil {
			failf(f, result.TrafficPost, fmt.Errorf("post send: %w", err))
			return
		}
		f.out = append(f.out, sent{slot: slot, seq: f.seq, at: now})
	}
	// Receives first, for every connection, then the first messages: an
	// echo must find its receive posted.
	for _, f := range flows {
		c := &h.conns[f.i]
		n := 2 * depth * size
		p := C.malloc(C.size_t(n))
		if p == nil {
			failf(f, result.TrafficPost, fmt.Errorf("no memory for %d bytes", n))
			continue
		}
		c.buf = p
		f.buf = unsafe.Slice((*byte)(p), n)
		if e := C.rp_cm_reg(h.g, c.id, p, C.size_t(n), &c.mr); e != 0 {
			failf(f, result.TrafficPost, fmt.Errorf("ibv_reg_mr: %w", syscall.Errno(-e)))
			continue
		}
		for j := 0; j < depth; j++ {
			if err := post(f, true, j); err != nil {
				failf(f, result.TrafficPost, fmt.Errorf("post receive %d: %w", j, err))
				break
			}
		}
	}
	cpu0, sys0 := collectors.SelfCPU()
	start := time.Now()
	minEnd, end := start.Add(cfg.Duration), start.Add(cfg.MaxDuration)
	var shared <-chan struct{}
	measured = func() {
		if cfg.Shared == nil {
			end = later(minEnd, time.Now())
			return
		}
		go cfg.Shared.Measured()
		shared = cfg.Shared.End
	}
	for _, f := range flows {
		for j := 0; j < depth && f.fail == ""; j++ {
			send(f, j, start)
		}
	}
	pending = 0
	for _, f := range flows {
		if f.fail == "" {
			pending++
		}
	}
	if pending == 0 {
		measured()
	}
	var messages int64
	lastProgress, lastTimeouts := start, start
	wcs := make([]C.rp_cm_wc, 256)
	stopped := false
	for {
		now := time.Now()
		if shared != nil {
			select {
			case <-shared:
				end, shared = earlier(end, later(minEnd, now)), nil
			default:
			}
		}
		if ctx.Err() != nil {
			stopped = true
			end = earlier(end, now)
		}
		if !now.Before(end) {
			break
		}
		if now.Sub(lastTimeouts) >= pollSlice {
			lastTimeouts = now
			for _, f := range flows {
				if f.fail == "" && len(f.out) > 0 && now.Sub(f.out[0].at) > cfg.Timeout {
					failf(f, result.TrafficTimeout, fmt.Errorf("no echo within %v", cfg.Timeout))
				}
			}
		}
		if cfg.Progress != nil && now.Sub(lastProgress) >= time.Second {
			lastProgress = now
			cfg.Progress(messages)
		}
		wait := min(pollSlice, end.Sub(now))
		n := C.rp_cm_poll(h.g, C.int(max(wait, time.Millisecond)/time.Millisecond), &wcs[0], C.int(len(wcs)))
		if n < 0 {
			rep.Error = fmt.Sprintf("poll the completion queues: %v", syscall.Errno(-n))
			break
		}
		now = time.Now()
		for _, wc := range wcs[:n] {
			id := uint64(wc.wr_id)
			f := byConn[int(id>>32)]
			if f == nil || f.fail != "" {
				continue
			}
			recv, slot := id>>31&1 == 1, int(id&(1<<31-1))
			if st := fabric.WCStatus(wc.status); st != fabric.WCSuccess {
				failf(f, st.Name(), fmt.Errorf("%s completion %s", map[bool]string{true: "receive", false: "send"}[recv], st.Name()))
				continue
			}
			if !recv {
				continue // its echo counts it
			}
			if len(f.out) == 0 {
				failf(f, result.TrafficVerify, fmt.Errorf("an echo with no message outstanding"))
				continue
			}
			m := f.out[0]
			f.out = f.out[1:]
			got := f.buf[slot*size : slot*size+int(wc.byte_len)]
			seq, err := payload.Check(got)
			if err == nil && (int(wc.byte_len) != size || seq != m.seq) {
				err = fmt.Errorf("echo of %d bytes with sequence %d, want %d bytes with %d", wc.byte_len, seq, size, m.seq)
			}
			if err != nil {
				failf(f, result.TrafficVerify, err)
				continue
			}
			if now.Before(end) {
				rep.LatencyHist.RecordDuration(now.Sub(m.at))
				f.count++
				messages++
				if f.count == client.MinMessages {
					if pending--; pending == 0 {
						measured()
					}
				}
			}
			if err := post(f, true, slot); err != nil {
				failf(f, result.TrafficPost, fmt.Errorf("post receive: %w", err))
				continue
			}
			if now.Before(end) {
				send(f, m.slot, now)
			}
		}
	}
	elapsed := time.Since(start)
	rep.DurationSec = min(elapsed, end.Sub(start)).Seconds()
	cpu, sys := collectors.SelfCPU()
	rep.GeneratorCPU = (cpu - cpu0).Seconds() / elapsed.Seconds()
	rep.GeneratorSys = (sys - sys0).Seconds() / elapsed.Seconds()
	if stopped {
		rep.Error = fmt.Sprintf("interrupted after %.1fs of the %v phase", elapsed.Seconds(), cfg.Duration)
	}
	for _, f := range flows {
		rep.ClientHist.Record(f.count)
		rep.Messages += f.count
		if f.count < client.MinMessages {
			rep.AddUnmeasured(h.idBase + f.i)
		}
		class, why, lost := f.fail, f.why, f.lost
		if class == "" && stopped && len(f.out) > 0 {
			class, why, lost = result.TrafficInterrupted, "interrupted", int64(len(f.out))
		}
		if class == "" {
			continue
		}
		if rep.Errors == nil {
			rep.Errors, rep.ErrorText = map[string]int64{}, map[string]string{}
		}
		rep.Errors[class] += lost
		if _, ok := rep.ErrorText[class]; !ok {
			rep.ErrorText[class] = why
		}
		if class != result.TrafficInterrupted {
			rep.ClientsFailed++
		}
	}
	rep.Bytes = rep.Messages * int64(size)
	rep.Summarize()
	return rep
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
