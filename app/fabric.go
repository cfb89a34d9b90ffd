package app

import (
	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// fabricFlags select and configure the fabric. The runner passes what
// they resolve to (protocol.Fabric) to the server and load generators.
func fabricFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "backend", Value: "auto", Usage: "where QPs come from: auto, verbs (RDMA device on this host), vm (Soft-RoCE in a QEMU guest), sim (pure-Go simulated fabric)"},
		&cli.StringFlag{Name: "device", Usage: "RDMA device name (default: the first one)"},
		&cli.IntFlag{Name: "device-port", Value: 1, Usage: "device port"},
		&cli.IntFlag{Name: "gid-index", Value: -1, Usage: "GID index; -1 picks the first RoCE v2 IPv4-mapped GID"},
		&cli.IntFlag{Name: "sim-max-qp", Usage: "sim: the server device's max_qp (default: what rxe reports)"},
		&cli.IntFlag{Name: "sim-max-cq", Usage: "sim: the server device's max_cq"},
		&cli.IntFlag{Name: "sim-max-mr", Usage: "sim: the server device's max_mr"},
		&cli.IntFlag{Name: "sim-max-pd", Usage: "sim: the server device's max_pd"},
		&cli.DurationFlag{Name: "sim-service-delay", Usage: "sim: the server device transmits one frame per this delay (a server slow on purpose, to plant where latency crosses an SLO)"},
		&cli.IntFlag{Name: "sim-service-delay-from", Usage: "sim: apply --sim-service-delay only once the server device has this many QPs (0 = always)"},
		&cli.IntFlag{Name: "sim-qp-cache", Usage: "sim: the server device keeps this many QP contexts in an LRU cache (0 = no cache); a message on a QP outside it waits a simulated miss, so the rate falls past this many clients (a NIC's bend, planted)"},
		&cli.IntFlag{Name: "sim-ud-loss", Usage: "sim: the server device drops every Nth datagram it receives (--mode ud; 0 = none): loss on purpose, counted as lost"},
	}
}

// fabricSpec is the fabric the flags select, on backend ("verbs", "sim",
// or "auto" for serve and clients run by hand).
func fabricSpec(c *cli.Context, backend string) protocol.Fabric {
	return protocol.Fabric{Backend: backend, Device: c.String("device"), Port: c.Int("device-port"),
		GIDIndex: c.Int("gid-index"), SimMaxQP: c.Int("sim-max-qp"), SimMaxCQ: c.Int("sim-max-cq"),
		SimMaxMR: c.Int("sim-max-mr"), SimMaxPD: c.Int("sim-max-pd"),
		SimServiceDelay: c.Duration("sim-service-delay"), SimServiceDelayFrom: c.Int("sim-service-delay-from"),
		SimUDLoss: c.Int("sim-ud-loss"), SimQPCache: c.Int("sim-qp-cache")}
}
