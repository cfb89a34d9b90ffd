package rdmacm

import (
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// Use is what a run asks of its rdma_cm clients.
type Use struct {
	// ServerCmd: the server is the operator's (a --server-cmd, or an
	// address given by hand); ClientCmd: the clients are a command's.
	ServerCmd, ClientCmd bool
	// Mode is the server design asked for (--mode).
	Mode string
	// Lockstep steps the connections in batches (--cm-steps lockstep);
	// Rate paces their starts (--connect-rate).
	Lockstep    bool
	Rate        float64
	PrivateData []byte
	// ServerEchoes: the server echoes (--cm-server-echoes), so Traffic
	// runs; without it no traffic phase runs at all.
	ServerEchoes bool
	Traffic      client.TrafficConfig
	// Judged is the flag that judges the traffic phase (--criterion
	// traffic, --require N:traffic), "" for none.
	Judged string
}

// Refuse says, in one sentence, what of u rdma_cm clients cannot do, or
// returns nil. Every entry point asks it (runner.Spec.Check, a
// generator started by hand), so each rule is said once.
func Refuse(u Use) error {
	switch {
	case u.ClientCmd:
		return fmt.Errorf("--client-kind rdmacm and --client-cmd: the clients are one or the other")
	case !u.ServerCmd:
		return fmt.Errorf("--client-kind rdmacm needs an rdma_cm server: --server-cmd")
	case u.Mode == server.ModeUD || u.Mode == server.ModeMux:
		return fmt.Errorf("--mode %s is the built-in server's and clients' protocol: not with rdma_cm clients, which make one RC connection each", u.Mode)
	case u.Lockstep && u.Rate > 0:
		return fmt.Errorf("--cm-steps lockstep starts each batch at once: not with --connect-rate")
	case len(u.PrivateData) > MaxPrivateData:
		return fmt.Errorf("--cm-private-data: %d bytes, an RC connect request carries at most %d", len(u.PrivateData), MaxPrivateData)
	case u.Judged != "" && !u.ServerEchoes:
		return fmt.Errorf("%s needs a traffic phase: rdma_cm clients (--client-kind rdmacm) run no traffic phase unless the server echoes (--cm-server-echoes)", u.Judged)
	case u.ServerEchoes && u.Traffic.Duration > 0 && u.Traffic.Op != "" && u.Traffic.Op != result.OpSend:
		return fmt.Errorf("--op %s: rdma_cm clients send and the server echoes; RDMA WRITE and READ need an address and key the server hands over, which rdma_cm servers do not", u.Traffic.Op)
	}
	return nil
}
