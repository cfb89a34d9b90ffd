package server

import (
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// spinTally creates and destroys the server's CQs and keeps their
// count of vain polling (fabric.SpinCounter): the CPU the server's
// busy-polling loops (Config.BusyPoll) spent waiting for completions,
// which its process's CPU time cannot tell from work. A destroyed CQ's
// count stays in the total.
type spinTally struct {
	dev  fabric.Device
	mu   sync.Mutex
	live map[fabric.CQ]struct{}
	gone time.Duration
}

func newSpinTally(dev fabric.Device) *spinTally {
	return &spinTally{dev: dev, live: map[fabric.CQ]struct{}{}}
}

// create is dev.CreateCQ, tallied.
func (t *spinTally) create(n int) (fabric.CQ, error) {
	cq, err := t.dev.CreateCQ(n)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.live[cq] = struct{}{}
	t.mu.Unlock()
	return cq, nil
}

// destroy is cq.Destroy; its count moves to the total's gone part.
func (t *spinTally) destroy(cq fabric.CQ) error {
	t.mu.Lock()
	if _, ok := t.live[cq]; ok {
		delete(t.live, cq)
		if sc, ok := cq.(fabric.SpinCounter); ok {
			t.gone += sc.Spun()
		}
	}
	t.mu.Unlock()
	return cq.Destroy()
}

// total is the vain polling of every CQ the server has had.
func (t *spinTally) total() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.gone
	for cq := range t.live {
		if sc, ok := cq.(fabric.SpinCounter); ok {
			d += sc.Spun()
		}
	}
	return d
}

// Spun is the time the server's busy-polling loops (Config.BusyPoll)
// have spent polling empty CQs so far: the part of its process's CPU
// time that was waiting for clients, not serving them.
func (s *Server) Spun() time.Duration { return s.cqs.total() }

// Idles is how many times a client's echo loop run by the provider
// (fabric.Echoer, busy-polled) came back idle, with no message for
// Config.BusyPoll, and went to wait on its completion channel. A phase
// that keeps the loop busy adds none: the loop's slices end without a
// sleep.
func (s *Server) Idles() int64 { return s.idles.Load() }
