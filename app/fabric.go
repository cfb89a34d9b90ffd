package app

import (
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
)

// fabricFlags select and configure the fabric. The same flags are passed
// down to the server and load-generator processes.
func fabricFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "backend", Value: "auto", Usage: "where QPs come from: auto, verbs (RDMA device on this host), vm (Soft-RoCE in a QEMU guest), sim (pure-Go simulated fabric)"},
		&cli.StringFlag{Name: "device", Usage: "RDMA device name (default: the first one)"},
		&cli.IntFlag{Name: "port", Value: 1, Usage: "device port"},
		&cli.IntFlag{Name: "gid-index", Value: -1, Usage: "GID index; -1 picks the first RoCE v2 IPv4-mapped GID"},
		&cli.IntFlag{Name: "sim-max-qp", Usage: "sim: the server device's max_qp (default: what rxe reports)"},
		&cli.IntFlag{Name: "sim-max-cq", Usage: "sim: the server device's max_cq"},
		&cli.IntFlag{Name: "sim-max-mr", Usage: "sim: the server device's max_mr"},
		&cli.IntFlag{Name: "sim-max-pd", Usage: "sim: the server device's max_pd"},
	}
}

func deviceConfig(c *cli.Context) fabric.DeviceConfig {
	return fabric.DeviceConfig{Name: c.String("device"), Port: c.Int("port"), GIDIndex: c.Int("gid-index")}
}

func simCaps(c *cli.Context) fabric.Caps {
	caps := sim.DefaultCaps()
	set := func(flag string, dst *int) {
		if v := c.Int(flag); v > 0 {
			*dst = v
		}
	}
	set("sim-max-qp", &caps.MaxQP)
	set("sim-max-cq", &caps.MaxCQ)
	set("sim-max-mr", &caps.MaxMR)
	set("sim-max-pd", &caps.MaxPD)
	return caps
}

// childFabricArgs are the flags that make a server or load generator use
// the fabric this process resolved (never "auto": the parent decided).
func childFabricArgs(c *cli.Context, backend string) []string {
	args := []string{"--backend", backend, "--port", strconv.Itoa(c.Int("port")),
		"--gid-index", strconv.Itoa(c.Int("gid-index"))}
	if d := c.String("device"); d != "" {
		args = append(args, "--device", d)
	}
	return args
}

// simCapArgs are the simulated device caps. They go to the server only:
// the simulated device lives in one process, and what the caps model is
// the device of the server under test; load generators get rxe's caps.
func simCapArgs(c *cli.Context) []string {
	var args []string
	for _, f := range []string{"sim-max-qp", "sim-max-cq", "sim-max-mr", "sim-max-pd"} {
		if v := c.Int(f); v > 0 {
			args = append(args, "--"+f, strconv.Itoa(v))
		}
	}
	return args
}

// provider opens the fabric for serve and clients, which run on a fabric
// the parent already chose (verbs or sim; vm runs them as verbs inside
// the guest).
func provider(c *cli.Context) (fabric.Provider, error) {
	switch b := c.String("backend"); b {
	case "sim":
		return sim.New(sim.Options{Caps: simCaps(c)}), nil
	case "verbs", "auto":
		if p := verbsProvider(); p != nil {
			return p, nil
		}
		if b == "auto" {
			return sim.New(sim.Options{Caps: simCaps(c)}), nil
		}
		return nil, fmt.Errorf("this binary was built without verbs support: build with `make` (needs libibverbs-dev) or use --backend sim")
	default:
		return nil, fmt.Errorf("backend %q cannot serve directly (want verbs or sim)", b)
	}
}

// verbsProvider returns the libibverbs fabric when this binary has it;
// the verbs build sets it in a tagged file.
var verbsProvider = func() fabric.Provider { return nil }

// hasRDMADevice reports whether the host kernel exposes an RDMA device.
func hasRDMADevice() (bool, string) {
	ents, err := os.ReadDir("/sys/class/infiniband")
	if err != nil || len(ents) == 0 {
		return false, "no RDMA device in /sys/class/infiniband"
	}
	return true, "RDMA device " + ents[0].Name() + " on this host"
}
