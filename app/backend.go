package app

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/probe"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
)

// backend is the resolved --backend: how points are run and how the run
// is labelled.
type backend struct {
	result.Backend
	childArgs []string
	// open prepares the backend and returns the per-point measure.
	open func(ctx context.Context, cfg runner.Config, run *result.Run, dir string) (probe.Measure, func(), error)
}

// chooseBackend resolves --backend; auto picks verbs, then vm, then sim,
// and says why.
func chooseBackend(c *cli.Context) (*backend, error) {
	req := c.String("backend")
	if c.Bool("sim-in-vm") {
		if req != "sim" {
			return nil, fmt.Errorf("--sim-in-vm runs the sim backend in the guest: it goes with --backend sim, not %s", req)
		}
		return vmBackend(c, "requested with --backend sim --sim-in-vm")
	}
	switch req {
	case "sim":
		return simBackend(c, "requested with --backend sim"), nil
	case "verbs":
		ok, why := hasRDMADevice()
		if !ok {
			return nil, fmt.Errorf("--backend verbs: %s (try --backend vm for Soft-RoCE in a QEMU guest)", why)
		}
		return verbsBackend(c, "requested with --backend verbs; "+why)
	case "vm":
		return vmBackend(c, "requested with --backend vm")
	case "auto":
		if ok, why := hasRDMADevice(); ok {
			return verbsBackend(c, "auto: "+why)
		}
		if ok, why := vmAvailable(); ok {
			return vmBackend(c, "auto: no RDMA device on this host; "+why)
		} else {
			return simBackend(c, "auto: no RDMA device on this host and "+why+
				"; for real Soft-RoCE install qemu-system-x86 linux-image-amd64 rdma-core ibverbs-providers libibverbs-dev (make setup)"), nil
		}
	}
	return nil, fmt.Errorf("unknown --backend %q (want auto, verbs, vm or sim)", req)
}

func simBackend(c *cli.Context, reason string) *backend {
	b := &backend{
		Backend: result.Backend{Name: "sim", Simulated: true, Reason: reason,
			Description: "sim: simulated fabric (pure Go, not an RDMA measurement)"},
		childArgs: childFabricArgs(c, "sim"),
	}
	b.open = localOpen
	return b
}

// localOpen runs points as processes on this host.
func localOpen(ctx context.Context, cfg runner.Config, run *result.Run, dir string) (probe.Measure, func(), error) {
	r, err := runner.NewLocal(cfg)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, n, trial int) (result.Point, error) {
		pt, err := r.RunPoint(ctx, n, trial)
		if r.Device != nil && run.Environment.Device == nil {
			run.Environment.Device = r.Device
		}
		return pt, err
	}, func() {}, nil
}

// verbsBackend and vmBackend are completed by the real-RDMA work; until
// this binary has them they say so in one line.
var verbsBackend = func(c *cli.Context, reason string) (*backend, error) {
	return nil, fmt.Errorf("the verbs backend is not built into this binary")
}

var vmBackend func(c *cli.Context, reason string) (*backend, error)

var vmAvailable func() (bool, string)
