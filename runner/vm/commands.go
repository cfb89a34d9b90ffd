package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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
	bins, err := CommandPrograms(argvs...)
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

// CommandPrograms lists the host programs command templates name: each
// argv[0] (looked up in $PATH) and every argument that is an absolute
// path to an executable file. Arguments with placeholders ({build}/srv)
// exist only once built and are copied then.
func CommandPrograms(argvs ...[]string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, argv := range argvs {
		for i, a := range argv {
			if strings.Contains(a, "{") {
				continue
			}
			var p string
			switch {
			case i == 0:
				lp, err := exec.LookPath(a)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", a, err)
				}
				if p, err = filepath.Abs(lp); err != nil {
					return nil, err
				}
			case filepath.IsAbs(a):
				if fi, err := os.Stat(a); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
					continue
				}
				p = a
			default:
				continue
			}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}
