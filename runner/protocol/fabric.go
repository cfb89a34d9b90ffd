package protocol

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
)

// Fabric is the fabric a server or load generator opens. The parent
// resolved it: Backend is "verbs" or "sim", never "vm" (the guest runs
// verbs) and, from the runner, never "auto".
type Fabric struct {
	Backend  string `json:"backend"`
	Device   string `json:"device,omitempty"`
	Port     int    `json:"port,omitempty"`
	GIDIndex int    `json:"gid_index"`
	// Addr is the simulated port's IPv4 address (fabric.DeviceConfig):
	// where a sim server or generator on another host is reached.
	// Toward, when Addr is "", has the port take this host's address
	// towards that IP (the server's), as routing picks it.
	Addr   string `json:"addr,omitempty"`
	Toward string `json:"toward,omitempty"`
	// SimMax* are the simulated server device's caps (0 = what rxe
	// reports). They apply to the server only: the simulated device
	// lives in one process, and what the caps model is the device of
	// the server under test; load generators get rxe's caps.
	SimMaxQP int `json:"sim_max_qp,omitempty"`
	SimMaxCQ int `json:"sim_max_cq,omitempty"`
	SimMaxMR int `json:"sim_max_mr,omitempty"`
	SimMaxPD int `json:"sim_max_pd,omitempty"`
	// SimServiceDelay makes the simulated server device transmit one
	// frame per delay once it has SimServiceDelayFrom QPs or more
	// (sim.Options.ServiceDelay): a server slow on purpose, to plant the
	// client count at which latency crosses an SLO. Server only.
	SimServiceDelay     time.Duration `json:"sim_service_delay,omitempty"`
	SimServiceDelayFrom int           `json:"sim_service_delay_from,omitempty"`
	// SimUDLoss makes the simulated server device drop every
	// SimUDLoss-th datagram it receives (sim.Options.UDDropEvery): loss
	// on purpose, for ud mode. Server only.
	SimUDLoss int `json:"sim_ud_loss,omitempty"`
	// SimQPCache gives the simulated server device an LRU cache of that
	// many QP contexts (sim.Options.QPCache): past it the device's rate
	// falls, a NIC's bend planted on purpose. Server only.
	SimQPCache int `json:"sim_qp_cache,omitempty"`
}

// DeviceConfig is the device to open.
func (f Fabric) DeviceConfig() fabric.DeviceConfig {
	addr := f.Addr
	if addr == "" && f.Toward != "" {
		addr = sourceAddr(f.Toward)
	}
	return fabric.DeviceConfig{Name: f.Device, Port: f.Port, GIDIndex: f.GIDIndex, Addr: addr}
}

// sourceAddr is the address this host sends from towards ip, "" if it
// has no route: a UDP socket's connect picks it and sends nothing.
func sourceAddr(ip string) string {
	c, err := net.Dial("udp", net.JoinHostPort(ip, "9"))
	if err != nil {
		return ""
	}
	defer c.Close()
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// SimCaps are the simulated device's caps: rxe's, lowered by SimMax*.
func (f Fabric) SimCaps() fabric.Caps {
	caps := sim.DefaultCaps()
	set := func(v int, dst *int) {
		if v > 0 {
			*dst = v
		}
	}
	set(f.SimMaxQP, &caps.MaxQP)
	set(f.SimMaxCQ, &caps.MaxCQ)
	set(f.SimMaxMR, &caps.MaxMR)
	set(f.SimMaxPD, &caps.MaxPD)
	return caps
}

// Generators is the fabric for load generators: without the server's
// simulated caps and delay.
func (f Fabric) Generators() Fabric {
	f.SimMaxQP, f.SimMaxCQ, f.SimMaxMR, f.SimMaxPD = 0, 0, 0, 0
	f.SimServiceDelay, f.SimServiceDelayFrom, f.SimUDLoss, f.SimQPCache = 0, 0, 0, 0
	return f
}

// simOptions are the simulated device's options.
func (f Fabric) simOptions() sim.Options {
	return sim.Options{Caps: f.SimCaps(), ServiceDelay: f.SimServiceDelay, ServiceDelayFrom: f.SimServiceDelayFrom,
		UDDropEvery: f.SimUDLoss, QPCache: f.SimQPCache}
}

// Provider opens the fabric: sim, or libibverbs when this binary has it
// ("auto" falls back to sim, for `serve` and `clients` run by hand).
func (f Fabric) Provider() (fabric.Provider, error) {
	p, _, err := f.ServerProvider()
	return p, err
}

// ServerProvider is Provider with what a server's admission reads of it
// (server.Config.InUse): the objects in use when the fabric counts its
// own, as the simulated one does; nil on a real device, whose objects
// the kernel counts.
func (f Fabric) ServerProvider() (fabric.Provider, func() map[string]int, error) {
	simulated := func() (fabric.Provider, func() map[string]int, error) {
		p := sim.New(f.simOptions())
		return p, p.InUse, nil
	}
	switch f.Backend {
	case "sim":
		return simulated()
	case "verbs", "auto":
		if verbs.Supported() {
			return verbs.New(), nil, nil
		}
		if f.Backend == "auto" {
			return simulated()
		}
		return nil, nil, fmt.Errorf("this binary was built without verbs support: build with `make` (needs libibverbs-dev) or use --backend sim")
	default:
		return nil, nil, fmt.Errorf("backend %q cannot serve directly (want verbs or sim)", f.Backend)
	}
}

// HasVerbs reports whether this binary has the libibverbs fabric.
func HasVerbs() bool { return verbs.Supported() }

// HostRDMADevice names the host's first RDMA device, "" if its kernel
// exposes none.
func HostRDMADevice() string {
	if ents, err := os.ReadDir("/sys/class/infiniband"); err == nil && len(ents) > 0 {
		return ents[0].Name()
	}
	return ""
}

// HasRDMADevice reports whether the host kernel exposes an RDMA device,
// and says which or that none.
func HasRDMADevice() (bool, string) {
	if d := HostRDMADevice(); d != "" {
		return true, "RDMA device " + d + " on this host"
	}
	return false, "no RDMA device in /sys/class/infiniband"
}
