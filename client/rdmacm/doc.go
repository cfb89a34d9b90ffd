// Package rdmacm is the load generator of rdma_cm clients: many RC
// connections (RDMA_PS_TCP) to one server from one event channel, an
// in-flight window of attempts, each step timed as rdma-core's cmtime
// times it, and each failure classed by the CM event that ended it.
//
// Like fabric/verbs, the cgo code is built only with the "verbs" build
// tag (and cgo), since it needs librdmacm-dev's headers; without it Run
// says the binary lacks rdma_cm. The C is in cm.h and cm.c; cm.go only
// includes cm.h.
package rdmacm

import (
	"fmt"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// MaxPrivateData is the most private data an RC connect request carries
// over RoCE and InfiniBand: the CM REQ's 92 bytes less rdma_cm's header.
const MaxPrivateData = 56

// Config is one generator's share of a point.
type Config struct {
	// Addr is the server's host:port (numeric).
	Addr string
	// N connections with IDs IDBase.., in generator Proc.
	N, IDBase, Proc int
	// InFlight bounds the attempts in progress at once (0 = all N).
	InFlight int
	// Rate paces the attempts' starts, per second (0 = no pacing).
	Rate float64
	// Lockstep steps the attempts in batches of InFlight as cmtime
	// does: every address resolved, then every route, then every QP
	// created, then every connect issued; the next batch starts when
	// the last one has ended. Without it each attempt moves on as its
	// own events come (interleaved). Not with Rate.
	Lockstep bool
	// Timeout bounds each attempt, the CM's own timeouts and retries
	// included.
	Timeout time.Duration
	// PrivateData goes with every connect request.
	PrivateData []byte
	// Progress, if set, is told the attempts ended and connected so far.
	Progress func(done, ok int)
	// Ended, if set, is given each attempt's record as it ends (from the
	// one goroutine that runs the event loop).
	Ended func(*result.ClientRecord)
	// TrafficDepth, when above 0, sizes every QP for a traffic phase of
	// that many messages outstanding (Conns.Traffic); 0 means none runs.
	TrafficDepth int
}

// Check refuses a config no attempt could run.
func (c Config) Check() error {
	if c.N < 1 {
		return fmt.Errorf("--n must be at least 1")
	}
	if c.Lockstep && c.Rate > 0 {
		return fmt.Errorf("lockstep batches start together: not with a --rate")
	}
	if len(c.PrivateData) > MaxPrivateData {
		return fmt.Errorf("--cm-private-data: %d bytes, an RC connect request carries at most %d", len(c.PrivateData), MaxPrivateData)
	}
	return nil
}
