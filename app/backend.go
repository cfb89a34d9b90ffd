package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/launch"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
)

// backend is the resolved --backend: how the run is labelled, the
// fabric its servers and generators open, and how its points are run.
type backend struct {
	result.Backend
	fabric protocol.Fabric
	// guest, if set, runs the points inside a Soft-RoCE guest.
	guest *vm.GuestOptions
	// targetDirs go into the guest for server and client commands.
	targetDirs []string
	// buildCache holds --server-build's outputs ("" = the default).
	buildCache string
	// remote, if set, places the load generators on other hosts; out is
	// told how the hosts were prepared.
	remote *launch.Placement
	out    io.Writer
}

// targetDevice is the RDMA device a run with commands counts resources
// on: in the guest, the netdev device (vm.NewGuest).
func (b *backend) targetDevice(spec runner.Spec) string {
	if b.guest != nil {
		return vm.GuestNetdevDevice
	}
	return spec.Fabric.Device
}

// targetAddr is what client commands dial.
func (b *backend) targetAddr(spec runner.Spec) string {
	switch {
	case spec.Server != nil && spec.Server.Addr != "":
		return spec.Server.Addr
	case b.guest != nil:
		return vm.GuestNetdevAddr
	}
	return "127.0.0.1"
}

// open returns the Runner of spec's points: a Local one on this host, or
// a Guest, which boots here. dir is the run's directory.
func (b *backend) open(ctx context.Context, spec runner.Spec, dir string, local runner.LocalOptions) (runner.Runner, error) {
	local.WorkDir = filepath.Join(dir, "points")
	cache := b.buildCache
	if cache == "" {
		cache = runner.DefaultBuildCache()
	}
	if spec.Server != nil && len(spec.Server.Build) > 0 {
		local.Build = runner.NewBuilder(spec.Server.Build, cache)
	}
	if b.guest == nil {
		if spec.Fabric.Backend == "verbs" {
			exe, err := verbsbin.Path(ctx)
			if err != nil {
				return nil, err
			}
			local.Exe = exe
		}
		if b.remote != nil {
			exe := local.Exe
			if exe == "" {
				var err error
				if exe, err = os.Executable(); err != nil {
					return nil, err
				}
			}
			l, srv, err := b.remote.Open(ctx, &spec, exe, b.out)
			if err != nil {
				return nil, err
			}
			local.Launcher, local.ServerHost, local.Out = l, srv, b.out
		}
		return runner.NewLocal(spec, local)
	}
	opts := *b.guest
	opts.ConsoleLog = filepath.Join(dir, "guest-console.log")
	opts.TargetDirs, opts.BuildCache = b.targetDirs, cache
	opts.ProfileDir, opts.Progress = local.ProfileDir, local.Progress
	return vm.NewGuest(ctx, spec, opts)
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
		ok, why := protocol.HasRDMADevice()
		if !ok {
			return nil, fmt.Errorf("--backend verbs: %s (try --backend vm for Soft-RoCE in a QEMU guest)", why)
		}
		return verbsBackend(c, "requested with --backend verbs; "+why), nil
	case "vm":
		return vmBackend(c, "requested with --backend vm")
	case "auto":
		if ok, why := protocol.HasRDMADevice(); ok {
			return verbsBackend(c, "auto: "+why), nil
		}
		if ok, why := vm.GuestAvailable(); ok {
			return vmBackend(c, "auto: no RDMA device on this host; "+why)
		} else {
			return simBackend(c, "auto: no RDMA device on this host and "+why+
				"; for real Soft-RoCE install qemu-system-x86 linux-image-amd64 rdma-core ibverbs-providers libibverbs-dev (make setup)"), nil
		}
	}
	return nil, fmt.Errorf("unknown --backend %q (want auto, verbs, vm or sim)", req)
}

func simBackend(c *cli.Context, reason string) *backend {
	return &backend{
		Backend: result.Backend{Name: "sim", Simulated: true, Reason: reason,
			Description: "sim: simulated fabric (pure Go, not an RDMA measurement)"},
		fabric: fabricSpec(c, "sim"),
	}
}

func verbsBackend(c *cli.Context, reason string) *backend {
	return &backend{
		Backend: result.Backend{Name: "verbs", Reason: reason,
			Description: "verbs: RDMA device on this host"},
		fabric: fabricSpec(c, "verbs"),
	}
}

// vmBackend runs the verbs fabric on rxe0 inside the guest (or, with
// --sim-in-vm, the simulated one).
func vmBackend(c *cli.Context, reason string) (*backend, error) {
	if ok, why := vm.GuestAvailable(); !ok {
		return nil, fmt.Errorf("--backend vm: %s", why)
	}
	opts := guestOptions(c)
	if err := opts.Check(); err != nil {
		return nil, err
	}
	b := &backend{
		Backend: result.Backend{Name: "vm", Reason: reason,
			Description: "vm: rxe0 (Soft-RoCE in a QEMU guest)"},
		// The guest's device, port 1, its first RoCE v2 IPv4-mapped GID.
		fabric:     protocol.Fabric{Backend: "verbs", Port: 1, GIDIndex: -1},
		guest:      &opts,
		targetDirs: c.StringSlice("target-dir"),
	}
	if c.Bool("sim-in-vm") {
		b.Backend = result.Backend{Name: "sim", Simulated: true, Reason: reason,
			Description: "sim: simulated fabric (pure Go, not an RDMA measurement) in a QEMU guest"}
		b.fabric = fabricSpec(c, "sim")
	}
	return b, nil
}
