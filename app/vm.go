package app

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/runner/vm"
)

// vmFlags size the Soft-RoCE guest; the defaults are a small cloud
// instance's (2 vCPU, 8 GiB, as an AWS t3.large).
func vmFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "vm-cpus", Value: 2, Usage: "vm: guest vCPUs"},
		&cli.IntFlag{Name: "vm-mem", Value: 8192, Usage: "vm: guest memory in MiB; it, or twice it with --vm-peer, must fit in the host's available memory (checked before boot)"},
		&cli.StringFlag{Name: "vm-cpu-model", Value: vm.DefaultCPUModel, Usage: "vm: QEMU -cpu model of the guest (under emulation qemu64 connected clients fastest of the models measured: results/README.md)"},
		&cli.IntFlag{Name: "vm-max-map-count", Usage: "vm: set the guest's vm.max_map_count (default: the kernel's 65530)"},
		&cli.StringFlag{Name: "vm-kernel-args", Usage: "vm: extra guest kernel command line, space-separated (e.g. mitigations=off); recorded in the backend description"},
	}
}

// guestOptions are the guest the vm flags ask for.
func guestOptions(c *cli.Context) vm.GuestOptions {
	return vm.GuestOptions{CPUs: c.Int("vm-cpus"), MemMiB: c.Int("vm-mem"), CPUModel: c.String("vm-cpu-model"),
		KernelArgs: strings.Fields(c.String("vm-kernel-args")), MaxMapCount: c.Int("vm-max-map-count"), Out: c.App.Writer,
		Peer: c.Bool("vm-peer"), NoReference: c.Bool("vm-no-reference"), Shared: sharedGuest}
}

// sharedGuest, set by this package's tests, lends one booted guest to
// every run that fits it; nil otherwise: each run boots its own.
var sharedGuest *vm.Shared

// vmPeerFlag puts the load generators in a second guest, across a
// virtual link from the server's (search and ramp).
func vmPeerFlag() cli.Flag {
	return &cli.BoolFlag{Name: "vm-peer", Usage: "vm: boot a second guest on a virtual link and run the load generators there, started over SSH: Soft-RoCE across two hosts (rxe2 on each guest's link; each guest gets --vm-cpus and --vm-mem)"}
}

// vmNoReferenceFlag leaves out the reference tools a vm run takes
// beside its points: under emulation they cost seconds a run, more
// than a small point.
func vmNoReferenceFlag() cli.Flag {
	return &cli.BoolFlag{Name: "vm-no-reference", Usage: "vm: run no reference tool in the guest (ibv_rc_pingpong, and perftest's data-path tools before and after the points and before each 1-client point): a shorter run, with nothing to set its figures against"}
}

// simInVMFlag runs the sim backend inside the guest: same simulated
// fabric, but under the guest's kernel, where rdmaprobe is root with every
// capability. For counts past what this host lets a process open (a
// sandbox's hard RLIMIT_NOFILE of 20,000 stops the sim server at ~20k
// clients: one TLS connection each).
func simInVMFlag() cli.Flag {
	return &cli.BoolFlag{Name: "sim-in-vm", Usage: "with --backend sim: run the simulated fabric's server and generators inside the QEMU guest (for counts past this host's open-file limit; still simulated)"}
}
