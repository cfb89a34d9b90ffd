// Package rdmacm is the load generator of rdma_cm clients: many RC
// connections to one server from one connection manager's event channel
// (fabric.CM), an in-flight window of attempts, each step timed as
// rdma-core's cmtime times it, and each failure classed by the CM event
// that ended it. Each connection it makes is a client of the client
// engine (client.Dialer.Adopt): librdmacm creates its QP on the engine's
// PD and shared CQ and connects it (fabric/verbs says why that way), and
// the engine runs the traffic phase as it does for the built-in clients.
package rdmacm

import (
	"fmt"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// MaxPrivateData is the most private data a connect request carries.
const MaxPrivateData = fabric.MaxCMPrivateData

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
	// Engine is the client engine the connections become clients of:
	// its MsgSize, Depth and BusyPoll size their queues and buffers and
	// run their traffic phase (the rest is the built-in clients').
	Engine client.Config
	// Progress, if set, is told the attempts ended and connected so far.
	Progress func(done, ok int)
	// Ended, if set, is given each attempt's record as it ends (from the
	// one goroutine that runs the event loop).
	Ended func(*result.ClientRecord)
}

// Check refuses a config no attempt could run.
func (c Config) Check() error {
	if c.N < 1 {
		return fmt.Errorf("--n must be at least 1")
	}
	return Refuse(Use{ServerCmd: true, Lockstep: c.Lockstep, Rate: c.Rate, PrivateData: c.PrivateData})
}
