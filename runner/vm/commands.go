package vm

import (
	"fmt"
	"os"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// The device and address commands use in the guest (softroce's netdev
// device): rdma_cm resolves there, and GID index 0 works.
const (
	GuestNetdevDevice = softroce.NetdevRxe
	GuestNetdevAddr   = softroce.NetdevAddr
)

// guestCommands is what server and client commands need of a guest: the
// programs they name, carried into its image, and the spec they run
// with there (the netdev device, where rdma_cm resolves and GID index 0
// works, and its address). Each command sees the netdev device alone
// (command.Spec.OnlyDevice), so one that opens the first device with
// GID index 0, as most RDMA examples do, opens that one: the choice is
// by name, not by the order the kernel numbered rxe0 and rxe1 in.
type guestCommands struct {
	spec     runner.Spec
	binaries []string
}

func commandsForGuest(spec runner.Spec, opts GuestOptions) (*guestCommands, error) {
	gc := &guestCommands{spec: spec}
	gc.spec.Fabric.Device = softroce.NetdevRxe
	if spec.Server != nil {
		srv := *spec.Server
		if srv.Addr == "" {
			srv.Addr = softroce.NetdevAddr
		}
		srv.OnlyDevice = softroce.NetdevRxe
		gc.spec.Server = &srv
	}
	if spec.Client != nil {
		cl := *spec.Client
		cl.OnlyDevice = softroce.NetdevRxe
		gc.spec.Client = &cl
	}
	var argvs [][]string
	if spec.Server != nil {
		argvs = append(argvs, spec.Server.Argv)
	}
	if spec.Client != nil {
		argvs = append(argvs, spec.Client.Argv)
	}
	bins, err := command.Programs(argvs...)
	if err != nil {
		return nil, err
	}
	gc.binaries = bins
	for _, d := range opts.TargetDirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--target-dir %s: not a directory", d)
		}
	}
	return gc, nil
}
